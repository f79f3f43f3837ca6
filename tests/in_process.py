"""A lab's check cells run in this process, on the reference solution with a row's edits spliced in.

    got = scores("lab12", {"bt_loss_solution": [("-F.logsigmoid(", "F.logsigmoid(")]})
    got["test_bt_loss"]   -> (0.0, "AssertionError: bt_loss: ... the minus sign is missing ...")

The cheap half of the mutant catalogue (tests/test_mistakes.py, in test-fast): no nbgrader, no kernel.
The lab's definitions come from ``load_lab`` (its reference solution, once per process); an edited
solution cell is executed again, as a student's would be, in a copy of that namespace; then every
check cell of the lab's table runs there, in notebook order, visible and hidden checks alike, and
scores its points or 0 as nbgrader does. tests/test_mutants.py grades the same edits with the real
nbgrader and compares.
"""

import contextlib
import functools
import io
import re

import nbformat

from course_staff.testbed import harness as h
from course_staff.solutions import load_lab
from course_staff.testbed.lab_tables import table


VISIBLE_PASSED = re.compile(r"visible checks pass")   # printed at the end of a check cell's visible part


@functools.cache
def reference(lab):
    """The namespace of the lab's definition cells (instructor's solution), loaded once."""
    return load_lab(lab)


@functools.cache
def check_sources(lab):
    """[(grade_id, points, code)] of every check cell of the lab's table, in notebook order, each compiled
    once per process (a code object runs the same in every namespace it is executed in)."""
    cells = nbformat.read(str(h.REPO / "source" / lab / f"{lab}.ipynb"), as_version=4).cells
    source = {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in cells}
    order = [c.metadata.get("nbgrader", {}).get("grade_id") for c in cells]
    checks = sorted(table(lab).auto_marks().items(), key=lambda item: order.index(item[0]))
    return [(gid, points, compile(source[gid], f"<{lab} {gid}>", "exec")) for gid, points in checks]


@functools.cache
def solution_texts(lab):
    """harness.solution_text(lab), read once per process (callers do not change it)."""
    return h.solution_text(lab)


@functools.cache
def code_solutions(lab):
    """The grade_ids of the lab's code solution cells, in notebook order."""
    cells = nbformat.read(str(h.REPO / "source" / lab / f"{lab}.ipynb"), as_version=4).cells
    return tuple(c.metadata["nbgrader"]["grade_id"] for c in cells
                 if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution"))


def namespace(lab, edits=None):
    """A copy of the reference namespace with each edited solution cell ({grade_id: [(old, new)]})
    executed again (every ``old`` must occur).

    With edits, every code solution cell runs again in the copy, in notebook order (the edited ones
    edited): a function the student wrote that calls another (Lab 13's grpo_iteration calls
    grpo_loss) then finds the edited one, as in the student's kernel, not the reference's."""
    ns = dict(reference(lab))
    texts = dict(solution_texts(lab))          # a copy: the edits below must not reach the cache
    for gid, pairs in (edits or {}).items():
        for old, new in pairs:
            assert old in texts[gid], f"{lab}/{gid}: {old!r} does not occur in the solution"
            texts[gid] = texts[gid].replace(old, new)
    for gid in code_solutions(lab) if edits else ():
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(texts[gid], f"<{lab} {gid}{', edited' if gid in edits else ''}>", "exec"), ns)   # noqa: S102
    return ns


def scores(lab, edits=None):
    """{check grade_id: (points scored, what the cell printed and raised)} of every check cell."""
    ns = namespace(lab, edits)
    got = {}
    for gid, points, code in check_sources(lab):
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                exec(code, ns)          # noqa: S102
            got[gid] = (points, printed.getvalue())
        except Exception as err:  # noqa: BLE001 -- any error fails a check cell, as in nbgrader
            got[gid] = (0.0, f"{printed.getvalue()}\n{type(err).__name__}: {err}")
    return got
