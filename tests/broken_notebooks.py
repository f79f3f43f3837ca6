"""A catalogue of broken notebooks: Lab 12 solved, then broken by what a student's editor or hands do.

    for entry in CATALOGUE:           # Broken(name, file name, notebook, what make check must say, ...)
        entry.name, entry.file, entry.notebook

Each entry starts from the release notebook with every answer filled in from the instructor's
solution (course_staff/testbed/harness.py: ``solved_submission``), so a correct grade is full marks on every check
cell and each written answer waiting for a TA, and then makes one edit that nbgrader support threads
keep meeting: a pasted cell (two cells with one grade id), a file saved under another name, a deleted
or edited read-only cell, the nbgrader metadata dropped by another editor, ``input()`` left in a
cell, a huge output saved in the file, another kernel. ``says`` is what the pre-submission check
must name (course_utils/notebook_problems.py). What `make autograde` must do with it: grade it as the notebook runs (the solved notebook's scores, less ``lost``: a check the notebook
itself fails; ``review``: a deleted written answer, put back and left to a TA) with one line about
the student in the grading log and the problem atop the feedback; or (``graded=False``) leave it
ungraded, with a line that says why.
"""

import copy
from dataclasses import dataclass, field

import nbformat

from course_staff.testbed import harness as h

LAB = "lab12"
TASK_CHECK = "test_bt_loss"           # the check cell of Task 1, and its answer cell
TASK_ANSWER = "bt_loss_solution"
WRITTEN = "answer_exp1_explain"


@dataclass
class Broken:
    name: str
    notebook: object
    says: list                          # substrings of the problem make check names
    logged: str = ""                    # in the student's line of the grading log (default: says[0])
    graded: bool = True                 # False: make autograde leaves it ungraded, with a line saying why
    file: str = f"{LAB}.ipynb"
    runs: list = field(default_factory=list)   # what a run of the checks says besides (slow test)
    lost: list = field(default_factory=list)   # check cells the notebook itself fails (it runs as saved)
    review: list = field(default_factory=list)  # cells put back blank for a TA ("needs manual grade")


def solved():
    return h.solved_submission(LAB)


def _copy(cell):
    """A pasted copy of ``cell``: the same metadata (grade id included), a new cell id, as JupyterLab pastes."""
    pasted = copy.deepcopy(cell)
    pasted.id = nbformat.v4.new_code_cell().id
    return pasted


def _index(nb, grade_id):
    return next(i for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def pasted_check():
    """The check cell copied and pasted under itself (Ctrl+C, Ctrl+V on a selected cell)."""
    nb = solved()
    i = _index(nb, TASK_CHECK)
    nb.cells.insert(i + 1, _copy(nb.cells[i]))
    return nb


def pasted_answer():
    """The answer cell pasted above itself, the copy tried out and the original left as released."""
    nb = solved()
    i = _index(nb, TASK_ANSWER)
    mine = _copy(nb.cells[i])
    nb.cells[i].source = h.blank_submission(LAB).cells[_index(h.blank_submission(LAB), TASK_ANSWER)].source
    nb.cells.insert(i, mine)
    return nb


def renamed():
    return solved()


def deleted_check():
    nb = solved()
    del nb.cells[_index(nb, TASK_CHECK)]
    return nb


def deleted_written_answer():
    nb = solved()
    del nb.cells[_index(nb, WRITTEN)]
    return nb


def edited_check():
    nb = solved()
    nb.cells[_index(nb, TASK_CHECK)].source = "pass  # my function is right, trust me"
    return nb


def stripped():
    """Saved by an editor that keeps only the cells' text: every cell's nbgrader metadata gone."""
    nb = solved()
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
    return nb


def with_input():
    nb = solved()
    i = _index(nb, "setup")
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell('seed = int(input("seed? "))'))
    nb.cells.insert(i + 2, nbformat.v4.new_code_cell('print("my seed is", seed)'))
    return nb


def huge_output():
    nb = solved()
    i = _index(nb, "setup")
    cell = nbformat.v4.new_code_cell("for step in range(200_000):\n    print('step', step)")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                           text="".join(f"step {s}\n" for s in range(200_000)))]
    nb.cells.insert(i + 1, cell)
    return nb


def wrong_kernel():
    nb = solved()
    nb.metadata["kernelspec"] = {"name": "conda-env-myenv-py", "display_name": "Python [conda env:myenv]",
                                 "language": "python"}
    return nb


def catalogue():
    return [
        Broken("pasted check cell", pasted_check(), ["check cell `test_bt_loss` appears twice",
                                                     "delete the copy you pasted"]),
        Broken("pasted answer cell", pasted_answer(), ["answer cell `bt_loss_solution` appears twice",
                                                       "keep your answer in one of them"], lost=[TASK_CHECK]),
        Broken("renamed file", renamed(), ["this file is `lab12 (1).ipynb`", "rename it to `lab12.ipynb`"],
               graded=False, logged="submitted 'lab12 (1).ipynb' instead of 'lab12.ipynb'",
               file=f"{LAB} (1).ipynb"),
        Broken("deleted check cell", deleted_check(), ["check cell `test_bt_loss` is missing",
                                                       "put it back under its task"]),
        Broken("deleted written answer", deleted_written_answer(),
               ["written-answer cell `answer_exp1_explain` is missing"], review=[WRITTEN]),
        Broken("edited check cell", edited_check(), ["check cell `test_bt_loss` (cell 7) was edited",
                                                     "the graders put back the original"]),
        Broken("metadata stripped", stripped(), ["lost the nbgrader metadata of all its cells",
                                                 "cannot match to the lab's cells scores 0"],
               logged="the metadata was given back from the release to grade it"),
        Broken("input() left in", with_input(), ["cell 3 calls input() (line 1)", "no keyboard"],
               runs=["[cell 3, not a check]", "calls input(), which waits for a keyboard",
                     "probably because cell 3 did not run: it calls input()"]),
        Broken("huge output", huge_output(), ["cell 3 holds 2.5 MB of output", "Clear Cell Output"]),
        Broken("wrong kernel", wrong_kernel(), ["asks for the kernel `conda-env-myenv-py`",
                                                "Change Kernel > Python 3"]),
    ]
