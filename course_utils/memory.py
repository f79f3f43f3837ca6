"""Freed memory kept for the next pass: glibc malloc's two thresholds (Linux), set once per process.

    from course_utils import memory
    memory.keep_freed()     # tinylm does it on import; True where it applies (glibc), False elsewhere

A pass over a large batch (Lab 13's implicit-reward fit over 12,000 pairs, Lab 12's rankings and offset)
allocates tensors of tens to hundreds of MB. glibc serves an allocation that large with a fresh mmap and
hands it back to the system when it is freed, so every such pass pays a page fault and a zero fill per 4 KB
again: about 1 s of system CPU in one DPO run of Lab 13 (~470,000 page faults). Above these thresholds
(KEEP) glibc serves allocations from its heap and keeps what is freed, for the next pass to reuse.

Only where the tensors live changes: torch aligns them to 64 bytes either way, so every kernel computes the
same numbers. The process keeps up to KEEP bytes it freed instead of returning them to the system (its
peak, which it reached anyway, stays resident), unless the system takes idle pages back (then they fault in again).
"""

import ctypes
import os
import sys

KEEP = 1 << 30                  # bytes: allocations up to this size from the heap, freed memory kept up to it
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3           # mallopt's parameters (glibc's malloc.h)
_done = []


def keep_freed():
    """Set glibc's mmap and trim thresholds to KEEP (once). Returns True if they are set."""
    if not _done:
        _done.append(_set())
    return _done[0]


def _set():
    try:
        if not sys.platform.startswith("linux") or not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, ValueError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, KEEP)) and bool(mallopt(_M_TRIM_THRESHOLD, KEEP))


__all__ = ["KEEP", "keep_freed"]
