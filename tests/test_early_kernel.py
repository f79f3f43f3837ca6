"""StartKernelEarly's kernel is taken by Execute only for the very launch it was started for
(course_staff/grading/early_kernel.py); anything else is shut down and Execute starts its own. The kernels
here are stand-ins: tests/test_sandbox.py grades real submissions in the kernels started early."""

import pytest

from course_staff.grading import early_kernel


class Manager:
    """A kernel manager stand-in: its kernel runs until shut down."""

    kernel_name = "python3"

    def __init__(self):
        self.has_kernel, self.cleaned = True, False

    async def shutdown_kernel(self, now=False):
        self.has_kernel = False

    async def cleanup_resources(self, restart=False):
        self.cleaned = True


class Client:
    """An nbclient NotebookClient stand-in: what a launch depends on."""

    def __init__(self, path="/course/autograded/alice/lab11"):
        self.km = Manager()
        self.resources = {"metadata": {"path": path}}
        self.extra_arguments = []
        self.ipython_hist_file = ":memory:"


def start_early(monkeypatch):
    """A kernel started early for Client()'s launch, with NBGRADER_EXECUTION=autograde (in the test's own
    phase: pytest's PYTEST_CURRENT_TEST differs between a fixture and the test)."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    early = Client()
    monkeypatch.setattr(early_kernel, "_pending", (early_kernel.launch_key(early, {}), early.km))
    return early.km


def test_the_same_launch_takes_the_kernel_started_early(monkeypatch):
    started = start_early(monkeypatch)
    assert early_kernel.claim(Client(), {}) is started and started.has_kernel
    assert early_kernel.claim(Client(), {}) is None, "taken once"


@pytest.mark.parametrize("change", ["folder", "environment", "arguments", "kernel", "dead"])
def test_another_launch_shuts_it_down_and_starts_its_own(monkeypatch, change):
    started = start_early(monkeypatch)
    client = Client("/course/autograded/bob/lab11" if change == "folder" else "/course/autograded/alice/lab11")
    if change == "environment":
        monkeypatch.delenv("NBGRADER_EXECUTION")
    if change == "arguments":
        client.extra_arguments = ["--HistoryManager.enabled=False"]
    if change == "kernel":
        client.km.kernel_name = "python2"
    if change == "dead":
        started.has_kernel = False
    assert early_kernel.claim(client, {}) is None
    assert not started.has_kernel and started.cleaned and early_kernel._pending is None


def test_nothing_started_early_starts_its_own():
    assert early_kernel._pending is None and early_kernel.claim(Client(), {}) is None
