"""Every row of the lab tables, checked in this process (tests/in_process.py): the cheap half of the
mutant catalogue, in test-fast. tests/test_mutants.py grades the same notebooks with the real nbgrader.

    solution  full marks on every check cell
    mistake   fewer points in the parts of its row it names (each check cell of a task judges one part,
              given the student's own other parts), full marks on every other cell, and the failing
              checks say what the mistake was; a task's mistake already fails a visible check
    variant   another correct formulation: full marks
"""

import pytest

from course_staff.testbed import harness as h
from tests import in_process
from course_staff.testbed.lab_tables import table

MISTAKES = [(lab, row, m) for lab in h.LABS for row, m in table(lab).mistakes()]
VARIANTS = [(lab, row, v) for lab in h.LABS for row, v in table(lab).variants()]


def _id(case):
    return f"{case[0]}-{case[2].name}"


def verdict(lab, row, mistake, got):
    """What is wrong with the scores ``got`` ({grade_id: (points, output)}) of ``mistake`` on ``row``
    (None if nothing): caught in the parts it names, nowhere else (not in another part of its own
    task either), named, and (a task's) by a visible check."""
    full, own = table(lab).auto_marks(), set(table(lab).parts(row, mistake))
    lost = {gid: out for gid, (p, out) in got.items() if gid in own and p < full[gid]}
    if not lost:
        return f"{mistake.name} was not caught by {sorted(own)}"
    others = {gid: p for gid, (p, _) in got.items() if gid not in own and p != full[gid]}
    if others:
        return f"{mistake.name} also lost points on {others}"
    said = "\n".join(lost.values())
    if mistake.says not in said:
        return f"{mistake.name}: the failing checks do not say {mistake.says!r}:\n{said}"
    if row in table(lab).tasks and all(in_process.VISIBLE_PASSED.search(out) for out in lost.values()):
        return f"{mistake.name} passes every visible check: validate would tell the student all is well"
    return None


@pytest.mark.parametrize("lab", h.LABS)
def test_solution_gets_full_marks(lab):
    got = {gid: p for gid, (p, _) in in_process.scores(lab).items()}
    assert got == table(lab).auto_marks()


@pytest.mark.parametrize("case", MISTAKES, ids=_id)
def test_mistake_loses_points_on_its_row_only(case):
    lab, row, mistake = case
    problem = verdict(lab, row, mistake, in_process.scores(lab, {row.solution: list(mistake.edits)}))
    assert problem is None, problem


@pytest.mark.parametrize("case", VARIANTS, ids=_id)
def test_correct_variant_gets_full_marks(case):
    lab, row, variant = case
    got = {gid: p for gid, (p, _) in in_process.scores(lab, {row.solution: list(variant.edits)}).items()}
    assert got == table(lab).auto_marks(), f"{variant.name} is correct but scored {got}"


def test_the_verdict_sees_a_mistake_that_is_not_caught_or_caught_elsewhere():
    row, mistake = table("lab12").mistakes()[0]
    caught = in_process.scores("lab12", {row.solution: list(mistake.edits)})
    assert verdict("lab12", row, mistake, caught) is None
    clean = in_process.scores("lab12")
    assert "was not caught" in verdict("lab12", row, mistake, clean)
    other = next(gid for gid in clean if gid not in dict(row.checks))
    assert "also lost points" in verdict("lab12", row, mistake, {**caught, other: (0.0, "")})


def test_the_verdict_judges_each_part_of_a_task_on_its_own():
    """A mistake in one part of Task 5 that also costs another part's point is caught: each part is
    judged given the student's own other parts, as its visible cell says."""
    row, mistake = next((r, m) for r, m in table("lab12").mistakes() if m.name == "ppo_plain_mean")
    assert table("lab12").parts(row, mistake) == ("test_ppo_rlhf_loss",)
    caught = in_process.scores("lab12", {row.solution: list(mistake.edits)})
    assert verdict("lab12", row, mistake, caught) is None
    assert "also lost points" in verdict("lab12", row, mistake, {**caught, "test_ppo_rlhf_loss_value": (0.0, "")})


def test_a_task_with_several_parts_names_the_parts_of_each_mistake():
    for lab in h.LABS:
        for row, mistake in table(lab).mistakes():
            parts = table(lab).parts(row, mistake)
            assert parts and set(parts) <= set(row.cells), f"{lab}/{mistake.name}: {parts} are not parts of {row.name}"
