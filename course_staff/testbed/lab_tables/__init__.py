"""One table per lab of everything that is graded: tasks, concept checks and written questions.

    from course_staff.testbed.lab_tables import table
    lab = table("lab12")
    lab.task("gae_per_token").checks     -> {"test_gae_per_token": 2.0, "test_gae_per_token_returns": 1.0, ...}
    lab.auto_marks()                     -> {check cell: points} of every autograded cell
    lab.written_marks()                  -> {answer cell: points} of every answer a TA grades

A row is a Task (a function the student writes: its solution cell, its check cells, the likely
mistakes that must lose points there and nowhere else, and other correct versions that must keep
full marks), a Concept (a concept check: the cell holding the answer, its check cell, and wrong
answers), or a Question (a written answer cell, graded by hand). The simulated students
(course_staff/testbed/students), the mutant catalogue (tests/test_mutants.py) and the lifecycle read these tables,
by name; tests/test_lab_tables.py checks each against its source notebook, cell by cell.

Points have one source, the nbgrader metadata of the source notebook: ``table(lab)`` reads them
from there into every row (the tables name cells, never points), and tests/test_lab_tables.py checks
each task heading, the intro table and the total of the notebook's text against the same metadata.
"""

import functools
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Mistake:
    """The instructor's solution of one row with a plausible student mistake spliced in (or, as a
    variant, another correct way to write it)."""
    name: str                # a short name, also the simulated student's id (m_<name>)
    edits: tuple             # ((old, new), ...): str.replace in the row's solution cell
    says: str = ""           # a piece of the failing check's message ("" for a variant)
    parts: tuple = ()        # the row's check cells it may lose points in (() = the row's only cell)

    @property
    def student(self):
        return f"m_{self.name}"


@dataclass(frozen=True)
class Task:
    """A function the student writes, graded by one or more check cells."""
    name: str                # the function, e.g. "gae_per_token"; its cell is <name>_solution
    cells: tuple             # (check cell grade_id, ...), in notebook order
    mistakes: tuple = ()
    variants: tuple = ()
    points: tuple = ()       # (points, ...) of those cells, from the notebook (table() fills it in)

    @property
    def checks(self):
        """((check cell grade_id, points), ...), in notebook order."""
        return tuple(zip(self.cells, self.points))

    @property
    def function(self):
        return self.name

    @property
    def solution(self):
        return f"{self.name}_solution"


@dataclass(frozen=True)
class Concept:
    """A concept check: a short answer in a code cell, graded automatically."""
    name: str                # the answer cell's grade_id, e.g. "concept_entropy_limit" (it defines a function)
    mistakes: tuple = ()     # wrong answers
    variants: tuple = ()
    points: float = None     # of its check cell, from the notebook (table() fills it in)

    @property
    def cells(self):
        return (f"test_{self.name}",)

    @property
    def solution(self):
        return self.name

    @property
    def checks(self):
        return ((self.cells[0], self.points),)


@dataclass(frozen=True)
class Question:
    """A written answer, graded by a TA in the formgrader."""
    name: str                # the answer cell's grade_id, e.g. "answer_kl_signs"
    points: float = None     # from the notebook (table() fills it in)


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

    def parts(self, row, mistake):
        """The check cells of ``row`` where ``mistake`` may lose points: the ones it names, else the row's
        only check cell (a row with several parts must name them: each part is judged on its own)."""
        if mistake.parts:
            return tuple(mistake.parts)
        if len(row.cells) != 1:
            raise ValueError(f"{self.name}/{mistake.name}: {row.name} has the parts {row.cells}; name the ones "
                             "this mistake may lose points in")
        return row.cells

    def mistakes(self):
        """[(row, mistake)] of every row."""
        return [(row, m) for row in self.rows for m in row.mistakes]

    def variants(self):
        return [(row, v) for row in self.rows for v in row.variants]

    def with_points(self, points):
        """This table with every row's points from ``points`` ({grade_id: points})."""
        def of(gid):
            if gid not in points:
                raise KeyError(f"{self.name}: the table names {gid!r}, which is no graded cell of the notebook")
            return points[gid]
        return replace(self, tasks=tuple(replace(t, points=tuple(of(g) for g in t.cells)) for t in self.tasks),
                       concepts=tuple(replace(c, points=of(c.cells[0])) for c in self.concepts),
                       questions=tuple(replace(q, points=of(q.name)) for q in self.questions))


def task(name, checks=None, mistakes=(), variants=()):
    """A Task; ``checks`` names its check cells in notebook order (default: one cell test_<name>).
    Their points are the notebook's, never the table's."""
    if checks is None:
        checks = (f"test_{name}",)
    if isinstance(checks, (int, float, dict)):
        raise TypeError(f"task({name!r}, {checks!r}): points live in the notebook's nbgrader metadata; "
                        "name the check cells (or none, for one cell test_<name>)")
    return Task(name, tuple(checks), tuple(mistakes), tuple(variants))


def notebook_points(lab):
    """{grade_id: points} of every graded cell of the source notebook: the one source of points."""
    import nbformat

    from course_staff.testbed.harness import REPO

    cells = nbformat.read(str(REPO / "source" / lab / f"{lab}.ipynb"), as_version=4).cells
    graded = (c.metadata.get("nbgrader", {}) for c in cells)
    return {m["grade_id"]: float(m["points"]) for m in graded if m.get("grade")}


@functools.cache
def table(lab):
    """The table of ``lab`` ("lab11" or "lab12"), with the points of its source notebook."""
    from importlib import import_module
    return import_module(f"course_staff.testbed.lab_tables.{lab}").TABLE.with_points(notebook_points(lab))


__all__ = ["Mistake", "Task", "Concept", "Question", "Lab", "task", "table", "notebook_points"]
