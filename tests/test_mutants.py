"""Each lab graded by the real nbgrader: the solution, a blank notebook, every mutant and every
correct variant of its catalogue (tests/mutants_<lab>.py), in ONE `nbgrader autograde` call per lab
on a temporary course.

    solution  full marks on every check cell
    blank     0 on every check cell, and the grader completes
    mutant    fewer points on its own task's check cell, full marks everywhere else, and the
              check's output names the mistake
    variant   another correct formulation (some emit warnings): full marks
"""

from collections import Counter

import nbformat
import pytest

import mutants_lab11
import mutants_lab12
from course_staff import harness as h

pytestmark = pytest.mark.slow
CATALOGUES = {"lab11": mutants_lab11, "lab12": mutants_lab12}
MUTANTS = [(lab, m) for lab, cat in CATALOGUES.items() for m in cat.MUTANTS]
VARIANTS = [(lab, v) for lab, cat in CATALOGUES.items() for v in cat.VARIANTS]


def _case_id(case):
    lab, m = case
    return f"{lab}-{m.name}"


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """lab -> (grades, max scores, course): each lab's submissions graded in one nbgrader call."""
    results = {}
    for lab, cat in CATALOGUES.items():
        course = h.course_copy(tmp_path_factory.mktemp(f"{lab}_mutants"), labs=(lab,))
        subs = {"solution": h.solved_submission(lab), "blank": h.blank_submission(lab)}
        for m in cat.MUTANTS + cat.VARIANTS:
            subs[m.student] = h.solved_submission(lab, edits={m.solution_grade_id: list(m.edits)})
        grades = h.autograde(course, lab, subs)
        assert not grades.ungradable, f"nbgrader could not grade: {grades.ungradable}\n{grades.log[-3000:]}"
        results[lab] = grades, h.max_scores(course, lab), course
    return results


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


@pytest.mark.parametrize("lab", CATALOGUES)
def test_catalogue_covers_every_task(lab):
    cat = CATALOGUES[lab]
    counts = Counter(m.solution_grade_id for m in cat.MUTANTS)
    assert set(counts) == set(h.solution_text(lab))
    assert all(n >= 3 for n in counts.values()), counts
    assert all(m.task_grade_id == "test_" + m.solution_grade_id.removesuffix("_solution") for m in cat.MUTANTS)
    names = [m.student for m in cat.MUTANTS + cat.VARIANTS]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("lab", CATALOGUES)
def test_solution_gets_full_marks(graded, lab):
    grades, maxima, _ = graded[lab]
    assert grades["solution"] == maxima


@pytest.mark.parametrize("lab", CATALOGUES)
def test_blank_gets_zero(graded, lab):
    grades, maxima, _ = graded[lab]
    assert set(grades["blank"]) == set(maxima)
    assert all(score == 0 for score in grades["blank"].values()), grades["blank"]


@pytest.mark.parametrize("case", MUTANTS, ids=_case_id)
def test_mutant_loses_points_on_its_task_only(graded, case):
    lab, mutant = case
    grades, maxima, course = graded[lab]
    got = grades[mutant.student]
    assert set(got) == set(maxima)
    assert got[mutant.task_grade_id] < maxima[mutant.task_grade_id], \
        f"{mutant.name} was not caught by {mutant.task_grade_id}: {got}"
    others = {gid: s for gid, s in got.items() if gid != mutant.task_grade_id and s != maxima[gid]}
    assert not others, f"{mutant.name} also lost points on {others}"
    if mutant.says:
        text = _check_output(course, lab, mutant.student, mutant.task_grade_id)
        assert mutant.says in text, f"{mutant.name}: the message does not say {mutant.says!r}:\n{text}"


@pytest.mark.parametrize("case", VARIANTS, ids=_case_id)
def test_correct_variant_gets_full_marks(graded, case):
    lab, variant = case
    grades, maxima, _ = graded[lab]
    assert grades[variant.student] == maxima, f"{variant.name} is correct but scored {grades[variant.student]}"
