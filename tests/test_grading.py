"""course_utils.checks: messages that teach, and comparisons a student cannot fool."""

import math

import numpy as np
import pytest
import torch

import course_utils.checks as grading
from course_utils.checks import (AnswerError, Unfinished, assert_close, assert_equal_list, assert_true, needs,
                                 to_array)


def message(fn, *args, **kwargs):
    with pytest.raises(AssertionError) as info:
        fn(*args, **kwargs)
    return str(info.value)


# ----------------------------------------------------------------------------- assert_close
def test_assert_close_passes_on_close_values():
    assert_close(torch.tensor([1.0, 2.0]), np.array([1.0, 2.0 + 1e-7]), "x")
    assert_close(3, 3.0, "x")
    assert_close(torch.tensor(0.5, requires_grad=True) * 2, 1.0, "x")     # a tensor with grad
    assert_close([[1, 2], [3, 4]], torch.tensor([[1.0, 2.0], [3.0, 4.0]]), "x")


def test_message_names_expected_got_and_likely_mistake():
    msg = message(assert_close, torch.tensor([1.0, 3.0]), torch.tensor([1.0, 2.0]), "f(x)",
                  mistakes={"forgot the minus sign": [-1.0, -2.0], "added one": [1.0, 3.0]})
    assert msg.startswith("f(x):")
    assert "expected [1., 2.]" in msg and "but got [1., 3.]" in msg
    assert "Likely mistake: added one." in msg and "minus sign" not in msg
    assert "largest difference 1" in msg


def test_hint_when_no_mistake_matches():
    msg = message(assert_close, 5.0, 1.0, "f", mistakes={"doubled": 2.0}, hint="look at the sign")
    assert "expected 1." in msg and "but got 5." in msg and "Hint: look at the sign." in msg
    assert "Likely mistake" not in msg


def test_shape_mismatch_is_named():
    msg = message(assert_close, torch.zeros(3, 4), torch.zeros(4, 3), "logp")
    assert "shape (3, 4) instead of (4, 3)" in msg


def test_large_arrays_are_summarised():
    msg = message(assert_close, np.ones((5, 5)), np.zeros((5, 5)), "big")
    assert "array of shape (5, 5)" in msg


def test_nan_and_inf_positions_must_match():
    nan, inf = float("nan"), float("inf")
    assert_close([1.0, nan, inf, -inf], [1.0, nan, inf, -inf], "x")
    msg = message(assert_close, [1.0, 0.0], [1.0, nan], "x")
    assert "nan where a number was expected" in msg
    assert "nan where a number was expected" in message(assert_close, [nan, 2.0], [1.0, 2.0], "x")
    message(assert_close, [1.0, -inf], [1.0, inf], "x")
    message(assert_close, [1.0, 1e308], [1.0, inf], "x")
    message(assert_close, [1.0, inf], [1.0, 5.0], "x")


def test_tolerances():
    assert_close(1.0 + 1e-6, 1.0, "x")
    message(assert_close, 1.01, 1.0, "x")
    assert_close(1.01, 1.0, "x", atol=0.02)
    assert_close(101.0, 100.0, "x", atol=0, rtol=0.02)


@pytest.mark.parametrize("bad", [None, "0.5", {"a": 1}, object(), np.array(["a"]), torch.tensor([1j])])
def test_non_numbers_rejected_clearly(bad):
    msg = message(assert_close, bad, 0.5, "answer")
    assert msg.startswith("answer:")
    if bad is None:
        assert "return" in msg


def test_object_whose_eq_is_always_true_is_rejected():
    class Sneaky:
        def __eq__(self, other):
            return True

        def __float__(self):
            return 0.0

        __hash__ = object.__hash__

    with pytest.raises(AnswerError):
        assert_close(Sneaky(), 0.5, "x")
    with pytest.raises(AnswerError):
        assert_close([Sneaky()], [0.5], "x")
    with pytest.raises(AnswerError):
        assert_equal_list([Sneaky()], [(0, 1)], "pairs")
    with pytest.raises(AnswerError):
        assert_true(Sneaky(), "x", "not a bool")


def test_tensor_subclass_with_lying_eq_is_compared_by_value():
    class Liar(torch.Tensor):
        def __eq__(self, other):
            return torch.ones((), dtype=torch.bool)

    got = torch.tensor([9.0, 9.0]).as_subclass(Liar)
    with pytest.raises(AnswerError):
        assert_close(got, torch.tensor([1.0, 2.0]), "x")


def test_array_subclass_with_lying_operators_is_compared_by_value():
    class Cheat(np.ndarray):
        def __sub__(self, other):
            return np.zeros(self.shape)

        def __eq__(self, other):
            return np.ones(self.shape, dtype=bool)

    with pytest.raises(AnswerError):
        assert_close(np.array([9.0, 9.0]).view(Cheat), [1.0, 2.0], "x")
    assert_close(np.array([1.0, 2.0]).view(Cheat), [1.0, 2.0], "x")


def test_float_subclass_with_lying_eq_is_compared_by_value():
    class Liar(float):
        def __eq__(self, other):
            return True

        __hash__ = float.__hash__

    with pytest.raises(AnswerError):
        assert_close(Liar(9.0), 1.0, "x")


def test_monkeypatched_comparisons_do_not_change_results(monkeypatch):
    """A notebook that reassigns comparison functions after the import cannot make a wrong answer pass."""
    always = lambda *args, **kwargs: True          # noqa: E731
    nothing = lambda *args, **kwargs: None         # noqa: E731
    monkeypatch.setattr(torch, "allclose", always)
    monkeypatch.setattr(torch, "equal", always)
    monkeypatch.setattr(torch.testing, "assert_close", nothing)
    monkeypatch.setattr(np, "allclose", always)
    monkeypatch.setattr(np, "isclose", always)
    monkeypatch.setattr(np, "array_equal", always)
    monkeypatch.setattr(np, "abs", lambda x: np.zeros_like(x))
    monkeypatch.setattr(np.testing, "assert_allclose", nothing)
    monkeypatch.setattr(np.testing, "assert_array_equal", nothing)
    monkeypatch.setattr(math, "isclose", always)
    with pytest.raises(AnswerError):
        assert_close(torch.tensor([1.0, 3.0]), torch.tensor([1.0, 2.0]), "x")
    with pytest.raises(AnswerError):
        assert_close(7.0, 1.0, "x")
    with pytest.raises(AnswerError):
        assert_close([1.0, float("nan")], [1.0, 2.0], "x")
    assert_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0]), "x")


# ----------------------------------------------------------------------------- to_array, assert_true, lists
def test_to_array():
    a = to_array(torch.tensor([1, 2], dtype=torch.int32))
    assert a.dtype == np.float64 and a.tolist() == [1.0, 2.0]
    assert to_array(True).tolist() == 1.0
    assert to_array(np.float32(0.5)).tolist() == 0.5
    assert "ragged" in message(to_array, [[1, 2], [3]], "x")


def test_assert_true():
    assert_true(True, "x", "no")
    assert_true(np.bool_(True), "x", "no")
    for bad in [False, 1, "yes", [1], torch.tensor(True), np.bool_(False)]:
        assert message(assert_true, bad, "x", "should be True") == "x: should be True"


def test_assert_equal_list():
    assert_equal_list([(2, 0), (2, 1), (0, 1)], [(2, 0), (2, 1), (0, 1)], "pairs")
    assert_equal_list([[2, 0], (np.int64(2), torch.tensor(1))], [(2, 0), (2, 1)], "pairs")
    msg = message(assert_equal_list, [(0, 2), (1, 2), (1, 0)], [(2, 0), (2, 1), (0, 1)], "pairs",
                  mistakes={"winner and loser swapped": [(0, 2), (1, 2), (1, 0)]})
    assert "expected [(2, 0), (2, 1), (0, 1)]" in msg and "but got [(0, 2), (1, 2), (1, 0)]" in msg
    assert "Likely mistake: winner and loser swapped." in msg
    assert "expected a list" in message(assert_equal_list, (x for x in []), [(1, 0)], "pairs")
    assert "Hint: order" in message(assert_equal_list, [(1, 0)], [(0, 1)], "pairs", hint="order")
    message(assert_equal_list, [(1, 0)], [(1, 0), (0, 1)], "pairs")


# ----------------------------------------------------------------------------- needs
def test_needs_prints_the_friendly_message(capsys):
    with needs("Task 4 (tilted_optimum)"):
        raise NotImplementedError("Task 4")
    assert capsys.readouterr().out == "Finish Task 4 (tilted_optimum) first, then run this cell again.\n"


def test_needs_is_silent_when_the_task_is_done(capsys):
    with needs("Task 1"):
        x = 1 + 1
    assert x == 2 and capsys.readouterr().out == ""


def test_needs_names_the_part_a_view_waits_for(capsys):
    with needs("Tasks 3, 4 and 5"):
        raise Unfinished("Part A (Tasks 1 and 2)")
    assert capsys.readouterr().out == "Finish Part A (Tasks 1 and 2) first, then run this cell again.\n"


def test_needs_lets_other_errors_through():
    with pytest.raises(ValueError):
        with needs("Task 1"):
            raise ValueError("a real bug")


def test_no_warnings_passes_stderr_on_and_says_it_costs_the_cell(capsys):
    import sys
    import warnings

    from course_utils.checks import no_warnings

    with no_warnings():
        warnings.warn("harmless")
        print("Task 1: visible checks passed.")
    out = capsys.readouterr()
    assert out.err == "" and "Note" not in out.out                   # a warning costs nothing
    with no_warnings():
        print("debug 3", file=sys.stderr)
        print("Task 1: visible checks passed.")
    out = capsys.readouterr()
    assert out.err == "debug 3\n"                                     # the graders still see it
    assert out.out.endswith("0 points, even if its checks pass: remove the print to sys.stderr or the logging.\n")
    assert not isinstance(sys.stderr, grading._StderrTee)            # restored


# ----------------------------------------------------------------------------- the labs' tolerances
def test_the_labs_checks_name_their_float_tolerances():
    """A float tolerance is defined once, in checks.py (FLOAT64, LOG_Z, the float32 defaults): no check cell of
    a lab writes one as a number (the frequencies' atol of 0.01 and 0.02, at or above FREQUENCY_ATOL, are
    the draws' own and stated where they are used)."""
    import re

    import nbformat

    from course_staff.course import LABS, is_grade, source_notebook
    literal = re.compile(r"\b([ar]tol)\s*=\s*([0-9][0-9.]*(?:e-?[0-9]+)?)")
    found = [(lab, cell.metadata["nbgrader"]["grade_id"], m.group(0))
             for lab in LABS for cell in nbformat.read(str(source_notebook(lab)), as_version=4).cells
             if is_grade(cell) for m in literal.finditer(cell.source)
             if m.group(1) == "rtol" or float(m.group(2)) < grading.FREQUENCY_ATOL]
    assert not found, f"float tolerances written as numbers in check cells (use checks.FLOAT64, LOG_Z): {found}"
    assert grading.FLOAT64 == {"atol": grading.FLOAT64_ATOL, "rtol": grading.FLOAT64_RTOL}
    assert grading.LOG_Z == {"atol": grading.FLOAT64_ATOL, "rtol": grading.LOG_Z_RTOL}
