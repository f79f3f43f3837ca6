"""An honest suite: a test skips only where the machine lacks a program it needs, through
tests/requirements.py (whose COURSE_REQUIRE_* flags, set by CI, turn the skip into a failure)."""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SKIPPING = re.compile(r"pytest\.skip\(|pytest\.mark\.skip|importorskip|pytest\.xfail|mark\.xfail")


def skipping_lines(root=TESTS):
    """["file:line: text"] of every way to skip a test outside tests/requirements.py."""
    return [f"{p.relative_to(root)}:{i}: {line.strip()}" for p in sorted(root.rglob("*.py"))
            if p.name not in ("requirements.py", "test_skips.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if SKIPPING.search(line)]


def test_every_skip_goes_through_the_require_flags():
    found = skipping_lines()
    assert not found, ("a test skips outside tests/requirements.py (no flag can make it fail on CI):\n  "
                       + "\n  ".join(found))


def test_the_check_finds_a_skip(tmp_path):
    (tmp_path / "test_x.py").write_text("import pytest\n\n@pytest.mark.skipif(True, reason='no')\ndef test_x():\n"
                                        "    pytest.skip('not today')\n")
    assert len(skipping_lines(tmp_path)) == 2
