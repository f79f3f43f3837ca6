"""course_utils.memory: the memory of a large freed tensor stays with glibc's malloc, for the next one (glibc).
Each case runs in a fresh Python process and reads malloc's own account (mallinfo2): what it keeps is the
module's doing; whether the system takes idle pages back meanwhile (and the next tensor faults them in
again) is the kernel's, so page faults are not what is checked here."""

import subprocess
import sys

from course_staff.course import REPO
from course_utils import memory
from tests.requirements import missing

_KEPT = """
import ctypes, torch
{setup}
class Info(ctypes.Structure):          # glibc's struct mallinfo2
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = Info
torch.ones(25_000_000)                 # 100 MB written, then freed
print(mallinfo2().fordblks)            # bytes malloc holds free for the next allocation
"""
MB_100 = 100_000_000


def _kept_after_a_100_mb_tensor(setup):
    if not memory.keep_freed() or not hasattr(__import__("ctypes").CDLL(None), "mallinfo2"):
        missing("glibc", "course_utils.memory sets glibc's malloc only (Linux, glibc 2.33 or later)")
    done = subprocess.run([sys.executable, "-c", _KEPT.format(setup=setup)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_a_freed_large_tensor_stays_with_malloc_for_the_next():
    assert _kept_after_a_100_mb_tensor("import course_utils.tinylm") >= 0.95 * MB_100


def test_control_without_it_a_freed_large_tensor_goes_back_to_the_system():
    assert _kept_after_a_100_mb_tensor("") < 0.1 * MB_100
