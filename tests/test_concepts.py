"""Concept checks need reasoning, not copying: the value a concept check asks for is not a number that
the lab has printed or stated above it.

The source notebook (the reference run, with the instructor's answers) is executed up to its last
concept check; then each concept check's answer is computed in that kernel and looked for, in the
usual roundings, in every output and every markdown cell above the concept check. Slow: a kernel.
"""

import re

import nbformat
import pytest
from nbclient import NotebookClient

from course_utils.kernel_client import SteadyKernelManager

from course_staff.testbed import harness as h
from course_staff.testbed.lab_tables import table

pytestmark = pytest.mark.slow
LABS = [lab for lab in h.LABS if table(lab).concepts]     # the labs with concept checks


def _grade_id(cell):
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def _text_above(cells):
    """Every output and markdown cell, as text (what a student has read by then)."""
    parts = []
    for cell in cells:
        if cell.cell_type == "markdown":
            parts.append(cell.source)
        for out in cell.get("outputs", []):
            parts.append(out.get("text", ""))
            parts += [v for k, v in out.get("data", {}).items() if k.startswith("text/") and isinstance(v, str)]
    return "\n".join(parts)


def renderings(value):
    """How a number may have been printed: 2 and 3 decimals, 2 and 3 significant digits."""
    return {f"{value:.2f}", f"{value:.3f}", f"{value:.2g}", f"{value:.3g}"} - {"0.00", "0.000", "0", "0.0"}


@pytest.fixture(scope="module", params=LABS)
def reference_run(request, tmp_path_factory):
    lab = request.param
    nb = nbformat.read(str(h.REPO / "source" / lab / f"{lab}.ipynb"), as_version=4)
    names = [row.name for row in table(lab).concepts]
    ids = [_grade_id(c) for c in nb.cells]
    last = max(ids.index(f"test_{n}") for n in names)
    nb.cells = nb.cells[:last + 1]
    functions = {n: re.search(r"^def (\w+)\(", nb.cells[ids.index(n)].source, re.M).group(1) for n in names}
    nb.cells.append(nbformat.v4.new_code_cell("\n".join(
        f"_v = {f}()\nprint({n!r}, repr(float(_v)) if isinstance(_v, (int, float)) else repr(set(_v)))"
        for n, f in functions.items())))
    NotebookClient(nb, timeout=600, kernel_name="python3", kernel_manager_class=SteadyKernelManager,
                   resources={"metadata": {"path": str(tmp_path_factory.mktemp(lab))}}).execute()
    answers = {}
    for line in nb.cells[-1].outputs[0]["text"].splitlines():
        name, value = line.split(" ", 1)
        answers[name] = eval(value)          # a number or a set of letters, printed by the reference run
    return lab, nb, ids, answers


def test_each_lab_has_two_concept_checks(reference_run):
    lab, _, _, answers = reference_run
    assert len(answers) >= 2, lab


def test_no_concept_answer_is_printed_above_it(reference_run):
    lab, nb, ids, answers = reference_run
    for name, value in answers.items():
        if not isinstance(value, (int, float)):
            continue                          # a set of letters: reasoning by construction
        above = _text_above(nb.cells[:ids.index(name)])
        shown = sorted(r for r in renderings(float(value)) if re.search(rf"(?<![\d.]){re.escape(r)}(?!\d)", above))
        assert not shown, f"{lab} {name}: its answer {value:.4g} is printed above it as {shown}"


def test_renderings_find_a_printed_number():
    """The test can fail: a table that printed the answer would be caught."""
    value = 12.16
    assert "12.16" in renderings(value) and "12.2" in renderings(value)
