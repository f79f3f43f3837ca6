"""Simulated students for the grading tests: honest, partial and adversarial submissions.

Each builder returns a submission (an nbformat notebook, or a str written as is) together with the
scores it must get, as {grade cell: points}. A written answer that a TA has yet to read expects None
(nbgrader leaves it to a human); a blank one expects 0. Builders name a lab's tasks, concept checks
and questions as its table does (course_staff/testbed/lab_tables): ``row(lab, "gae_per_token")``.
"""

import re

from course_staff.testbed import harness as h
from course_staff.testbed.lab_tables import table


def row(lab, name):
    """The task or concept check ``name`` of ``lab``'s table."""
    return table(lab).task(name)


def rows(lab):
    """Every task and concept check of the lab (what a student answers with code)."""
    return table(lab).rows


def full_marks(lab):
    """{grade cell: points} of every graded cell of the lab, written answers included."""
    return table(lab).full_marks()


def _cell(nb, grade_id):
    for cell in nb.cells:
        if h._grading(cell).get("grade_id") == grade_id:
            return cell
    raise KeyError(grade_id)


def _append(nb, grade_id, code):
    cell = _cell(nb, grade_id)
    cell.source = cell.source.rstrip() + "\n\n" + code.strip() + "\n"
    return nb


def _expected(lab, lost=(), answered=True):
    """Full marks on every check cell, except 0 on those of the rows in ``lost``; written answers
    None (answered, waiting for a TA) or 0 (left blank)."""
    lab_table = table(lab)
    expected = lab_table.auto_marks()
    for r in lost:
        for gid, _ in r.checks:
            expected[gid] = 0.0
    expected.update({q: (None if answered else 0.0) for q in lab_table.written_marks()})
    return expected


def solution(lab):
    return h.solved_submission(lab), _expected(lab)


def blank(lab):
    return h.blank_submission(lab), {g: 0.0 for g in full_marks(lab)}


def partial(lab, solved, answered=()):
    """Only the rows named in ``solved`` are done and only the questions in ``answered`` answered
    (with the model answer); everything else keeps the release stub."""
    done = h.solved_submission(lab)
    nb = h.blank_submission(lab)
    for name in list(solved) + list(answered):
        gid = row(lab, name).solution if name in {r.name for r in rows(lab)} else name
        _cell(nb, gid).source = _cell(done, gid).source
    expected = _expected(lab, lost=[r for r in rows(lab) if r.name not in solved])
    expected.update({q: (None if q in answered else 0.0) for q in table(lab).written_marks()})
    return nb, expected


def _redefine(lab, task, body, preamble=""):
    """The full solution, except that ``task``'s function is redefined after it with ``body``."""
    nb = h.solved_submission(lab)
    code = f"{preamble}\n_reference_{task.function} = {task.function}\n\n" \
           f"def {task.function}(*args, **kwargs):\n" + "\n".join(f"    {ln}" for ln in body.splitlines())
    return _append(nb, task.solution, code), _expected(lab, lost=[task])


def infinite_loop(lab, task):
    return _redefine(lab, task, "while True:\n    pass")


def system_exit(lab, task):
    return _redefine(lab, task, "raise SystemExit")


def os_exit(lab, task):
    """``os._exit`` at the top level of a solution cell: the kernel dies while running it."""
    nb = h.solved_submission(lab)
    return _append(nb, task.solution, "import os\nos._exit(1)"), _expected(lab, lost=[task])


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


def _spoil(args):
    """The float arrays and tensors a function was given, changed in place (a part that judges the inputs
    left alone must fail too)."""
    import numpy
    import torch
    for a in args:
        if isinstance(a, torch.Tensor) and a.is_floating_point():
            a.data.add_(0.25)
        elif isinstance(a, numpy.ndarray) and a.dtype.kind == "f" and a.flags.writeable:
            a += 0.25
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
    """Wrap every task's function so that every part of it is wrong: it returns a wrong answer (``_wrong`` of
    the right one) and changes the arrays it was given (``_spoil``); give every concept check the wrong
    answer of its first mistake."""
    lab_table = table(lab)
    for task in lab_table.tasks:
        _append(nb, task.solution,
                f"_reference_{task.function} = {task.function}\n\n"
                f"def {task.function}(*args, **kwargs):\n"
                f"    answer = _wrong(_reference_{task.function}(*args, **kwargs))\n"
                f"    _spoil(list(args) + list(kwargs.values()))\n"
                f"    return answer")
    for concept in lab_table.concepts:
        cell = _cell(nb, concept.solution)
        for old, new in concept.mistakes[0].edits:
            cell.source = cell.source.replace(old, new)
    return nb


def _held_for_review(lab):
    """What a notebook that tampers with the checks gets: 0 on every check cell until a TA reviews it;
    its written answers wait for a TA as everyone's do."""
    return _expected(lab, lost=rows(lab))


def monkeypatched_checks(lab):
    """Every comparison function of torch, numpy and math patched to say "equal", and every answer
    wrong: no test cell may pass."""
    nb = h.solved_submission(lab)
    _append(nb, table(lab).tasks[0].solution, PATCHES + WRONG)
    return _every_answer_wrong(nb, lab), _held_for_review(lab)


def redefined_checks(lab):
    """The checks themselves rebound to do nothing, and every answer wrong: held at 0 for review."""
    nb = h.solved_submission(lab)
    setup = next(c for c in nb.cells if h._grading(c).get("locked") and "course_utils.checks" in c.source)
    names = re.search(r"from course_utils\.checks import \(?([\w, \n]+)\)?", setup.source).group(1)
    checks = [n.strip() for n in names.replace("\n", " ").split(",") if n.strip().startswith("assert")]
    _append(nb, table(lab).tasks[0].solution,
            WRONG + "\n".join(f"{n} = lambda *args, **kwargs: None" for n in checks))
    return _every_answer_wrong(nb, lab), _held_for_review(lab)


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
    nb, expected = _all_but(lab, task)
    for gid, _ in task.checks:
        _cell(nb, gid).source = "pass  # nothing to check here"
    return nb, expected


def deleted_test(lab, task):
    """``task`` not done, and its test cells deleted (nbgrader adds them back)."""
    nb, expected = _all_but(lab, task)
    checks = {gid for gid, _ in task.checks}
    nb.cells = [c for c in nb.cells if h._grading(c).get("grade_id") not in checks]
    return nb, expected


def changed_cell_types(lab, unsolved, solved):
    """``unsolved`` not done with its test cells turned into markdown; ``solved`` done with its
    solution cell turned into a raw cell. nbgrader restores both cell types."""
    nb, expected = _all_but(lab, unsolved)
    for gid, _ in unsolved.checks:
        cell = _cell(nb, gid)
        cell.cell_type = "markdown"
        cell.pop("outputs", None)
        cell.pop("execution_count", None)
    cell = _cell(nb, solved.solution)
    cell.cell_type = "raw"
    cell.pop("outputs", None)
    cell.pop("execution_count", None)
    return nb, expected


def warnings_everywhere(lab):
    """The full solution, every function emitting a UserWarning and a DeprecationWarning."""
    nb = h.solved_submission(lab)
    for task in table(lab).tasks:
        _append(nb, task.solution,
                f"_reference_{task.function} = {task.function}\n\n"
                f"def {task.function}(*args, **kwargs):\n"
                f"    import warnings\n"
                f"    warnings.warn('{task.function} could be faster', UserWarning)\n"
                f"    warnings.warn('{task.function} uses an old API', DeprecationWarning)\n"
                f"    return _reference_{task.function}(*args, **kwargs)")
    return nb, _expected(lab)


def numpy_warning(lab):
    """The full solution, with a tilted_optimum that lets numpy's "divide by zero encountered in log"
    warning reach the check cells (a correct answer: full marks, and validate says so too)."""
    variant = next(v for v in row(lab, "tilted_optimum").variants if v.name == "ok_logaddexp_with_warnings")
    return h.solved_submission(lab, edits={row(lab, "tilted_optimum").solution: list(variant.edits)}), _expected(lab)


def stderr_chatter(lab, task):
    """The full solution, except that ``task``'s function prints a line that looks like a warning to
    stderr: nbgrader fails any check cell with stderr output, and a warning filter must not hide
    that from one grader (autograde) but not the other (validate)."""
    return _redefine(lab, task, "import sys\n"
                                "print('UserWarning: shapes look fine', file=sys.stderr)\n"
                                f"return _reference_{task.function}(*args, **kwargs)")


def _all_but(lab, task):
    """Every row solved except ``task``; the questions answered."""
    return partial(lab, {r.name for r in rows(lab)} - {task.name}, answered=table(lab).written_marks())


def combine(lab, *students):
    """One notebook with the changes of several students that each touch other cells: the full
    solution, then every cell that a student changed, added or deleted relative to it. Expected
    scores: the lowest of the students' for each test cell."""
    base = h.solved_submission(lab)
    ids = lambda nb: [h._grading(c).get("grade_id") for c in nb.cells]  # noqa: E731
    nb = h.solved_submission(lab)
    expected = _expected(lab)
    for student_nb, student_expected in students:
        before = {h._grading(c).get("grade_id"): c for c in base.cells if h._grading(c).get("grade_id")}
        changed = {h._grading(c).get("grade_id"): c for c in student_nb.cells
                   if h._grading(c).get("grade_id") and c != before.get(h._grading(c).get("grade_id"))}
        deleted = set(ids(base)) - set(ids(student_nb))
        nb.cells = [changed.get(h._grading(c).get("grade_id"), c) for c in nb.cells
                    if h._grading(c).get("grade_id") not in deleted or h._grading(c).get("grade_id") is None]
        expected = {g: _lowest(expected[g], student_expected[g]) for g in expected}
    return nb, expected


def _lowest(a, b):
    """The lower of two expected scores; None (waiting for a TA) only if both are."""
    known = [x for x in (a, b) if x is not None]
    return min(known) if known else None


def not_json(lab):
    return '{"cells": [ this is not JSON', None


# ----------------------------------------------------------------------------- the lifecycle's roster
# each lab's tasks, by name (its table: course_staff/testbed/lab_tables), for the students below
PARTS = {
    "lab11": {"partial": ("response_logprobs", "sample_with_temperature", "tilted_optimum", "token_level_optimum",
                          "concept_entropy_limit"),
              "answered": ("answer_kl_signs",),
              "osexit": "tilted_optimum", "chatter": "kl_objective", "loop": "kl_estimators", "exit": "sequence_logprob",
              "constant": "kl_objective", "always_equal": "token_level_optimum", "edited": "token_level_optimum",
              "deleted": "sample_with_temperature", "retyped": "kl_objective", "raw": "response_logprobs"},
    "lab12": {"partial": ("bt_loss", "kl_penalized_rewards", "ppo_rlhf_loss", "concept_clip"),
              "answered": ("answer_exp1_predict",),
              "osexit": "gae_per_token", "chatter": "gae_per_token"},
    "lab13": {"partial": ("dpo_loss", "group_advantages"),
              "answered": (),
              "osexit": "dpo_loss", "chatter": "dpo_loss"},   # Task 4 calls Tasks 2 and 3: a kernel killed there costs Task 4 too
}


def roster(lab):
    """{student: builder}; a builder returns (submission, expected {grade cell: points}, or None for a
    submission nbgrader cannot grade at all)."""
    part = PARTS[lab]
    task = lambda name: row(lab, name)                    # noqa: E731
    students = {
        "sol": lambda: solution(lab),
        "blank": lambda: blank(lab),
        "partial": lambda: partial(lab, part["partial"], answered=part["answered"]),
        "osexit": lambda: os_exit(lab, task(part["osexit"])),
        "warnings": lambda: warnings_everywhere(lab),
        "notjson": lambda: not_json(lab),
    }
    if lab == "lab11":     # the quick lab carries the rest of the adversarial catalogue
        students.update({
            "loop": lambda: infinite_loop(lab, task(part["loop"])),
            "patched": lambda: monkeypatched_checks(lab),
            "rebound": lambda: redefined_checks(lab),
            # three tricks in three tasks, three edits of the notebook in three others
            "tricks": lambda: combine(lab, system_exit(lab, task(part["exit"])),
                                         constant(lab, task(part["constant"])),
                                         always_equal(lab, task(part["always_equal"]))),
            "edits": lambda: combine(lab, edited_test(lab, task(part["edited"])),
                                        deleted_test(lab, task(part["deleted"])),
                                        changed_cell_types(lab, task(part["retyped"]), task(part["raw"]))),
        })
    return students


# what the TA gives in the formgrader: {student: {answer cell: (score, comment)}}; a blank answer is
# confirmed at 0, so that nothing of sol, partial and blank waits for a TA any more
