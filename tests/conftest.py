"""pytest configuration of the course's tests."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))   # `import mutant`, `import students` from any test


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: starts nbgrader, a kernel, a venv or JupyterLab, or runs a long experiment "
        "(deselect with -m 'not slow')")
