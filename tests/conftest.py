"""pytest configuration of the course's tests."""

import concurrent.futures
from pathlib import Path

import pytest

from tests import requirements


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: starts nbgrader, a kernel, a venv or JupyterLab, or runs a long experiment "
        "(deselect with -m 'not slow')")


# The longest test files, longest first (each file's seconds in a fresh-clone `make test` on a 2-core
# machine, from its --junitxml): starting them first keeps the last minutes from running on one worker
# while the others wait (`make test` passes --no-loadscope-reorder, so files are handed out in this
# order; the rest follow in collection order). test_validate_agrees.py reads the lifecycle that
# test_lifecycle.py's worker builds (tests/lifecycle.py, once per run): it comes late, so that it finds the
# lifecycle built instead of waiting for it.
LONGEST_FIRST = ("browser/test_labs_in_browser.py", "browser/test_hub_round_trip.py", "test_lifecycle.py",
                 "test_mutants.py", "test_class_grading.py", "test_capability_matrix.py", "test_student_edition.py",
                 "test_broken_notebooks.py", "test_science.py", "test_ta_week.py", "test_validate_agrees.py",
                 "test_sandbox.py", "test_tolerances.py")


def _stale_lines():
    """The measured figures that no longer measure the current code (benchmarks/provenance.py), and the
    documents that quote other figures than benchmarks/results holds: lines of a warning."""
    from benchmarks import figures, provenance
    try:
        return provenance.stale_report() + [f"{rel} quotes other figures than benchmarks/results holds: "
                                            "run `make figures`" for rel in figures.unrendered()]
    except Exception as err:  # noqa: BLE001 -- a warning must never fail the run
        return [f"could not tell which figures are stale: {type(err).__name__}: {err}"]


def pytest_addoption(parser):
    parser.addoption("--no-stale-report", action="store_true",
                     help="leave out the stale-figure warnings (a run whose output nobody reads: the ledger's)")


def _reports(config):
    """Does this process print the stale-figure report? xdist's controller or a run without workers does."""
    return not hasattr(config, "workerinput") and not config.getoption("no_stale_report")


def pytest_sessionstart(session):
    """The stale-figure report is worked out while the tests run (it hashes the code its figures measured,
    about 9 CPU-s), in the process that prints it: xdist's controller, which otherwise waits on its workers."""
    if _reports(session.config):
        session.config.stale_report = concurrent.futures.ThreadPoolExecutor(1).submit(_stale_lines)


def pytest_terminal_summary(terminalreporter, config):
    """The measured figures that no longer measure the current code, named as a warning, never a failure
    (a figure is of the measurement lane: `make bench` and the like remake it)."""
    if not _reports(config):                      # an xdist worker (the controller reports), or asked not to
        return
    lines = config.stale_report.result()
    if lines:
        terminalreporter.section("stale measured figures (a warning: nothing failed because of them)", yellow=True)
        for line in lines:
            terminalreporter.write_line(f"warning: {line}", yellow=True)


def pytest_collection_modifyitems(config, items):
    tests = Path(__file__).resolve().parent
    rank = {str(tests / name): i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(str(item.path), len(rank)))       # stable: same order otherwise


@pytest.fixture(scope="session", autouse=True)
def shared_course_templates(tmp_path_factory):
    """The folder where course_staff/testbed/harness.py generates each set of labs once for the whole run: under xdist,
    the parent of the workers' own folders (all workers of one run share it)."""
    from course_staff.testbed import harness
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if base.name.startswith("popen-gw") else base) / "course-templates"
    shared.mkdir(exist_ok=True)
    harness.TEMPLATES = shared
    yield shared
    harness.TEMPLATES = None


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server (Debian's package, course_staff.grading.postgres), started for this test
    session and deleted after it; each test makes its own database with create_database(name).
    Without the server programs the tests skip, or fail where COURSE_REQUIRE_POSTGRES=1 (CI)."""
    from course_staff.grading.postgres import PostgresMissing, Server

    try:
        server = Server.start()
    except PostgresMissing as missing:
        requirements.missing("postgres", str(missing))
    yield server
    server.stop()


@pytest.fixture
def outside_a_kernel(monkeypatch):
    """A test of the views' kernel logic (course_utils.views.base.kernel_loop) starts as a script does: no
    IPython shell and no event loop marked running in this thread, whatever an earlier test in the worker
    left (the browser tests' Playwright marks its loop running while it is open, where asyncio.run refuses
    to start); both as they were afterwards. A test plays the kernel with a shell of its own."""
    import asyncio

    monkeypatch.setattr("IPython.get_ipython", lambda: None)
    left = asyncio._get_running_loop()
    asyncio._set_running_loop(None)
    try:
        yield
    finally:
        asyncio._set_running_loop(left)
