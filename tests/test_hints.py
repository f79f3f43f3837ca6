"""Hints teach, they do not dictate: every task has a three-rung hint ladder, and no line of any
instructor's solution appears anywhere a student can read it in the released notebooks.

    rung 1  the idea (which quantity, why)
    rung 2  the structure (which tensors and shapes, which family of operations)
    rung 3  a tiny worked example in numbers

A solution line is a line between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` of a source
notebook. It is compared, without spaces, as a whole and by its right-hand side (what follows
``return`` or the assignment), against every markdown and code cell of release/<lab>/<lab>.ipynb.
Exempt are what the lab itself states in the solution cell's docstring or its given code cells
(the seed's own text), and fragments shorter than ``MIN_CHARS`` such as ``pairs = []`` or
``return loss, stats``, which are common Python and reveal no answer.

`python -m tests.test_hints OLD_RELEASE_NB SOURCE_NB` prints what it finds in any pair of
notebooks (used to show that the old notebooks failed).
"""

import re
import sys

import nbformat
import pytest

from course_staff.course import LABS, REPO
from course_staff.edition.leaks import split_cell
from tests.lab_tables import table

MIN_CHARS = 10
RUNGS = ("Hint 1", "Hint 2", "Hint 3")
_ASSIGN = re.compile(r"^(?:return\s+|[A-Za-z_][\w, \[\]\.]*\s*[-+*/]?=(?!=)\s*)(.+)$")


def _squash(text):
    return "".join(text.split())


def _code(line):
    """A solution line without its trailing comment, or None for a comment or a blank."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    return re.sub(r"\s+#[^'\"]*$", "", line)


def fragments(line):
    """The pieces of one solution line that must not be shown: the line and its right-hand side."""
    code = _code(line)
    if code is None:
        return set()
    found = {_squash(code)}
    rhs = _ASSIGN.match(code)
    if rhs:
        found.add(_squash(rhs.group(1)))
    return {f for f in found if len(f) >= MIN_CHARS}


def _given_text(nb):
    """What the lab itself shows in its given code: the seed's docstrings and given cells."""
    shown = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or meta.get("locked")) and not meta.get("grade"):
            shown += split_cell(cell)["shown"]
    return _squash("\n".join(shown))


def shown_solution_lines(source_nb, release_nb):
    """[(solution cell, fragment, release cell index)] of every solution fragment shown in release."""
    given = _given_text(source_nb)
    cells = [(i, _squash(c.source)) for i, c in enumerate(release_nb.cells)]
    found = []
    for cell in source_nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or not meta.get("solution"):
            continue
        for line in split_cell(cell)["SOLUTION"]:
            for frag in sorted(fragments(line)):
                if frag in given:
                    continue
                found += [(meta.get("grade_id"), frag, i) for i, text in cells if frag in text]
    return found


def _read(path):
    return nbformat.read(str(path), as_version=4)


@pytest.mark.parametrize("lab", LABS)
def test_no_solution_line_in_release(lab):
    found = shown_solution_lines(_read(REPO / "source" / lab / f"{lab}.ipynb"),
                                 _read(REPO / "release" / lab / f"{lab}.ipynb"))
    assert not found, "\n".join(f"{cell}: `{frag}` shown in release cell {i + 1}" for cell, frag, i in found)


def test_fragments_of_a_line():
    assert fragments("    return -F.logsigmoid(r_chosen - r_rejected).mean()   # one line") == {
        "return-F.logsigmoid(r_chosen-r_rejected).mean()", "-F.logsigmoid(r_chosen-r_rejected).mean()"}
    assert fragments("    pairs = []") == set()
    assert fragments("# a comment") == set()


def test_a_shown_line_is_found():
    """The check can fail: a hint that quotes the solution's line is caught."""
    nb = _read(REPO / "source" / "lab12" / "lab12.ipynb")
    release = _read(REPO / "release" / "lab12" / "lab12.ipynb")
    release.cells.append(nbformat.v4.new_markdown_cell("Hint: `-F.logsigmoid(r_chosen - r_rejected).mean()`"))
    assert [(c, f) for c, f, _ in shown_solution_lines(nb, release)] == [
        ("bt_loss_solution", "-F.logsigmoid(r_chosen-r_rejected).mean()")]


def _ladder(nb, solution_id):
    """The markdown between the code cell before a task's solution cell and that cell."""
    index = next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == solution_id)
    text = []
    for cell in reversed(nb.cells[:index]):
        if cell.cell_type == "code":
            break
        text.append(cell.source)
    return "\n".join(reversed(text))


@pytest.mark.parametrize("lab", LABS)
def test_every_task_has_three_rungs(lab):
    nb = _read(REPO / "release" / lab / f"{lab}.ipynb")
    for row in table(lab).tasks:
        ladder = _ladder(nb, row.solution)
        summaries = re.findall(r"<summary>(.*?)</summary>", ladder)
        for rung in RUNGS:
            assert any(s.startswith(rung) for s in summaries), f"{lab} {row.name}: no {rung!r} above it: {summaries}"
        assert re.search(r"<summary>Hint 3[^<]*example", ladder), f"{lab} {row.name}: rung 3 is not a worked example"


if __name__ == "__main__":
    release, source = map(_read, sys.argv[1:3])
    hits = shown_solution_lines(source, release)
    for cell, frag, i in hits:
        print(f"{cell}: `{frag}` shown in release cell {i + 1}")
    print(f"{len(hits)} solution fragment(s) shown")
    sys.exit(1 if hits else 0)
