"""pytest configuration of the course's tests."""

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # `import mutant`, `import students` from any test


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: starts nbgrader, a kernel, a venv or JupyterLab, or runs a long experiment "
        "(deselect with -m 'not slow')")


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL server (Debian's package, course_staff.grading.postgres), started for this test
    session and deleted after it; each test makes its own database with create_database(name).
    Without the server programs the tests skip, or fail where COURSE_REQUIRE_POSTGRES=1 (CI)."""
    from course_staff.grading.postgres import PostgresMissing, Server

    try:
        server = Server.start()
    except PostgresMissing as missing:
        if os.environ.get("COURSE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"COURSE_REQUIRE_POSTGRES=1 but {missing}")
        pytest.skip(str(missing))
    yield server
    server.stop()
