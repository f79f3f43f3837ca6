"""Run-time helpers of the notebooks: are we being graded, and a progress bar that knows where it is."""

import os
import platform
import sys
from pathlib import Path


def grading():
    """True while nbgrader executes the notebook (autograde, validate): views draw nothing then."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def _in_kernel():
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    return shell is not None and "ipykernel" in sys.modules


def progress(iterable, desc=None, total=None, leave=False):
    """A tqdm progress bar in a Jupyter kernel; the plain iterable elsewhere and while grading
    (scripts and the grader see no output at all).

    The bar appears once the loop's first step has run: a loop whose first step fails (an unfinished
    task raising NotImplementedError, which ``needs`` turns into "Finish ... first") leaves no red
    bar stuck at 0% above that line."""
    if grading() or not _in_kernel():
        return iterable
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    return _bar_after_first_step(iter(iterable), desc, total, leave)


def _bar_after_first_step(items, desc, total, leave):
    for first in items:
        yield first                                 # the first step runs before any bar exists
        break
    else:
        return
    from tqdm.auto import tqdm
    yield from tqdm(items, desc=desc, total=total, initial=1, leave=leave)


def machine_record():
    """The machine, CPU kernels and torch build this process computes with. Files of numbers made by
    training (the SFT checkpoint, the reference curves, cached results) record it: their last bits
    depend on it, so another machine gives the same verdicts and curves within the seed band, not
    the same bits."""
    import torch
    return {"processor": _cpu_name(), "machine": platform.machine(), "system": platform.system(),
            "capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "torch build": torch.version.git_version}


def _cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


__all__ = ["grading", "progress", "machine_record"]
