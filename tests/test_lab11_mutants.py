"""Lab 11 graded by the real nbgrader: the solution, a blank notebook, every mutant and every correct
variant of tests/mutants_lab11.py, in ONE `nbgrader autograde` call on a temporary course.

    solution  full marks on every check cell
    blank     0 on every check cell, and the grader completes
    mutant    fewer points on its own task's check cell, full marks everywhere else, and the
              check's output names the mistake
    variant   another correct formulation (some emit numpy warnings): full marks
"""

from collections import Counter

import nbformat
import pytest

import nbgrader_harness as h
from mutants_lab11 import MUTANTS, VARIANTS

pytestmark = pytest.mark.slow
LAB = "lab11"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = h.course_copy(tmp_path_factory.mktemp("lab11_mutants"), labs=(LAB,))
    subs = {"solution": h.solved_submission(LAB), "blank": h.blank_submission(LAB)}
    for m in MUTANTS + VARIANTS:
        subs[m.student] = h.solved_submission(LAB, edits={m.solution_grade_id: list(m.edits)})
    grades = h.autograde(course, LAB, subs)
    assert not grades.ungradable, f"nbgrader could not grade: {grades.ungradable}\n{grades.log[-3000:]}"
    return grades, h.max_scores(course, LAB), course


def _check_output(course, student, grade_id):
    """Everything the autograded check cell printed (streams and error messages)."""
    nb = nbformat.read(str(course / "autograded" / student / LAB / f"{LAB}.ipynb"), as_version=4)
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


def test_catalogue_covers_every_task():
    counts = Counter(m.solution_grade_id for m in MUTANTS)
    solutions = set(h.solution_text(LAB))
    assert set(counts) == solutions
    assert all(n >= 3 for n in counts.values()), counts
    assert all(m.task_grade_id == "test_" + m.solution_grade_id.removesuffix("_solution") for m in MUTANTS)
    names = [m.student for m in MUTANTS + VARIANTS]
    assert len(set(names)) == len(names)


def test_solution_gets_full_marks(graded):
    grades, maxima, _ = graded
    assert grades["solution"] == maxima


def test_blank_gets_zero(graded):
    grades, maxima, _ = graded
    assert set(grades["blank"]) == set(maxima)
    assert all(score == 0 for score in grades["blank"].values()), grades["blank"]


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_loses_points_on_its_task_only(graded, mutant):
    grades, maxima, course = graded
    got = grades[mutant.student]
    assert set(got) == set(maxima)
    assert got[mutant.task_grade_id] < maxima[mutant.task_grade_id], \
        f"{mutant.name} was not caught by {mutant.task_grade_id}: {got}"
    others = {gid: s for gid, s in got.items() if gid != mutant.task_grade_id and s != maxima[gid]}
    assert not others, f"{mutant.name} also lost points on {others}"
    if mutant.says:
        text = _check_output(course, mutant.student, mutant.task_grade_id)
        assert mutant.says in text, f"{mutant.name}: the message does not say {mutant.says!r}:\n{text}"


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda m: m.name)
def test_correct_variant_gets_full_marks(graded, variant):
    grades, maxima, _ = graded
    assert grades[variant.student] == maxima, f"{variant.name} is correct but scored {grades[variant.student]}"
