"""pytest configuration of the course's tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # `import mutant`, `import students` from any test


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: runs real nbgrader commands or long experiments (deselect with -m 'not slow')")
