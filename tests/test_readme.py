"""The README's Architecture section names every module of course_utils and course_staff, once each."""

import re
from collections import Counter

from course_staff.course import REPO as ROOT

PACKAGES = ("course_utils", "course_staff")
MODULE = re.compile(r"^\|\s*`((?:%s)/[\w/]+\.py)`\s*\|" % "|".join(PACKAGES))


def section(text, title):
    """The lines of a markdown section (from its heading to the next heading of the same level)."""
    body = text.split(f"\n## {title}\n", 1)[1]
    return body.split("\n## ", 1)[0].splitlines()


def readme_modules(text):
    """Counter of the module paths in the first column of the Architecture table."""
    return Counter(m.group(1) for line in section(text, "Architecture") if (m := MODULE.match(line)))


def package_modules(root=ROOT):
    """Every module file of the two packages (``__init__.py`` is the package, not a module)."""
    return {p.relative_to(root).as_posix() for pkg in PACKAGES for p in (root / pkg).rglob("*.py")
            if p.name != "__init__.py" and "__pycache__" not in p.parts}


def test_architecture_section_matches_the_modules():
    listed = readme_modules((ROOT / "README.md").read_text())
    files = package_modules()
    assert not set(files) - set(listed), f"modules missing from the README's Architecture: {sorted(set(files) - set(listed))}"
    assert not set(listed) - files, f"the README's Architecture names modules that do not exist: {sorted(set(listed) - files)}"
    assert [m for m, n in listed.items() if n > 1] == [], "a module is listed twice"


def test_the_comparison_sees_a_missing_and_an_extra_module():
    text = (ROOT / "README.md").read_text()
    row = next(line for line in section(text, "Architecture") if line.startswith("| `course_utils/checks.py`"))
    without = readme_modules(text.replace(row + "\n", ""))
    extra = readme_modules(text.replace(row, row + "\n| `course_staff/ghost.py` | nothing |"))
    assert "course_utils/checks.py" in package_modules() and "course_utils/checks.py" not in without
    assert "course_staff/ghost.py" in extra and "course_staff/ghost.py" not in package_modules()
