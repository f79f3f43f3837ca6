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


def bars_here():
    """True where progress bars are drawn: a Jupyter kernel, not grading."""
    return not grading() and _in_kernel()


_relay = None           # in a child process of course_utils.parallel: where each step is sent


def relay_progress(send):
    """In a child process of ``course_utils.parallel``: ``progress`` draws no bar but calls
    ``send(desc, total, steps done)`` after each step (the parent draws the bar)."""
    global _relay
    _relay = send


def progress(iterable, desc=None, total=None, leave=False):
    """A tqdm progress bar in a Jupyter kernel; the plain iterable elsewhere and while grading
    (scripts and the grader see no output at all).

    The bar appears once the loop's first step has run: a loop whose first step fails (an unfinished
    task raising NotImplementedError, which ``needs`` turns into "Finish ... first") leaves no red
    bar stuck at 0% above that line."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    if _relay is not None:
        return _relayed(iterable, desc, total, _relay)
    if not bars_here():
        return iterable
    return _bar_after_first_step(iter(iterable), desc, total, leave)


def _bar_after_first_step(items, desc, total, leave):
    for first in items:
        yield first                                 # the first step runs before any bar exists
        break
    else:
        return
    from tqdm.auto import tqdm
    yield from tqdm(items, desc=desc, total=total, initial=1, leave=leave)


def _relayed(iterable, desc, total, send):
    for n, item in enumerate(iterable, 1):
        yield item
        send(desc, total, n)


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


__all__ = ["grading", "bars_here", "progress", "relay_progress", "machine_record"]
