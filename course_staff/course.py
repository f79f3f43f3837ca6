"""What every staff tool knows about the course: where it is, its labs, its nbgrader config, its cells.

    from course_staff.course import REPO, LABS, config, is_written_answer
    LABS                           # ("lab11", "lab12"): a folder source/<lab>/ with <lab>.ipynb each
    config(course).CourseDirectory.db_url      # what nbgrader_config.py of a course folder sets

Cell kinds are nbgrader's own (``is_grade``, ``is_solution``, ``is_locked`` of ``nbgrader.utils``,
re-exported here), plus the one kind the course adds: a written answer, graded by hand.
"""

import runpy
from pathlib import Path

from nbgrader.utils import is_grade, is_locked, is_solution

REPO = Path(__file__).resolve().parents[1]
WITHHELD = "Grades withheld for review"   # FlagTampering's comment; manual_scores keeps such cells flagged


def labs(root=REPO):
    """The labs of a course folder: every source/<lab>/<lab>.ipynb, in name order."""
    return tuple(sorted(p.parent.name for p in (Path(root) / "source").glob("*/*.ipynb")
                        if p.stem == p.parent.name))


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


def is_written_answer(cell):
    """A manually graded answer: a markdown cell that is both a solution and a grade cell."""
    return cell.cell_type == "markdown" and bool(is_grade(cell)) and bool(is_solution(cell))


__all__ = ["REPO", "LABS", "WITHHELD", "labs", "source_notebook", "config", "is_grade", "is_solution",
           "is_locked", "is_written_answer"]
