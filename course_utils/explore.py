"""The protocol of an explore cell (views/base.py shows one): "not finished yet" as one line, not a traceback.

    with needs("Task 4 (tilted_optimum)"):
        views.BetaView(...).show()

A student function that still raises NotImplementedError, or a view that waits for an earlier part
of the lab (``Unfinished``), prints ``Finish ... first, then run this cell again.`` The notebooks
import ``needs`` with the checks (``from course_utils.checks import ..., needs``).
"""

import contextlib


class Unfinished(NotImplementedError):
    """Raised by a view that waits for an earlier part of the lab (e.g. Lab 12's reward model of
    Part A): ``needs`` then names that part instead of the cell's own tasks."""

    def __init__(self, part):
        super().__init__(f"Finish {part} first")
        self.part = part


@contextlib.contextmanager
def needs(task):
    """Run an explore cell, turning "not implemented yet" into a friendly one-line message.

        with needs("Task 4 (tilted_optimum)"):
            views.BetaView(...).show()

    If a student function still raises NotImplementedError, prints
    ``Finish Task 4 (tilted_optimum) first, then run this cell again.`` instead of a traceback
    (an ``Unfinished`` error names the part it waits for instead).
    """
    try:
        yield
    except NotImplementedError as err:
        print(f"Finish {getattr(err, 'part', task)} first, then run this cell again.")


__all__ = ["Unfinished", "needs"]
