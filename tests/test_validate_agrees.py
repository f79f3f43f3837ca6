"""`nbgrader validate` tells students the truth: what it reports agrees with what autograde gives.

Students run validate on their own machine (the README and the labs tell them to), with nbgrader's
defaults: none of the course's nbgrader_config.py. Autograde runs with it. So nothing in the course's
autograde configuration may change a cell's outputs before grading (a warning filter did: a correct
answer that let numpy's "divide by zero" warning through got full marks from autograde and "VALIDATION
FAILED" from validate); the check cells silence warnings themselves.

For each simulated student that tests/lifecycle.py's ``validated`` names, both graders see the same notebook
(autograde's verdicts are the lifecycle's own, graded once per test session), and

* every cell that validate reports as failing loses points in autograde (full marks are never
  reported as a failure), and
* every cell that loses points in autograde is reported by validate, except a concept check whose
  answer has the right form: its value is judged by a hidden test, which validate cannot run (the
  labs say so next to each concept check);
* a notebook that validate cannot check (changed test cells, a dead kernel) does not get full marks;
* a notebook held for review (it tampers with the checks) gets 0 on every check cell, whatever validate,
  which cannot see the hold, says of a part its answers pass.
"""

import pytest

from course_staff.testbed import harness as h
from course_staff.testbed import students as st
from course_staff.testbed.lab_tables import table
from tests import lifecycle
from tests.lifecycle import chatty

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=h.LABS)
def verdicts(request):
    """Autograde's verdicts are the lifecycle's (tests/lifecycle.py grades these students with everyone
    else's, in its one autograde); validate runs here on the same submitted notebooks."""
    lab = request.param
    life = lifecycle.run()
    students = {s: life.rosters[lab][s] for s in lifecycle.validated(lab)}
    grades = life.autograded[lab]
    validated = {}
    for student in students:
        path = life.course / "submitted" / student / lab / f"{lab}.ipynb"
        validated[student] = h.validate(path)
        print(f"{lab} {student}: validate {validated[student]}, autograde {h.total(grades[student]):g}")
    return lab, students, grades, validated


def test_validate_and_autograde_agree(verdicts):
    lab, students, grades, validated = verdicts
    marks = table(lab).full_marks()
    concepts = {gid for row in table(lab).concepts for gid, _ in row.checks}
    for student, (_, expected) in students.items():
        got, said = grades[student], validated[student]
        assert got == expected, f"{lab}/{student}: autograde gave {got}, expected {expected}"
        lost = {gid for gid, score in got.items() if score is not None and score < marks[gid]}
        if said["error"] or said["changed"]:
            assert lost, f"{lab}/{student}: validate could not check it ({said}), yet autograde gave full marks"
            continue
        failed = set(said["failed"])
        assert failed <= lost, f"{lab}/{student}: validate reports {sorted(failed - lost)} failing, autograde " \
                               f"gives them full marks"
        if set(grades.flagged.get(student, ())) & set(table(lab).auto_marks()):    # check cells await a TA
            # held for review (it tampers with the checks): 0 on every check cell until a TA looks, which
            # validate cannot know; a part its wrong answers pass (an "inputs left alone" part) reads passed there
            assert lost == set(table(lab).auto_marks()), f"{lab}/{student} is flagged but not held at 0: {got}"
            continue
        assert lost - failed <= concepts, f"{lab}/{student}: autograde takes points on {sorted(lost - failed)}, " \
                                          f"validate says they pass"


def test_a_correct_answer_that_warns_passes_both(verdicts):
    lab, students, grades, validated = verdicts
    for student in ("sol", "numpywarn", "warnings"):
        if student in students:
            assert validated[student] == {"failed": [], "changed": [], "error": None}, (student, validated[student])
            assert all(grades[student][gid] == p for gid, p in table(lab).auto_marks().items()), student


def test_stderr_fails_both(verdicts):
    lab, _, grades, validated = verdicts
    task = st.row(lab, chatty(lab))
    checks = {gid for gid, _ in task.checks}
    assert checks <= set(validated["chatter"]["failed"])
    assert all(grades["chatter"][gid] == 0 for gid in checks)
