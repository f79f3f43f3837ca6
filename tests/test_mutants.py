"""Each lab graded by the real nbgrader: the solution, a blank notebook, every mistake and every
correct variant of its table (tests/lab_tables), in ONE `nbgrader autograde` call per lab on a
temporary course.

    solution  full marks on every check cell; its written answers wait for a TA
    blank     0 on every graded cell, and the grader completes
    mistake   fewer points on its own row's check cells, full marks on every other check cell, and
              the failing checks' output names the mistake; a task's mistake already fails a visible
              check (so that `nbgrader validate` warns the student too)
    variant   another correct formulation (some emit warnings): full marks

Run one lab with `pytest tests/test_mutants.py -k lab12` (about 5 minutes on a quiet 2-core machine).
"""

import re

import nbformat
import pytest

import harness as h
from lab_tables import table

pytestmark = pytest.mark.slow
LABS = h.LABS
VISIBLE_PASSED = re.compile(r"visible checks pass")   # printed at the end of a check cell's visible part
MISTAKES = [(lab, row, m) for lab in LABS for row, m in table(lab).mistakes()]
VARIANTS = [(lab, row, v) for lab in LABS for row, v in table(lab).variants()]


def _case_id(case):
    lab, _, m = case
    return f"{lab}-{m.name}"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """lab -> (grades, course): each lab's submissions graded in one nbgrader call (lazily, so that
    `-k lab12` grades Lab 12 only)."""
    results = {}

    def grade(lab):
        if lab not in results:
            course = h.course_copy(tmp_path_factory.mktemp(f"{lab}_mutants"), labs=(lab,))
            subs = {"solution": h.solved_submission(lab), "blank": h.blank_submission(lab)}
            for row, m in table(lab).mistakes() + table(lab).variants():
                subs[m.student] = h.solved_submission(lab, edits={row.solution: list(m.edits)})
            grades = h.autograde(course, lab, subs)
            assert not grades.ungradable, f"nbgrader could not grade: {grades.ungradable}\n{grades.log[-3000:]}"
            results[lab] = grades, course
        return results[lab]
    return grade


def _check_output(course, lab, student, grade_id):
    """Everything the autograded check cell printed (streams and error messages)."""
    nb = nbformat.read(str(course / "autograded" / student / lab / f"{lab}.ipynb"), as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            parts = []
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream":
                    parts.append(out.get("text", ""))
                elif out.get("output_type") == "error":
                    parts.append(f"{out.get('ename')}: {out.get('evalue')}")
            return "\n".join(parts)
    raise AssertionError(f"no cell {grade_id} in the autograded notebook of {student}")


@pytest.mark.parametrize("lab", LABS)
def test_table_covers_every_row(lab):
    """Every task has at least three likely mistakes, every concept check one; every mistake names
    what its check must say; student ids are unique."""
    for row in table(lab).tasks:
        assert len(row.mistakes) >= 3, f"{lab}/{row.name} has {len(row.mistakes)} mistakes"
    for row in table(lab).concepts:
        assert row.mistakes, f"{lab}/{row.name} has no wrong answer"
    assert all(m.says for _, m in table(lab).mistakes())
    names = [m.student for _, m in table(lab).mistakes() + table(lab).variants()]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("lab", LABS)
def test_solution_gets_full_marks(graded, lab):
    grades, _ = graded(lab)
    lab_table = table(lab)
    assert grades["solution"] == {**lab_table.auto_marks(), **{q: None for q in lab_table.written_marks()}}
    assert set(grades.flagged["solution"]) == set(lab_table.written_marks()), "the written answers wait for a TA"


@pytest.mark.parametrize("lab", LABS)
def test_blank_gets_zero(graded, lab):
    grades, _ = graded(lab)
    assert grades["blank"] == {g: 0.0 for g in table(lab).full_marks()}


@pytest.mark.parametrize("case", MISTAKES, ids=_case_id)
def test_mistake_loses_points_on_its_row_only(graded, case):
    lab, row, mistake = case
    grades, course = graded(lab)
    got = grades[mistake.student]
    full = table(lab).auto_marks()
    own = dict(row.checks)
    lost = {gid: got[gid] for gid in own if got[gid] < own[gid]}
    assert lost, f"{mistake.name} was not caught by {sorted(own)}: {got}"
    others = {gid: got[gid] for gid in full if gid not in own and got[gid] != full[gid]}
    assert not others, f"{mistake.name} also lost points on {others}"
    outputs = {gid: _check_output(course, lab, mistake.student, gid) for gid in lost}
    said = "\n".join(outputs.values())
    assert mistake.says in said, f"{mistake.name}: the failing checks do not say {mistake.says!r}:\n{said}"
    if row in table(lab).tasks:      # a concept check's value is judged by its hidden test alone
        assert any(not VISIBLE_PASSED.search(out) for out in outputs.values()), \
            f"{mistake.name} passes every visible check: validate would tell the student all is well"


@pytest.mark.parametrize("case", VARIANTS, ids=_case_id)
def test_correct_variant_gets_full_marks(graded, case):
    lab, _, variant = case
    grades, _ = graded(lab)
    got = {gid: grades[variant.student][gid] for gid in table(lab).auto_marks()}
    assert got == table(lab).auto_marks(), f"{variant.name} is correct but scored {got}"
