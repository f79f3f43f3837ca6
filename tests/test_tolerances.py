"""Every check's tolerance sits between float rounding and the nearest known mistake, with room on
both sides (course_utils/checks.py states each tolerance against the scale of what it compares).

Each lab's check cells run in-process (tests/verdicts.py) on the solution, every correct variant and
every known mistake of the lab tables, with the tolerances of every ``assert_close`` scaled:

* the float tolerances 10x tighter: the solution and every variant still pass, so a verdict does not
  hang on the last bits another CPU computes differently;
* the float tolerances 20x looser, and every tolerance (frequencies' too) 10x looser: every mistake
  still fails, so no tolerance was widened until a mistake slipped through.

The control: everything 100x tighter fails the solution (a tolerance that small would be machine noise).
"""

import pytest

from tests import verdicts as V
from course_staff.testbed.lab_tables import table

pytestmark = pytest.mark.slow


def correct(lab):
    return ["solution"] + [v.student for _, v in table(lab).variants()]


def mistaken(lab):
    return [m.student for _, m in table(lab).mistakes()]


def graded(factor, floats_only, students):
    """{lab: verdicts} of the ``students(lab)`` of each lab (only those a test asks about are graded)."""
    with V.tolerances_scaled(factor, floats_only):
        return {lab: V.grading_verdicts(lab, students(lab)) for lab in V.LABS}


def failing(students, names):
    return [n for n in names if not all(ok for _, ok in students[n].values())]


@pytest.mark.parametrize("factor", [0.1])
def test_ten_times_tighter_float_tolerances_still_pass_every_correct_answer(factor):
    for lab, students in graded(factor, True, correct).items():
        assert not failing(students, correct(lab)), f"{lab}: correct answers fail with float tolerances x{factor}"


@pytest.mark.parametrize("factor, floats_only", [(20, True), (10, False)])
def test_looser_tolerances_still_fail_every_mistake(factor, floats_only):
    for lab, students in graded(factor, floats_only, mistaken).items():
        slipped = [m.name for _, m in table(lab).mistakes()
                   if m.student not in failing(students, [m.student])]
        assert not slipped, f"{lab}: with tolerances x{factor} these mistakes pass every check: {slipped}"


def test_the_control_hundred_times_tighter_fails_the_solution():
    results = graded(0.01, False, lambda lab: ["solution"])
    assert any(failing(s, ["solution"]) for s in results.values()), \
        "100x tighter tolerances still pass the solution: the scaling does not reach the checks"
