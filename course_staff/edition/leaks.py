"""What students must never get, and a search for it in a folder (the student edition, say).

    found = leaks("/tmp/edition")     # [] or ["lab11 kl_estimators_solution: `k3 = ...` in course_utils/x.py", ...]

Three kinds of secret:

* a line of an instructor's solution: between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` of
  ``source/<lab>/<lab>.ipynb``, or any line of a solution cell without those markers (nbgrader hides
  the whole cell then);
* a line of a hidden test: between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS``;
* the graders' code: a file or folder named after ``course_staff``, one of its subpackages or modules
  (less the names the student package uses itself, such as ``views``) or ``nbgrader_config``, an
  import of ``course_staff``, or a ``def``/``class`` line of its modules.

Lines are compared without indentation, trailing comments or repeated spaces. A line counts when it
has at least ``MIN_CHARS`` characters of code, is not an import, and no lab shows it to students
anyway (inside a line of its given code, its text or a visible check): shorter lines such as
``return pairs`` or ``if temperature == 0:`` are common Python that turns up anywhere. Text inside
notebooks (cells, outputs, metadata) is searched as the strings nbformat holds, so JSON escaping
hides nothing.
"""

import json
import re
from pathlib import Path

import nbformat

from course_staff.course import REPO, is_solution
MIN_CHARS = 21
_MARKER = re.compile(r"^\s*(?:#+\s*)?(BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$")
_COMMENT = re.compile(r"\s+#[^'\"]*$")               # a trailing comment (no quote in it)
_IMPORT = re.compile(r"^(?:from \S+ )?import ")      # names a module, reveals no answer
_STAFF_IMPORT = re.compile(r"^\s*(?:from|import)\s+course_staff\b", re.M)
_SKIPPED = {".git"}


def normalize(line):
    """A line as compared: no indentation, no trailing comment, single spaces."""
    line = line.strip()
    if not line.startswith("#"):
        line = _COMMENT.sub("", line)
    return " ".join(line.split())


def split_cell(cell):
    """{"SOLUTION": [...], "HIDDEN TESTS": [...], "shown": [...]}: the lines of one source cell."""
    parts = {"SOLUTION": [], "HIDDEN TESTS": [], "shown": []}
    lines = cell.source.splitlines()
    if is_solution(cell) and not any(_MARKER.match(ln) for ln in lines):
        parts["SOLUTION"] = lines                       # nbgrader replaces the whole cell
        return parts
    inside = "shown"
    for line in lines:
        marker = _MARKER.match(line)
        if marker:
            inside = marker.group(2) if marker.group(1) == "BEGIN" else "shown"
        else:
            parts[inside].append(line)
    return parts


def _source_lines(root=REPO):
    """(every line the labs show students, as one text; {hidden line: "lab11 kl_estimators_solution"})."""
    shown, hidden = [], {}
    for path in sorted(Path(root).glob("source/*/*.ipynb")):
        for cell in nbformat.read(str(path), as_version=4).cells:
            parts = split_cell(cell)
            shown += [normalize(ln) for ln in parts["shown"]]
            where = f"{path.stem} {cell.metadata.get('nbgrader', {}).get('grade_id', 'cell')}"
            for line in parts["SOLUTION"] + parts["HIDDEN TESTS"]:
                hidden.setdefault(normalize(line), where)
    return "\n".join(shown), hidden


def secret_lines(root=REPO):
    """{normalized line: "lab11 kl_estimators_solution"} of every solution and hidden-test line."""
    shown, hidden = _source_lines(root)
    return {ln: w for ln, w in hidden.items()
            if len(ln) >= MIN_CHARS and not _IMPORT.match(ln) and ln not in shown}


def staff_modules(root=REPO):
    """Every module file of course_staff, its subpackages' included."""
    return sorted(p for p in (Path(root) / "course_staff").rglob("*.py") if "__pycache__" not in p.parts)


def staff_names(root=REPO):
    """Names no file or folder of a student's copy may have: course_staff, its subpackages and
    modules, the config -- less the names of the student package's own files and folders."""
    root = Path(root)
    staff = {part for p in staff_modules(root)
             for part in p.relative_to(root / "course_staff").with_suffix("").parts} - {"__init__"}
    student = {part for p in (root / "course_utils").rglob("*")
               for part in p.relative_to(root / "course_utils").with_suffix("").parts}
    return {"course_staff", "nbgrader_config"} | (staff - student)


def staff_definitions(root=REPO):
    """{normalized def/class line: module} of the graders' code, less the lines a lab shows students
    anyway (a task's signature, which the lab fixes; its given code)."""
    shown, _ = _source_lines(root)
    shown = set(shown.splitlines())
    found = {}
    for path in staff_modules(root):
        for line in path.read_text().splitlines():
            line = normalize(line)
            if line.startswith(("def ", "class ")) and len(line) >= MIN_CHARS and line not in shown:
                found.setdefault(line, path.relative_to(Path(root)).as_posix())
    return found


def _strings(value):
    """Every string inside a parsed JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def text_of(path):
    """A file's text, one normalized line per line ("" for a binary file)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return ""
    if path.suffix == ".ipynb":
        try:
            raw = "\n".join(_strings(json.loads(raw)))
        except json.JSONDecodeError:
            pass
    return "\n".join(normalize(line) for line in raw.splitlines())


def files_of(folder):
    """Every file under ``folder`` (relative paths), .git left out."""
    folder = Path(folder)
    return sorted(p.relative_to(folder) for p in folder.rglob("*")
                  if p.is_file() and not _SKIPPED & set(p.relative_to(folder).parts))


def leaks(folder, root=REPO):
    """One line per secret found in ``folder``: which secret, and in which file. [] when clean."""
    folder = Path(folder)
    secrets, definitions, names = secret_lines(root), staff_definitions(root), staff_names(root)
    found = []
    for rel in files_of(folder):
        named = [part for part in (*rel.parent.parts, rel.stem) if part in names]
        if named:
            found.append(f"graders' code: {rel} is named {named[0]!r}")
        text = text_of(folder / rel)
        if _STAFF_IMPORT.search(text):
            found.append(f"graders' code: {rel} imports course_staff")
        for line, where in {**secrets, **definitions}.items():
            if line in text:
                found.append(f"{where}: `{line}` in {rel}")
    return found


__all__ = ["leaks", "secret_lines", "staff_names", "staff_definitions", "split_cell", "normalize",
           "files_of", "MIN_CHARS"]

if __name__ == "__main__":       # python -m course_staff.edition.leaks FOLDER
    import sys

    report = leaks(sys.argv[1])
    print("\n".join(report) or f"{sys.argv[1]}: no solution line, hidden test or graders' code found")
    sys.exit(1 if report else 0)
