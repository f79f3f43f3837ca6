"""What is wrong with a lab notebook's file before it even runs, and how to repair it.

    from course_utils.notebook_problems import problems
    for p in problems("lab12/lab12.ipynb"):
        print(p)        # "cell `test_bt_loss` appears twice (cells 7 and 8): delete the copy you pasted"

The graders read the notebook through nbgrader's cell metadata: each answer and check cell carries
an id (``grade_id``), read-only cells a checksum of their text, the file has the lab's name and asks
for the ``python3`` kernel. What a student's editor does to a file can break that without any
error on screen: a pasted copy of a cell (two cells with one id: nbgrader grades only the last
one), a file saved as ``lab12 (1).ipynb``, a read-only cell deleted or edited, the metadata
dropped by another editor (nothing left to grade: 0 points), ``input()`` waiting for a keyboard
the graders do not have, outputs of many megabytes, another kernel. ``problems`` finds each one
from the file alone; the lab's cells (``data/lab_cells.json``, written by ``make release``: ids and
kinds only, never a cell's text) tell what the file should hold.
"""

import ast
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import nbformat

LAB_CELLS = Path(__file__).parent / "data" / "lab_cells.json"
KERNEL = "python3"                  # the kernel the graders run (nbgrader restores it from the release)
OUTPUT_LIMIT = 1_000_000            # bytes of output in one cell that count as huge
_LAB_NAME = re.compile(r"^(lab\d+)")


@dataclass
class Problem:
    what: str           # what is wrong, naming the cell
    repair: str         # how to repair it
    fatal: bool = False  # the graders would find nothing to grade: not worth running the checks

    def __str__(self):
        return f"{self.what}: {self.repair}"


def lab_cells():
    """{lab: [{"id": grade_id, "kind": "answer" | "check" | "written" | "read-only", "type": ...}, ...]}."""
    return json.loads(LAB_CELLS.read_text()) if LAB_CELLS.exists() else {}


def kind(meta):
    """The kind of an nbgrader cell from its metadata: what a student may do with it."""
    if meta.get("grade") and meta.get("solution"):
        return "written"
    if meta.get("solution"):
        return "answer"
    if meta.get("grade"):
        return "check"
    return "read-only" if meta.get("locked") else ""


def _ids(nb):
    """[(cell number from 1, grade_id, metadata)] of the cells that carry nbgrader metadata."""
    return [(i + 1, c.metadata["nbgrader"]["grade_id"], c.metadata["nbgrader"]) for i, c in enumerate(nb.cells)
            if c.metadata.get("nbgrader", {}).get("grade_id")]


def which_lab(nb, path, cells):
    """The lab a notebook is: the one whose cell ids it holds most of, else its folder's or file's name."""
    held = {gid for _, gid, _ in _ids(nb)}
    scores = {lab: len(held & {c["id"] for c in spec}) for lab, spec in cells.items()}
    if scores and max(scores.values()) > 0:
        return max(scores, key=scores.get)
    path = Path(path)
    for name in (path.parent.name, path.stem):
        m = _LAB_NAME.match(name)
        if m and m.group(1) in cells:
            return m.group(1)
    return None


def _cell_label(spec_or_meta, gid):
    return {"check": "check cell", "answer": "answer cell", "written": "written-answer cell",
            "read-only": "read-only cell"}.get(spec_or_meta, "cell") + f" `{gid}`"


def name_problems(path, lab):
    path = Path(path)
    right = f"{lab}.ipynb"
    if path.name == right:
        return []
    repair = f"rename it to `{right}` (the graders grade only `{right}`)"
    if (path.parent / right).exists():
        repair += (f"; `{right}` is in this folder too: keep your work in `{right}` and move the other "
                   "file out of the folder")
    return [Problem(f"this file is `{path.name}`", repair)]


def kernel_problems(nb):
    spec = nb.metadata.get("kernelspec", {})
    name, language = spec.get("name", KERNEL), spec.get("language", "python")
    if name == KERNEL and language == "python":
        return []
    return [Problem(f"this notebook asks for the kernel `{name}` ({spec.get('display_name', language)}), "
                    f"not `{KERNEL}`, the course's Python that the graders run",
                    "in JupyterLab choose Kernel > Change Kernel > Python 3 (in VS Code: Select Kernel > the "
                    "course's .venv), run the notebook again and save")]


def metadata_problems(nb, spec):
    """Metadata gone, cells pasted twice, deleted, edited or changed type."""
    found = _ids(nb)
    if spec and not found:
        return [Problem("this notebook has lost the nbgrader metadata of all its cells (an editor other than "
                        "JupyterLab, or a copy into a new notebook, drops it): nbgrader cannot tell its answers and "
                        "checks apart, and every answer the graders cannot match to the lab's cells scores 0",
                        "rename this file (e.g. to `mine.ipynb`), fetch a fresh copy of the lab (Assignments tab > "
                        "Fetch, or the lab's file from the course folder), copy your answers into its answer "
                        "cells, save it in JupyterLab and check it again", fatal=True)]
    out = []
    where = {}
    for number, gid, meta in found:
        where.setdefault(gid, []).append((number, meta))
    for gid, places in where.items():
        if len(places) > 1:
            numbers = " and ".join(str(n) for n, _ in places)
            k = kind(places[-1][1])
            repair = ("delete the copy you pasted" if k in ("check", "read-only") else
                      "the graders run both, in order, and grade what the later one leaves: keep your answer in "
                      "one of them and delete the other")
            out.append(Problem(f"{_cell_label(k, gid)} appears {_times(len(places))} (cells {numbers})", repair))
    expected = {c["id"]: c for c in spec}
    for c in spec:
        if c["id"] not in where and c["kind"]:
            out.append(_missing(c))
    for number, gid, meta in found:
        c = expected.get(gid)
        cell = nb.cells[number - 1]
        if c and c["type"] != cell.cell_type:
            out.append(Problem(f"the {_cell_label(c['kind'], gid)} (cell {number}) was a {c['type']} cell and is now "
                               f"a {cell.cell_type} cell",
                               f"change it back (in JupyterLab: select it, then the cell-type menu > {c['type']})"))
        elif meta.get("locked") and meta.get("checksum") and checksum(cell) != meta["checksum"]:
            out.append(Problem(f"the {_cell_label(kind(meta), gid)} (cell {number}) was edited",
                               "the graders put back the original, so your edit does not count: undo it "
                               "(copy the cell from a fresh copy of the lab)"))
    return out


def _times(n):
    return {2: "twice", 3: "three times"}.get(n, f"{n} times")


def _missing(c):
    label = _cell_label(c["kind"], c["id"])
    if c["kind"] == "check":
        what = f"the {label} is missing (deleted?)"
        repair = ("the graders add it back at the end of the notebook, where it may fail: put it back under its "
                  "task (copy it from a fresh copy of the lab)")
    elif c["kind"] in ("answer", "written"):
        what = f"the {label} is missing (deleted, or its metadata lost)"
        repair = ("the graders find no answer for it: copy the cell from a fresh copy of the lab to its place and "
                  "put your answer in it")
    else:
        what = f"the {label} is missing (deleted?)"
        repair = "the cells after it may fail without it: copy it back from a fresh copy of the lab"
    return Problem(what, repair)


def checksum(cell):
    """nbgrader's checksum of a cell (``nbgrader.utils.compute_checksum``, which students do not
    install): md5 of its text, type, kind flags, grade id and points."""
    meta = cell.metadata["nbgrader"]
    grade, solution = bool(meta.get("grade", False)), bool(meta.get("solution", False))
    locked = False if solution else True if grade else bool(meta.get("locked", False))
    m = hashlib.md5()
    for part in (cell.source, cell.cell_type, str(meta.get("grade", False)), str(meta.get("solution", False)),
                 str(locked), meta["grade_id"]):
        m.update(part.encode("utf-8"))
    if grade:
        m.update(str(float(meta["points"])).encode("utf-8"))
    return m.hexdigest()


def calls_input(source):
    """The line numbers where ``source`` (a code cell) calls ``input()``."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager
        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 -- without IPython, parse the cell as it is
        pass
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "input"]


INPUT_REPAIR = ("the graders run the notebook with no keyboard, so input() stops there with an error and every "
                "cell that uses its answer fails: write the value in the code instead (x = 3, not x = input())")


def input_problems(nb):
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            lines = calls_input(cell.source)
            if lines:
                out.append(Problem(f"cell {i + 1} calls input() (line {lines[0]})", INPUT_REPAIR))
    return out


def output_problems(nb):
    out = []
    for i, cell in enumerate(nb.cells):
        size = len(json.dumps(cell.get("outputs", [])))
        if size > OUTPUT_LIMIT:
            out.append(Problem(f"cell {i + 1} holds {size / 1e6:.1f} MB of output",
                               "clear it (right-click the cell > Clear Cell Output, or stop it printing so much) and "
                               "save: huge outputs slow the notebook down and the submission with it"))
    return out


def problems(path, nb=None, cells=None):
    """[Problem] of the notebook at ``path`` (``nb``: the notebook already read), in the order a student
    would fix them; [] for a file the graders read as it is meant to be read."""
    nb = nb if nb is not None else nbformat.read(str(path), as_version=4)
    cells = lab_cells() if cells is None else cells
    lab = which_lab(nb, path, cells)
    spec = cells.get(lab, [])
    found = name_problems(path, lab) if lab else []
    found += metadata_problems(nb, spec)
    found += kernel_problems(nb) + input_problems(nb) + output_problems(nb)
    return found


def lab_cells_of(notebook):
    """The entries of ``lab_cells.json`` for one release notebook (make release writes them): its
    answer, check and written-answer cells and its read-only code cells (its read-only text, the
    prose, can change without making a student's notebook wrong)."""
    entries = [{"id": gid, "kind": kind(meta), "type": notebook.cells[n - 1].cell_type}
               for n, gid, meta in _ids(notebook)]
    return [e for e in entries if e["kind"] and not (e["kind"] == "read-only" and e["type"] == "markdown")]
