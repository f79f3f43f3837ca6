"""Checks for the labs' test cells: messages that teach, comparisons a student cannot fool.

Every check raises ``AssertionError`` with three things a student needs: what was expected, what
came back, and -- when the answer matches a known mistake -- what that mistake probably was.

The comparison functions are bound when this module is imported (in the lab's first cell), so a
notebook that later reassigns ``torch.allclose``, ``numpy.testing`` or ``math.isclose`` does not
change how it is graded. Answers are converted to plain float64 arrays before any comparison, so an
object whose ``==`` is always true is rejected rather than trusted.
"""

import contextlib
import sys
import warnings

import numpy as np

from course_utils.explore import Unfinished, needs   # noqa: F401 -- the notebooks import needs from here

# bound at import time: later monkeypatching of the public names does not reach these
_asarray = np.asarray
_array = np.array
_abs = np.abs
_isnan = np.isnan
_isposinf = np.isposinf
_isneginf = np.isneginf
_array_equal = np.array_equal
_ndarray = np.ndarray
_errstate = np.errstate
_float64 = np.float64


# ----------------------------------------------------------------------------- tolerances
# Every tolerance is stated against the scale of what it compares, never tuned to one machine's numbers:
# * float32 results (eps 1.2e-7) of a few hundred operations: relative 1e-4, about 840 eps -- room for
#   any reduction order, vector width or thread count; absolute 1e-5 for values near 0.
# * float64 results (eps 2.2e-16) of exact formulas (Lab 11's optimum, soft values): relative 1e-6 and
#   absolute 1e-8 -- room for another equivalent formula (log-sum-exp, or exp then log).
# * frequencies of n seeded draws (atol 0.01 or 0.02, i.e. >= 1e-3): 2.8 to 5.7 of the largest binomial
#   standard deviation 0.5 / sqrt(n), so any correct sampler passes; the draws are seeded, so a machine
#   gives the same verdict every time.
# tests/test_tolerances.py measures the margins: every float tolerance 10x tighter and the solution and
# every correct variant still pass; every tolerance 10x looser (20x for the float ones) and every
# known mistake still fails.
FLOAT32_ATOL, FLOAT32_RTOL = 1e-5, 1e-4
FLOAT64_ATOL, FLOAT64_RTOL = 1e-8, 1e-6
FREQUENCY_ATOL = 1e-3        # an atol at or above this is a frequency's, not a float's
# log Z = max + log(sum of shifted weights) is as exact as the rest but grows as 1 / beta (1000 at beta = 1e-3,
# 5e4 at 1e-4 with a reward of 5): relative 1e-8 keeps its absolute slack (1e-5 to 5e-4) near that of the other
# float64 results (values of order 1 at relative 1e-6), still about 5e7 times float64's rounding at that size
LOG_Z_RTOL = 1e-8
# the keyword arguments of ``assert_close`` for a float64 result of an exact formula, and for a log Z:
#     assert_close(V0, 0.5 * np.log(3), "V0", **FLOAT64)
FLOAT64 = {"atol": FLOAT64_ATOL, "rtol": FLOAT64_RTOL}
LOG_Z = {"atol": FLOAT64_ATOL, "rtol": LOG_Z_RTOL}
# float32 weights after a few Adam steps, computed twice in two orders (a student's loop and its replay): Adam
# divides by sqrt(v), so last-bit differences of a gradient grow about 10x over the float32 defaults
TRAINED = {"atol": 10 * FLOAT32_ATOL, "rtol": 10 * FLOAT32_RTOL}
# a float32 gradient against central differences (step 1e-3, in float64) of the student's own loss: the
# differences' error (of order step^2) and float32's rounding both sit far inside
SLOPE = {"atol": 1e-4, "rtol": 1e-3}


class AnswerError(AssertionError):
    """A check failed; the message explains what was expected and what came back."""


def _fail(name, message):
    raise AnswerError(f"{name}: {message}")


def _fail_explained(name, lines, mistakes, matches, hint):
    """Fail with ``lines``, plus the first known mistake whose value ``matches`` the answer, or the hint."""
    for description, value in (mistakes or {}).items():
        if matches(value):
            lines.append(f"Likely mistake: {description}.")
            break
    else:
        if hint:
            lines.append(f"Hint: {hint}.")
    _fail(name, "\n  ".join(lines))


# the answer types a check converts, exactly these: an object that only looks like a tensor (its own numpy(),
# detach(), __float__ or __iter__) is refused, since conversion would run its code inside the check
_SCALARS = frozenset({int, float, bool} | {t for t in np.sctypeDict.values() if issubclass(t, (np.number, np.bool_))})
_SEQUENCES = (list, tuple)


def _genuine_tensor(value):
    """True for a torch.Tensor or nn.Parameter (not a subclass of one's own, whose methods could run anything)."""
    torch = sys.modules.get("torch")      # no torch imported: no tensor can exist
    return torch is not None and type(value) in (torch.Tensor, torch.nn.Parameter)


def to_array(value, name="your answer"):
    """``value`` (tensor, array, number, list) as a float64 numpy array, or a clear AnswerError.

    Only genuine types are converted: torch.Tensor (or nn.Parameter), numpy arrays, Python and numpy
    numbers, and lists or tuples of these."""
    if value is None:
        _fail(name, "returned None -- did you forget the `return` statement?")
    if _genuine_tensor(value):
        value = value.detach().cpu()
        if value.dtype.is_complex:
            _fail(name, "returned a complex tensor; expected real numbers")
        value = value.double().numpy()
    if isinstance(value, _ndarray):
        dtype = _ndarray.dtype.__get__(value)          # the array's own dtype, whatever a subclass claims
        if dtype == object or not (np.issubdtype(dtype, np.number) or dtype == bool):
            _fail(name, f"returned an array of {dtype}; expected numbers")
        return _array(value, dtype=_float64, subok=False)   # a plain copy: no subclass keeps its operators
    if type(value) in _SCALARS:
        return _asarray(float(value), dtype=_float64)
    if type(value) in _SEQUENCES:
        try:
            return _asarray([to_array(v, name) for v in value], dtype=_float64)
        except (ValueError, TypeError):
            _fail(name, "returned a ragged list; expected a rectangular array of numbers")
    _fail(name, f"returned a {type(value).__name__}; expected a torch.Tensor, a numpy array, a number, "
                "or a list of these")


def _fmt(a):
    a = _asarray(a)
    if a.size <= 12:
        return np.array2string(a, precision=4, suppress_small=True, separator=", ")
    return f"array of shape {a.shape}, first entries {np.array2string(a.ravel()[:6], precision=4, separator=', ')}"


def _close(got, expected, atol, rtol):
    """Elementwise closeness with matching nan and +-inf positions (no warnings)."""
    if got.shape != expected.shape:
        return False
    with _errstate(all="ignore"):
        same_special = (_array_equal(_isnan(got), _isnan(expected))
                        and _array_equal(_isposinf(got), _isposinf(expected))
                        and _array_equal(_isneginf(got), _isneginf(expected)))
        if not same_special:
            return False
        finite = ~(_isnan(expected) | _isposinf(expected) | _isneginf(expected))
        diff = _abs(got[finite] - expected[finite])
        return bool((diff <= atol + rtol * _abs(expected[finite])).all())


def assert_close(got, expected, name, atol=FLOAT32_ATOL, rtol=FLOAT32_RTOL, mistakes=None, hint=None):
    """Check ``got`` against ``expected`` (same shape, close values, same nan/inf positions).

    Args:
        got:      the student's answer (tensor, array, number).
        expected: the right answer.
        name:     what is checked, e.g. ``"response_logprobs(logits, ids, 5)"``.
        mistakes: optional {description: what that mistake returns}; on failure, the first
                  description whose value matches ``got`` is named as the likely mistake.
        hint:     a general hint printed when no known mistake matches.
    """
    got = to_array(got, name)
    expected = to_array(expected, "expected")
    if _close(got, expected, atol, rtol):
        return
    lines = [f"expected {_fmt(expected)}", f"but got {_fmt(got)}"]
    if got.shape != expected.shape:
        lines.append(f"(shape {got.shape} instead of {expected.shape})")
    else:
        with _errstate(all="ignore"):
            if (_isnan(got) != _isnan(expected)).any():
                lines.append("(nan where a number was expected, or the other way round)")
            else:
                diff = _abs(got - expected)
                diff = diff[~_isnan(diff)]
                if diff.size:
                    lines.append(f"(largest difference {diff.max():.3g})")
    _fail_explained(name, lines, mistakes, lambda value: _close(got, to_array(value, "mistake"), atol, rtol),
                    hint)


def assert_true(condition, name, message):
    """Fail with ``message`` unless ``condition`` is exactly the bool True (or a true numpy bool)."""
    if not (isinstance(condition, (bool, np.bool_)) and bool(condition) is True):
        _fail(name, message)


def assert_equal_list(got, expected, name, mistakes=None, hint=None):
    """Check a list of plain values (e.g. tuples of ints) for exact equality, element by element."""
    if not isinstance(got, (list, tuple)):
        _fail(name, f"returned a {type(got).__name__}; expected a list")
    try:
        got_plain = [tuple(int(x) for x in item) if isinstance(item, (list, tuple)) else int(item)
                     for item in got]
    except (TypeError, ValueError):
        _fail(name, f"returned {got!r}; expected a list like {expected!r}")
    if type(got_plain) is list and len(got_plain) == len(expected) and all(
            type(g) is type(e) and g == e for g, e in zip(got_plain, expected)):
        return
    lines = [f"expected {expected!r}", f"but got {got_plain!r}"]
    _fail_explained(name, lines, mistakes, lambda value: got_plain == list(value), hint)


@contextlib.contextmanager
def no_warnings():
    """Silence Python warnings inside a check cell (restored afterwards).

    A warning never means a wrong answer, but nbgrader scores a check cell 0 for any output on
    stderr, and some warnings (e.g. torch's "Converting a tensor with requires_grad=True to a
    scalar") span lines that no ignore-pattern recognizes.

    Anything else written to stderr inside still goes there (the graders see it, and score the cell
    0), and a note on stdout says so, so that a cell never seems to pass while it loses its points.
    """
    tee = _StderrTee(sys.stderr)
    sys.stderr = tee
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        sys.stderr = tee.stream
        if tee.wrote:
            print("Note: your code wrote to stderr (shown in red). The graders score a check cell that writes "
                  "to stderr 0 points, even if its checks pass: remove the print to sys.stderr or the logging.")


class _StderrTee:
    """sys.stderr as it was, remembering whether anything was written through it."""

    def __init__(self, stream):
        self.stream, self.wrote = stream, False

    def write(self, text):
        self.wrote = self.wrote or bool(str(text).strip())
        return self.stream.write(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)

