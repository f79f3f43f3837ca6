"""Each lab graded by the real nbgrader: every mistake and every correct variant of its table
(course_staff/testbed/lab_tables), in ONE `nbgrader autograde` call for every lab on a temporary course.
(The solution and the blank release, graded by the same nbgrader, are tests/test_lifecycle.py's
students "sol" and "blank": full marks on every check cell with the written answers waiting for a
TA, and 0 on every graded cell; they are not graded a second time here.)

    mistake   fewer points in the parts of its row it names, full marks on its row's other parts and on the
              rows it shares no notebook with, and the failing checks' output names the mistake; a task's
              mistake already fails a visible check (so that `nbgrader validate` warns the student too)
    variant   another correct formulation (some emit warnings): full marks on its row

The mistakes and variants are packed into "rounds": notebooks that carry at most one of them per row
(ten for Lab 11 instead of sixty, eight for Lab 12), since each row's checks test that row's function.
That they do is checked cell by cell: nbgrader's score of every check cell of a round equals the
score of the same notebook's checks run in process (tests/in_process.py), where tests/test_mistakes.py
(test-fast) also checks each mistake alone against every row.

Run one lab with `pytest tests/test_mutants.py -k lab12`.
"""

import nbformat
import pytest

from course_staff.testbed import harness as h
from tests import in_process
from course_staff.testbed.lab_tables import table

pytestmark = pytest.mark.slow
LABS = h.LABS
MISTAKES = [(lab, row, m) for lab in LABS for row, m in table(lab).mistakes()]
VARIANTS = [(lab, row, v) for lab in LABS for row, v in table(lab).variants()]


def _case_id(case):
    lab, _, m = case
    return f"{lab}-{m.name}"


def rounds(lab):
    """[[(row, mistake or variant), ...] per notebook]: the k-th case of every row in round k."""
    by_row = {}
    for row, case in table(lab).mistakes() + table(lab).variants():
        by_row.setdefault(row.solution, []).append((row, case))
    return [[cases[k] for cases in by_row.values() if k < len(cases)]
            for k in range(max(map(len, by_row.values())))]


def edits(round_):
    return {row.solution: list(case.edits) for row, case in round_}


def round_of(lab, case):
    """(student id, round) of the notebook that carries ``case``."""
    return next((f"round{k}", r) for k, r in enumerate(rounds(lab)) if any(c is case for _, c in r))


def _lab_of(item):
    params = item.callspec.params
    return params["lab"] if "lab" in params else params["case"][0]


@pytest.fixture(scope="module")
def graded(request, tmp_path_factory):
    """lab -> (grades, course): the rounds of every lab that a selected test needs (so that `-k lab12`
    grades Lab 12 only), graded in ONE nbgrader call."""
    labs = sorted({_lab_of(item) for item in request.session.items
                   if item.module is request.module and "graded" in item.fixturenames})
    course = h.course_copy(tmp_path_factory.mktemp("mutants"), labs=labs)
    subs = {lab: {f"round{k}": h.solved_submission(lab, edits=edits(round_)) for k, round_ in enumerate(rounds(lab))}
            for lab in labs}
    by_lab = h.autograde_labs(course, subs)
    for lab, grades in by_lab.items():
        assert not grades.ungradable, f"nbgrader could not grade {lab}: {grades.ungradable}\n{grades.log[-3000:]}"
    return lambda lab: (by_lab[lab], course)


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
def test_every_case_is_in_one_round_with_one_case_per_row(lab):
    packed = [case for r in rounds(lab) for _, case in r]
    assert sorted(c.name for c in packed) == sorted(c.name for _, c in table(lab).mistakes() + table(lab).variants())
    for r in rounds(lab):
        assert len({row.solution for row, _ in r}) == len(r)


@pytest.mark.parametrize("lab", LABS)
def test_nbgrader_scores_each_round_as_its_checks_do_in_process(graded, lab):
    grades, _ = graded(lab)
    for k, round_ in enumerate(rounds(lab)):
        expected = {gid: p for gid, (p, _) in in_process.scores(lab, edits(round_)).items()}
        got = {gid: grades[f"round{k}"][gid] for gid in expected}
        assert got == expected, f"round{k} ({[c.name for _, c in round_]}): nbgrader {got}, in process {expected}"


@pytest.mark.parametrize("case", MISTAKES, ids=_case_id)
def test_mistake_loses_points_on_its_row_only(graded, case):
    lab, row, mistake = case
    grades, course = graded(lab)
    student, round_ = round_of(lab, mistake)
    got = grades[student]
    full = table(lab).auto_marks()
    own = table(lab).parts(row, mistake)                                 # the parts it may lose points in
    lost = {gid: got[gid] for gid in own if got[gid] < full[gid]}
    assert lost, f"{mistake.name} was not caught by {sorted(own)}: {got}"
    # the other rows with a case in this notebook may lose points there; the mistake's own row carries it alone,
    # so its other parts keep full marks (each part of a task is graded on its own)
    shared = {gid for r, _ in round_ if r is not row for gid, _ in r.checks}
    others = {gid: got[gid] for gid in full if gid not in shared and gid not in own and got[gid] != full[gid]}
    assert not others, f"{mistake.name} also lost points on {others}"
    outputs = {gid: _check_output(course, lab, student, gid) for gid in lost}
    said = "\n".join(outputs.values())
    assert mistake.says in said, f"{mistake.name}: the failing checks do not say {mistake.says!r}:\n{said}"
    if row in table(lab).tasks:      # a concept check's value is judged by its hidden test alone
        assert any(not in_process.VISIBLE_PASSED.search(out) for out in outputs.values()), \
            f"{mistake.name} passes every visible check: validate would tell the student all is well"


@pytest.mark.parametrize("case", VARIANTS, ids=_case_id)
def test_correct_variant_gets_full_marks(graded, case):
    lab, row, variant = case
    grades, _ = graded(lab)
    student, _ = round_of(lab, variant)
    got = {gid: grades[student][gid] for gid, _ in row.checks}
    assert got == dict(row.checks), f"{variant.name} is correct but scored {got}"
