"""What every staff tool knows about the course: where it is, its labs, its nbgrader config, its cells.

    from course_staff.course import REPO, LABS, config, is_written_answer
    LABS                           # ("lab11", "lab12", ...): a folder source/<lab>/ with <lab>.ipynb each
    assigned()                     # the labs this class assigns: labs.txt's, else LABS
    python -m course_staff.course  # prints them (the Makefile's LABS: record, lab); --every: LABS (release)
    config(course).CourseDirectory.db_url      # what nbgrader_config.py of a course folder sets

Cell kinds are nbgrader's own (``is_grade``, ``is_solution``, ``is_locked`` of ``nbgrader.utils``,
re-exported here), plus the one kind the course adds: a written answer, graded by hand.
"""

import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WITHHELD = "Grades withheld for review"   # FlagTampering's comment; manual_scores keeps such cells flagged


CLASS_LABS = "labs.txt"    # at a course folder's root: the labs one class assigns (docs/ta_guide.md)


def labs(root=REPO):
    """The labs of a course folder: every source/<lab>/<lab>.ipynb, in name order. The tests cover them all."""
    return tuple(sorted(p.parent.name for p in (Path(root) / "source").glob("*/*.ipynb")
                        if p.stem == p.parent.name))


def assigned(root=REPO):
    """The labs a class assigns: those <root>/labs.txt lists (one a line, ``#`` starts a comment), in
    name order; without that file, every lab. What the class's tools release, record, open, ship in the
    student edition and put on the hub; a lab left out stays in source/ and in the tests."""
    every = labs(root)
    listed = Path(root) / CLASS_LABS
    if not listed.exists():
        return every
    names = [word for line in listed.read_text().splitlines() for word in line.split("#", 1)[0].split()]
    unknown = sorted(set(names) - set(every))
    if unknown or not names:
        raise ValueError(f"{listed} lists {', '.join(unknown) or 'no lab'}: it may list only labs of "
                         f"source/ ({', '.join(every)}), one a line")
    return tuple(lab for lab in every if lab in names)


LABS = labs()
COURSE_ID = "rl-for-llms"      # nbgrader's course id: nbgrader_config.py, the hub and the tests read it


def source_notebook(lab, root=REPO):
    """source/<lab>/<lab>.ipynb under the course root: the instructor's notebook."""
    return Path(root) / "source" / lab / f"{lab}.ipynb"


def config(course=REPO):
    """The traitlets config that nbgrader_config.py of ``course`` (a folder or the file) builds."""
    from traitlets.config import Config

    path = Path(course)
    path = path if path.suffix == ".py" else path / "nbgrader_config.py"
    built = Config()
    runpy.run_path(str(path), init_globals={"get_config": lambda: built})
    return built


def __getattr__(name):
    """nbgrader's cell kinds, imported on first use: nbgrader takes seconds to import, the labs an instant."""
    if name in ("is_grade", "is_locked", "is_solution"):
        import nbgrader.utils
        return getattr(nbgrader.utils, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_written_answer(cell):
    """A manually graded answer: a markdown cell that is both a solution and a grade cell."""
    from nbgrader.utils import is_grade, is_solution
    return cell.cell_type == "markdown" and bool(is_grade(cell)) and bool(is_solution(cell))


__all__ = ["REPO", "LABS", "WITHHELD", "CLASS_LABS", "labs", "assigned", "source_notebook", "config", "is_grade", "is_solution",
           "is_locked", "is_written_answer"]


if __name__ == "__main__":      # the Makefile's LABS (and with --every its EVERY_LAB) of the course folder it runs in
    import sys
    try:
        print(" ".join(labs(Path.cwd()) if sys.argv[1:] == ["--every"] else assigned(Path.cwd())))
    except ValueError as err:
        raise SystemExit(str(err)) from None
