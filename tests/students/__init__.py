"""Simulated students for the grading tests: honest, partial and adversarial submissions.

Each builder returns a submission (an nbformat notebook, or a str written as is) together with the
scores it must get, as {test grade_id: points}. Builders find a lab's tasks from its source
notebook, by the course's naming: solution cell `<task>_solution`, test cells `test_<task>...`.
"""

import re
from dataclasses import dataclass

from course_staff import harness as h


@dataclass
class Task:
    name: str               # e.g. "kl_estimators"
    solution_id: str        # "kl_estimators_solution"
    function: str           # the function the solution cell defines first
    test_ids: list          # ["test_kl_estimators"]
    points: float


def tasks(lab):
    """The lab's tasks in notebook order."""
    nb = h._read("source", lab)
    grade_cells = [(c.metadata.nbgrader["grade_id"], float(c.metadata.nbgrader.get("points", 0)))
                   for c in nb.cells if h._grading(c).get("grade")]
    found = []
    for c in nb.cells:
        gid = h._grading(c).get("grade_id", "")
        if h._grading(c).get("solution") and gid.endswith("_solution"):
            name = gid[: -len("_solution")]
            tests = [g for g, _ in grade_cells if g == f"test_{name}" or g.startswith(f"test_{name}_")]
            fn = re.search(r"^def (\w+)\(", c.source, re.M)
            found.append(Task(name, gid, fn.group(1) if fn else name, tests,
                              sum(p for g, p in grade_cells if g in tests)))
    return found


def full_marks(lab):
    """{test grade_id: points} for every graded cell of the lab's source."""
    return {c.metadata.nbgrader["grade_id"]: float(c.metadata.nbgrader["points"])
            for c in h._read("source", lab).cells if h._grading(c).get("grade")}


def _cell(nb, grade_id):
    for cell in nb.cells:
        if h._grading(cell).get("grade_id") == grade_id:
            return cell
    raise KeyError(grade_id)


def _append(nb, grade_id, code):
    cell = _cell(nb, grade_id)
    cell.source = cell.source.rstrip() + "\n\n" + code.strip() + "\n"
    return nb


def _losing(lab, *lost_tasks):
    expected = full_marks(lab)
    for task in lost_tasks:
        for gid in task.test_ids:
            expected[gid] = 0.0
    return expected


def solution(lab):
    return h.solved_submission(lab), full_marks(lab)


def blank(lab):
    return h.blank_submission(lab), {g: 0.0 for g in full_marks(lab)}


def partial(lab, solved):
    """Only the tasks named in ``solved`` are done; the others keep the release stub."""
    done = h.solved_submission(lab)
    nb = h.blank_submission(lab)
    for task in tasks(lab):
        if task.name in solved:
            _cell(nb, task.solution_id).source = _cell(done, task.solution_id).source
    lost = [t for t in tasks(lab) if t.name not in solved]
    return nb, _losing(lab, *lost)


def _redefine(lab, task, body, preamble=""):
    """The full solution, except that ``task``'s function is redefined after it with ``body``."""
    nb = h.solved_submission(lab)
    code = f"{preamble}\n_reference_{task.function} = {task.function}\n\n" \
           f"def {task.function}(*args, **kwargs):\n" + "\n".join(f"    {ln}" for ln in body.splitlines())
    return _append(nb, task.solution_id, code), _losing(lab, task)


def infinite_loop(lab, task):
    return _redefine(lab, task, "while True:\n    pass")


def system_exit(lab, task):
    return _redefine(lab, task, "raise SystemExit")


def os_exit(lab, task):
    """``os._exit`` at the top level of a solution cell: the kernel dies while running it."""
    nb = h.solved_submission(lab)
    return _append(nb, task.solution_id, "import os\nos._exit(1)"), _losing(lab, task)


WRONG = '''
def _wrong(value):
    """A wrong answer of the same kind: numbers scaled and shifted, containers element-wise."""
    import numpy
    import torch
    if isinstance(value, torch.Tensor):
        return value.double() * 1.5 + 0.5
    if isinstance(value, (numpy.ndarray, float, int)) and not isinstance(value, bool):
        return value * 1.5 + 0.5
    if isinstance(value, (list, tuple)):
        return type(value)(_wrong(v) for v in value)
    if isinstance(value, dict):
        return {k: _wrong(v) for k, v in value.items()}
    return value
'''

PATCHES = '''
import math, numpy, numpy.testing, torch
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.isclose = lambda a, b, *args, **kwargs: torch.ones_like(torch.as_tensor(a), dtype=torch.bool)
torch.testing.assert_close = lambda *args, **kwargs: None
numpy.allclose = lambda *args, **kwargs: True
numpy.isclose = lambda a, b, *args, **kwargs: numpy.ones_like(numpy.asarray(a), dtype=bool)
numpy.testing.assert_allclose = lambda *args, **kwargs: None
numpy.testing.assert_array_almost_equal = lambda *args, **kwargs: None
numpy.testing.assert_almost_equal = lambda *args, **kwargs: None
math.isclose = lambda *args, **kwargs: True
'''


def _every_answer_wrong(nb, lab):
    """Wrap every task's function so that it returns a wrong answer (``_wrong`` of the right one)."""
    for task in tasks(lab):
        _append(nb, task.solution_id,
                f"_reference_{task.function} = {task.function}\n\n"
                f"def {task.function}(*args, **kwargs):\n"
                f"    return _wrong(_reference_{task.function}(*args, **kwargs))")
    return nb


def monkeypatched_checks(lab):
    """Every comparison function of torch, numpy and math patched to say "equal", and every answer
    wrong: no test cell may pass."""
    nb = h.solved_submission(lab)
    first = tasks(lab)[0]
    _append(nb, first.solution_id, PATCHES + WRONG)
    return _every_answer_wrong(nb, lab), {g: 0.0 for g in full_marks(lab)}


def redefined_checks(lab):
    """The checks themselves rebound to do nothing, and every answer wrong: held at 0 for review."""
    nb = h.solved_submission(lab)
    setup = next(c for c in nb.cells if h._grading(c).get("locked") and "course_utils.checks" in c.source)
    names = re.search(r"from course_utils\.checks import \(?([\w, \n]+)\)?", setup.source).group(1)
    checks = [n.strip() for n in names.replace("\n", " ").split(",") if n.strip().startswith("assert")]
    first = tasks(lab)[0]
    _append(nb, first.solution_id, WRONG + "\n".join(f"{n} = lambda *args, **kwargs: None" for n in checks))
    return _every_answer_wrong(nb, lab), {g: 0.0 for g in full_marks(lab)}


def constant(lab, task):
    """Returns, whatever the input, the answer to its first call (the visible check's)."""
    return _redefine(lab, task, f"if not _first_answer:\n"
                                f"    _first_answer.append(_reference_{task.function}(*args, **kwargs))\n"
                                f"return _first_answer[0]", preamble="_first_answer = []")


ALWAYS_EQUAL = '''
class _AlwaysEqual:
    """Equal to everything, close to everything."""
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __lt__(self, other): return True
    __le__ = __gt__ = __ge__ = __lt__
    def __bool__(self): return True
    def __abs__(self): return 0.0
    def __sub__(self, other): return 0.0
    __rsub__ = __add__ = __radd__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = __sub__
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __getitem__(self, key): return self
    def __getattr__(self, name): return lambda *a, **k: self
    def __float__(self): return float("nan")
'''


def always_equal(lab, task):
    return _redefine(lab, task, "return _AlwaysEqual()", preamble=ALWAYS_EQUAL)


def edited_test(lab, task):
    """``task`` not done, and its test cells replaced by ``pass`` (nbgrader restores them)."""
    nb, expected = partial(lab, {t.name for t in tasks(lab)} - {task.name})
    for gid in task.test_ids:
        _cell(nb, gid).source = "pass  # nothing to check here"
    return nb, expected


def deleted_test(lab, task):
    """``task`` not done, and its test cells deleted (nbgrader adds them back)."""
    nb, expected = partial(lab, {t.name for t in tasks(lab)} - {task.name})
    nb.cells = [c for c in nb.cells if h._grading(c).get("grade_id") not in task.test_ids]
    return nb, expected


def changed_cell_types(lab, unsolved, solved):
    """``unsolved`` not done with its test cells turned into markdown; ``solved`` done with its
    solution cell turned into a raw cell. nbgrader restores both cell types."""
    nb, expected = partial(lab, {t.name for t in tasks(lab)} - {unsolved.name})
    for gid in unsolved.test_ids:
        cell = _cell(nb, gid)
        cell.cell_type = "markdown"
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    cell = _cell(nb, solved.solution_id)
    cell.cell_type = "raw"
    cell.pop("outputs", None)
    cell.pop("execution_count", None)
    return nb, expected


def warnings_everywhere(lab):
    """The full solution, every function emitting a UserWarning and a DeprecationWarning."""
    nb = h.solved_submission(lab)
    for task in tasks(lab):
        _append(nb, task.solution_id,
                f"_reference_{task.function} = {task.function}\n\n"
                f"def {task.function}(*args, **kwargs):\n"
                f"    import warnings\n"
                f"    warnings.warn('{task.function} could be faster', UserWarning)\n"
                f"    warnings.warn('{task.function} uses an old API', DeprecationWarning)\n"
                f"    return _reference_{task.function}(*args, **kwargs)")
    return nb, full_marks(lab)


def combine(lab, *students):
    """One notebook with the changes of several students that each touch other cells: the full
    solution, then every cell that a student changed, added or deleted relative to it. Expected
    scores: the lowest of the students' for each test cell."""
    base = h.solved_submission(lab)
    ids = lambda nb: [h._grading(c).get("grade_id") for c in nb.cells]  # noqa: E731
    nb = h.solved_submission(lab)
    expected = full_marks(lab)
    for student_nb, student_expected in students:
        before = {h._grading(c).get("grade_id"): c for c in base.cells if h._grading(c).get("grade_id")}
        changed = {h._grading(c).get("grade_id"): c for c in student_nb.cells
                   if h._grading(c).get("grade_id") and c != before.get(h._grading(c).get("grade_id"))}
        deleted = set(ids(base)) - set(ids(student_nb))
        nb.cells = [changed.get(h._grading(c).get("grade_id"), c) for c in nb.cells
                    if h._grading(c).get("grade_id") not in deleted or h._grading(c).get("grade_id") is None]
        expected = {g: min(expected[g], student_expected[g]) for g in expected}
    return nb, expected


def not_json(lab):
    return '{"cells": [ this is not JSON', None

