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
    (scripts and the grader see no output at all)."""
    if grading() or not _in_kernel():
        return iterable
    from tqdm.auto import tqdm
    return tqdm(iterable, desc=desc, total=total, leave=leave)


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
