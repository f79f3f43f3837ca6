"""course_utils.memory: a large tensor's memory, once freed, serves the next one without page faults (glibc).
Each case runs in a fresh Python process; page faults are counted, not timed."""

import subprocess
import sys

import pytest

from course_staff.course import REPO
from course_utils import memory

_FAULTS = """
import resource, sys, torch
{setup}
def faults_of_a_100_mb_tensor():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.ones(25_000_000)                             # 100 MB written, then freed
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
faults_of_a_100_mb_tensor()
print(faults_of_a_100_mb_tensor())                     # the second one: reuses the first one's memory, or not
"""
PAGES = 100_000_000 // 4096                            # 4 KB pages a fresh 100 MB tensor faults in


def _second_tensor_faults(setup):
    done = subprocess.run([sys.executable, "-c", _FAULTS.format(setup=setup)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.mark.skipif(not memory.keep_freed(), reason="glibc's malloc only (Linux)")
def test_a_freed_large_tensor_serves_the_next_without_page_faults():
    assert _second_tensor_faults("import course_utils.tinylm") < PAGES // 10


@pytest.mark.skipif(not memory.keep_freed(), reason="glibc's malloc only (Linux)")
def test_control_without_it_the_next_large_tensor_faults_in_every_page():
    assert _second_tensor_faults("") > PAGES // 2
