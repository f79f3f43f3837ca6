"""Load a lab's functions from its source notebook, without its checks and experiments.

    from course_staff.solutions import load_lab
    lab = load_lab("lab12")                 # {name: object} of the notebook's namespace
    policy, hist = lab["train_rlhf"](sft, rm, rm_offset, lab["RLHFConfig"](beta=0.1))

``load_lab`` executes, in order, every code cell of ``source/<lab>/<lab>.ipynb`` that is neither an
nbgrader grade cell (a check) nor tagged "explore" (plots, sliders, sweeps): the imports, the
instructor's solutions and the provided code. It runs in a fresh module namespace, with
NBGRADER_EXECUTION unset (so nothing runs in its shortened grading form), and IPython-only lines
(``%magic``, ``!shell``) skipped. What the cells print is dropped unless ``quiet=False``.
"""

import ast
import contextlib
import io
import os
import sys
import types

import nbformat

from course_staff.course import REPO, is_grade
from course_staff.course import source_notebook as notebook_path


def is_definition_cell(cell):
    """True for a code cell that defines the lab: not a grade cell, not tagged "explore"."""
    if cell.cell_type != "code":
        return False
    if is_grade(cell):
        return False
    return "explore" not in cell.metadata.get("tags", [])


def lab_cells(lab, root=REPO):
    """[(cell index, source)] of the cells ``load_lab`` runs, magics and shell lines removed."""
    path = notebook_path(lab, root)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist (yet): write the {lab} notebook first")
    nb = nbformat.read(str(path), as_version=4)
    cells = []
    for i, cell in enumerate(nb.cells):
        if is_definition_cell(cell):
            lines = [ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
            cells.append((i, "\n".join(lines)))
    return cells


def given_default(lab, cls, field, root=REPO):
    """The default of ``field`` in the class ``cls`` that the lab's cells define, read from its source without
    running anything (``given_default("lab12", "RLHFConfig", "beta")`` -> 0.1): for code that names a lab's
    default when it is imported. The default must be a literal."""
    for _, source in lab_cells(lab, root):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.name == cls:
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and getattr(item.target, "id", None) == field:
                        return ast.literal_eval(item.value)
    raise LookupError(f"{lab} defines no class {cls} with a field {field}")


@contextlib.contextmanager
def _without_grading_env():
    saved = os.environ.pop("NBGRADER_EXECUTION", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["NBGRADER_EXECUTION"] = saved


def load_lab(lab, root=REPO, quiet=True):
    """Execute the lab's definition cells in a fresh namespace; returns that namespace (a dict).

    The namespace belongs to a module registered as ``sys.modules["<lab>_notebook"]``, so its
    dataclasses and functions behave like those of an imported module (and pickle in a forked pool).
    """
    name = f"{lab}_notebook"
    module = types.ModuleType(name, f"Definitions of {notebook_path(lab, root)}")
    module.__file__ = str(notebook_path(lab, root))
    sys.modules[name] = module
    printed = contextlib.redirect_stdout(io.StringIO()) if quiet else contextlib.nullcontext()
    with _without_grading_env(), printed:
        for index, source in lab_cells(lab, root):
            code = compile(source, f"<{lab}.ipynb cell {index}>", "exec")
            exec(code, module.__dict__)           # noqa: S102 -- the course's own notebook
    return module.__dict__


__all__ = ["load_lab", "lab_cells", "given_default", "is_definition_cell", "notebook_path", "REPO"]
