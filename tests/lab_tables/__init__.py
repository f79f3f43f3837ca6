"""One table per lab of everything that is graded: tasks, concept checks and written questions.

    from lab_tables import table
    lab = table("lab12")
    lab.task("gae_per_token").checks     -> {"test_gae_per_token": 2.0, "test_gae_per_token_returns": 1.0, ...}
    lab.auto_marks()                     -> {check cell: points} of every autograded cell
    lab.written_marks()                  -> {answer cell: points} of every answer a TA grades

A row is a Task (a function the student writes: its solution cell, its check cells and their points,
the likely mistakes that must lose points there and nowhere else, and other correct versions that
must keep full marks), a Concept (a concept check: the cell holding the answer, its check cell, and
wrong answers), or a Question (a written answer cell, graded by hand). The simulated students
(tests/students), the mutant catalogue (tests/test_mutants.py) and the lifecycle read these tables,
by name; tests/test_lab_tables.py checks each against its source notebook, cell by cell.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Mistake:
    """The instructor's solution of one row with a plausible student mistake spliced in (or, as a
    variant, another correct way to write it)."""
    name: str                # a short name, also the simulated student's id (m_<name>)
    edits: tuple             # ((old, new), ...): str.replace in the row's solution cell
    says: str = ""           # a piece of the failing check's message ("" for a variant)

    @property
    def student(self):
        return f"m_{self.name}"


@dataclass(frozen=True)
class Task:
    """A function the student writes, graded by one or more check cells."""
    name: str                # the function, e.g. "gae_per_token"; its cell is <name>_solution
    checks: tuple            # ((check cell grade_id, points), ...), in notebook order
    mistakes: tuple = ()
    variants: tuple = ()

    @property
    def function(self):
        return self.name

    @property
    def solution(self):
        return f"{self.name}_solution"


@dataclass(frozen=True)
class Concept:
    """A concept check: a short answer in a code cell, graded automatically."""
    name: str                # the answer cell's grade_id, e.g. "concept_kl_noise" (it defines a function)
    points: float
    mistakes: tuple = ()     # wrong answers
    variants: tuple = ()

    @property
    def solution(self):
        return self.name

    @property
    def checks(self):
        return ((f"test_{self.name}", self.points),)


@dataclass(frozen=True)
class Question:
    """A written answer, graded by a TA in the formgrader."""
    name: str                # the answer cell's grade_id, e.g. "answer_kl_signs"
    points: float


@dataclass(frozen=True)
class Lab:
    name: str
    tasks: tuple
    concepts: tuple = ()
    questions: tuple = ()

    @property
    def rows(self):
        """Everything a student fills in with code: tasks, then concept checks."""
        return self.tasks + self.concepts

    def task(self, name):
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"{self.name} has no task or concept check {name!r}")

    def auto_marks(self):
        """{check cell: points} of every autograded cell."""
        return {gid: float(p) for row in self.rows for gid, p in row.checks}

    def written_marks(self):
        """{answer cell: points} of every written answer."""
        return {q.name: float(q.points) for q in self.questions}

    def full_marks(self):
        return {**self.auto_marks(), **self.written_marks()}

    def mistakes(self):
        """[(row, mistake)] of every row."""
        return [(row, m) for row in self.rows for m in row.mistakes]

    def variants(self):
        return [(row, v) for row in self.rows for v in row.variants]


def task(name, checks, mistakes=(), variants=()):
    """A Task; ``checks`` is {grade_id: points} or a number (one cell named test_<name>)."""
    if not isinstance(checks, dict):
        checks = {f"test_{name}": checks}
    return Task(name, tuple(checks.items()), tuple(mistakes), tuple(variants))


def table(lab):
    """The table of ``lab`` ("lab11" or "lab12")."""
    from importlib import import_module
    return import_module(f"lab_tables.{lab}").TABLE


__all__ = ["Mistake", "Task", "Concept", "Question", "Lab", "task", "table"]
