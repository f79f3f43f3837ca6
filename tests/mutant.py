"""A mutant: an instructor's solution of ONE task with a plausible student mistake spliced in.

The catalogues tests/mutants_lab11.py and tests/mutants_lab12.py are lists of these (plus, for
Lab 11, correct variants in the same form); tests/test_mutants.py grades them with the real nbgrader.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    task_grade_id: str          # the check cell that must catch it, e.g. "test_kl_estimators"
    solution_grade_id: str      # the solution cell it edits, e.g. "kl_estimators_solution"
    name: str                   # a short name (also the simulated student's id)
    edits: tuple                # ((old, new), ...) replacements in the solution text
    says: str = ""              # a piece of the failing check's message ("" = not checked)

    @property
    def student(self):
        return f"m_{self.name}"


def mutant(task, name, edits, says=""):
    """The Mutant of task ``task`` (e.g. "bt_loss"), editing ``<task>_solution``, caught by ``test_<task>``."""
    return Mutant(f"test_{task}", f"{task}_solution", name, tuple(edits), says)
