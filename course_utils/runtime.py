"""Run-time helpers of the notebooks: are we being graded, and a progress bar that knows where it is."""

import os
import sys


def grading():
    """True while nbgrader executes the notebook (autograde, validate): views draw nothing then."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def _in_kernel():
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and "ipykernel" in sys.modules


def progress(iterable, desc=None, total=None, leave=False):
    """A tqdm progress bar in a Jupyter kernel; the plain iterable elsewhere and while grading
    (scripts and the grader see no output at all)."""
    if grading() or not _in_kernel():
        return iterable
    from tqdm.auto import tqdm
    return tqdm(iterable, desc=desc, total=total, leave=leave)


__all__ = ["grading", "progress"]
