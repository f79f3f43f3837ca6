"""Lab 12 graded by the real nbgrader: the solution, a blank notebook and every mutant of
tests/mutants_lab12.py, in ONE `nbgrader autograde` call on a temporary course.

    solution  full marks on every check cell
    blank     0 on every check cell, and the grader completes
    mutant    fewer points on its own task's check cell, full marks everywhere else
"""

from collections import Counter

import pytest

import nbgrader_harness as h
from mutants_lab12 import MUTANTS

pytestmark = pytest.mark.slow
LAB = "lab12"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = h.course_copy(tmp_path_factory.mktemp("lab12_mutants"), labs=(LAB,))
    subs = {"solution": h.solved_submission(LAB), "blank": h.blank_submission(LAB)}
    for m in MUTANTS:
        subs[m.student] = h.solved_submission(LAB, edits={m.solution_grade_id: list(m.edits)})
    grades = h.autograde(course, LAB, subs)
    assert not grades.ungradable, f"nbgrader could not grade: {grades.ungradable}\n{grades.log[-3000:]}"
    return grades, h.max_scores(course, LAB)


def test_catalogue_covers_every_task():
    counts = Counter(m.task_grade_id for m in MUTANTS)
    solutions = {gid for gid in h.solution_text(LAB)}
    assert {m.solution_grade_id for m in MUTANTS} == solutions
    assert all(n >= 3 for n in counts.values()), counts
    assert len({m.student for m in MUTANTS}) == len(MUTANTS)


def test_solution_gets_full_marks(graded):
    grades, maxima = graded
    assert grades["solution"] == maxima


def test_blank_gets_zero(graded):
    grades, maxima = graded
    assert set(grades["blank"]) == set(maxima)
    assert all(score == 0 for score in grades["blank"].values()), grades["blank"]


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_loses_points_on_its_task_only(graded, mutant):
    grades, maxima = graded
    got = grades[mutant.student]
    assert set(got) == set(maxima)
    assert got[mutant.task_grade_id] < maxima[mutant.task_grade_id], \
        f"{mutant.name} was not caught by {mutant.task_grade_id}: {got}"
    others = {gid: s for gid, s in got.items() if gid != mutant.task_grade_id and s != maxima[gid]}
    assert not others, f"{mutant.name} also lost points on {others}"
