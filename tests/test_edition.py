"""Fast checks of the split between students and graders: what the student package and notebooks
import, what the student edition holds, and that the search for secrets finds them.

The edition as a new student uses it (fresh venv, notebooks, selfcheck) is tests/test_student_edition.py.
"""

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest

from course_staff.course import LABS
from course_staff.edition import student_edition as edition
from course_staff.edition.leaks import files_of, leaks, secret_lines
from course_staff.course import REPO as ROOT

# what students get: the release notebooks and the notebooks the edition ships (staff notebooks stay out)
STUDENT_NOTEBOOKS = sorted([*ROOT.glob("release/*/*.ipynb"),
                            *(ROOT / src for src in edition.FILES.values() if src.endswith(".ipynb"))])


# ----------------------------------------------------------------------------- the grader apart
def imported_modules(code):
    """Every module an ``import`` or ``from ... import`` of ``code`` names, and every string
    constant that looks like a dotted module path (``importlib.import_module("x.y")``)."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and " " not in node.value:
            names.add(node.value)
    return names


def notebook_code(path):
    """The code cells of a notebook, IPython-only lines (%magic, !shell) left out."""
    nb = nbformat.read(str(path), as_version=4)
    return "\n".join(ln for c in nb.cells if c.cell_type == "code"
                     for ln in c.source.splitlines() if not ln.lstrip().startswith(("%", "!")))


def staff_imports(code):
    return sorted(n for n in imported_modules(code) if n == "course_staff" or n.startswith("course_staff."))


@pytest.mark.parametrize("path", sorted((ROOT / "course_utils").rglob("*.py")), ids=lambda p: p.name)
def test_no_student_module_imports_course_staff(path):
    assert staff_imports(path.read_text()) == [], f"{path.relative_to(ROOT)} imports the graders' package"


@pytest.mark.parametrize("path", STUDENT_NOTEBOOKS, ids=lambda p: p.name)
def test_no_student_notebook_imports_course_staff(path):
    assert staff_imports(notebook_code(path)) == [], f"{path.relative_to(ROOT)} imports the graders' package"


def test_every_companion_notebook_is_shipped_or_marked_staff():
    """A notebook of notebooks/ either goes to students (edition.FILES) or says it is the staff's
    (metadata course.audience = "staff", e.g. beyond_ppo.ipynb, which runs the reference solutions)."""
    shipped = {ROOT / src for src in edition.FILES.values() if src.endswith(".ipynb")}
    for path in sorted(ROOT.glob("notebooks/*.ipynb")):
        staff = nbformat.read(str(path), as_version=4).metadata.get("course", {}).get("audience") == "staff"
        assert (path in shipped) != staff, (
            f"{path.relative_to(ROOT)} is {'shipped to students and marked staff' if staff else 'neither shipped nor marked staff'}: "
            "list it in course_staff.edition.FILES, or mark it staff-only in its metadata")


def test_the_import_check_sees_every_form_of_import():
    for code in ("import course_staff", "from course_staff.grading.class_grading import main", "import course_staff.edition.leaks as x",
                 "import importlib\nimportlib.import_module('course_staff.solutions')"):
        assert staff_imports(code), code
    assert staff_imports("from course_utils.checks import needs\n# course_staff is the graders'") == []


def test_nbgrader_config_uses_the_graders_package():
    assert "course_staff.grading.nbgrader_plugins" in imported_modules((ROOT / "nbgrader_config.py").read_text())


# ----------------------------------------------------------------------------- the student edition
@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return edition.build(tmp_path_factory.mktemp("edition") / "course")


def expected_files():
    """Every file the edition should hold, from edition.FILES, the labs and edition.WRITTEN."""
    files = {Path(name) / p for name, folder in edition.labs().items() for p in files_of(folder)}
    for dst, src in edition.FILES.items():
        src = ROOT / src
        files |= {Path(dst) / p for p in files_of(src)} if src.is_dir() else {Path(dst)}
    return {f for f in files | set(map(Path, edition.WRITTEN))
            if not {"__pycache__", ".ipynb_checkpoints"} & set(f.parts) and f.suffix != ".pyc"}


def test_edition_holds_exactly_its_file_list(built):
    assert set(files_of(built)) == expected_files()
    for lab in LABS:
        assert (built / lab / f"{lab}.ipynb").read_bytes() == (ROOT / "release" / lab / f"{lab}.ipynb").read_bytes()
    assert [p.name for p in (built / "notebooks").iterdir()] == ["00_start_here.ipynb"]
    for absent in ("source", "tests", "benchmarks", "docs", "course_staff", "nbgrader_config.py", "release"):
        assert not (built / absent).exists(), absent


def test_edition_leaks_nothing(built):
    assert leaks(built) == []


def test_edition_installs_course_utils_with_the_repository_pins_and_nothing_else(built):
    ours = tomllib.loads((ROOT / "pyproject.toml").read_text())
    theirs = tomllib.loads((built / "pyproject.toml").read_text())
    packages = theirs["tool"]["setuptools"]["packages"]
    assert packages == [p for p in ours["tool"]["setuptools"]["packages"] if p.split(".")[0] == "course_utils"]
    assert "course_utils" in packages and "course_staff" not in packages
    assert "optional-dependencies" not in theirs["project"]                  # no dev or test extras
    deps = theirs["project"]["dependencies"]
    assert set(deps) <= set(ours["project"]["dependencies"]) and deps
    assert not [d for d in deps if d.startswith(edition.STAFF_ONLY)]
    assert {"nbclient", "nbformat", "torch", "jupyterlab"} <= {d.split("==")[0] for d in deps}
    env = (built / "environment.yml").read_text()
    assert [ln.split("- ")[1] for ln in env.splitlines() if "==" in ln] == deps
    assert "course_staff" not in (built / "Makefile").read_text() + (built / "README.md").read_text()


def test_edition_readme_gives_two_commands(built):
    readme = (built / "README.md").read_text()
    block = readme.split("## Two commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [ln.split("#")[0].strip() for ln in block.strip().splitlines()]
    assert commands == ["make lab", "make check"]
    makefile = (built / "Makefile").read_text()
    assert "\nlab: " in makefile and "\ncheck: " in makefile and "course_utils.selfcheck" in makefile
    for words in ("Assignments", "Fetch", "Submit", ".ipynb", "Restart Kernel and Run All Cells"):
        assert words in readme, words


def test_edition_readme_names_each_lab_it_holds(built):
    """Its title, its list of labs and its folder tree are the labs of the edition (README lines marked
    for one lab stay only when the class assigns it: tests/test_class_labs.py leaves Lab 13 out)."""
    readme = (built / "README.md").read_text()
    assert "<!--" not in readme and "{lab" not in readme
    assert readme.startswith(f"# RL for language models — {edition.lab_titles(list(edition.labs()))}\n")
    for lab in edition.labs():
        assert f"`{lab}/{lab}.ipynb`" in readme and f"- **Lab {lab.removeprefix('lab')} — " in readme, lab


def test_git_edition_is_one_clean_commit(tmp_path):
    dest = edition.build(tmp_path / "course", git=True)
    log = subprocess.run(["git", "log", "--oneline"], cwd=dest, capture_output=True, text=True, check=True)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=dest, capture_output=True, text=True, check=True)
    assert len(log.stdout.splitlines()) == 1 and status.stdout == ""
    tracked = subprocess.run(["git", "ls-files"], cwd=dest, capture_output=True, text=True, check=True)
    assert {Path(p) for p in tracked.stdout.splitlines()} == expected_files()


def test_build_refuses_a_folder_in_use(tmp_path):
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit, match="not empty"):
        edition.build(tmp_path / "used")
    with pytest.raises(SystemExit, match="inside this repository"):
        edition.build(ROOT / "edition")
    assert (tmp_path / "used" / "notes.txt").read_text() == "mine" and not (ROOT / "edition").exists()


def test_build_refuses_an_edition_that_would_leak(tmp_path, monkeypatch):
    monkeypatch.setitem(edition.FILES, "labs_source", "source")          # a slip in the file list
    with pytest.raises(SystemExit, match="would leak") as err:
        edition.build(tmp_path / "course")
    assert "source/lab11/lab11.ipynb" in str(err.value)
    assert not (tmp_path / "course").exists() and list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- the search for secrets
def test_every_solution_and_hidden_test_has_secret_lines():
    where = set(secret_lines().values())
    for lab in LABS:
        nb = nbformat.read(str(ROOT / "source" / lab / f"{lab}.ipynb"), as_version=4)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if meta.get("solution") or "BEGIN HIDDEN TESTS" in cell.source:
                assert f"{lab} {meta['grade_id']}" in where, f"{lab} {meta['grade_id']}: no secret line found"


def _copy_of(built, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    return copy


def test_the_search_finds_the_source_notebooks(built, tmp_path):
    copy = _copy_of(built, tmp_path)
    shutil.copytree(ROOT / "source", copy / "source")
    found = leaks(copy)
    assert any(f.startswith("lab11 kl_estimators_solution: ") and "source/lab11/lab11.ipynb" in f for f in found)
    assert any(f.startswith("lab12 test_gae_per_token: ") and "source/lab12/lab12.ipynb" in f for f in found)
    assert all("source/" in f for f in found)


def test_the_search_finds_one_pasted_hidden_test_line(built, tmp_path):
    copy = _copy_of(built, tmp_path)
    line = next(ln for ln, w in secret_lines().items() if w == "lab12 test_gae_per_token")
    nb = nbformat.read(str(copy / "lab12" / "lab12.ipynb"), as_version=4)
    nb.cells[-1].source += "\n        " + line + "   # pasted"
    nbformat.write(nb, str(copy / "lab12" / "lab12.ipynb"))
    assert leaks(copy) == [f"lab12 test_gae_per_token: `{line}` in lab12/lab12.ipynb"]


def test_the_search_finds_the_graders_code(built, tmp_path):
    copy = _copy_of(built, tmp_path)
    (copy / "course_utils" / "extra.py").write_text("from course_staff.grading.class_grading import main\n")
    shutil.copy(ROOT / "course_staff" / "grading" / "nbgrader_plugins.py", copy / "course_utils" / "plugins.py")
    (copy / "course_utils" / "late_policy.py").write_text("PENALTY = 0.1\n")   # a staff module's name
    shutil.copy(ROOT / "nbgrader_config.py", copy / "nbgrader_config.py")
    found = leaks(copy)
    assert "graders' code: course_utils/extra.py imports course_staff" in found
    assert any(f.startswith("course_staff/grading/nbgrader_plugins.py: `class ") and f.endswith("course_utils/plugins.py")
               for f in found)
    assert "graders' code: nbgrader_config.py is named 'nbgrader_config'" in found
    assert "graders' code: course_utils/late_policy.py is named 'late_policy'" in found
    assert not any("is named 'views'" in f for f in found), "the student package's own views/ is no staff name"


# ----------------------------------------------------------------------------- the edition's set-up
OLD_VERSION = "3.10.13"


def old_python(folder):
    """A stand-in for a Python 3.10 interpreter: this Python, reporting itself as 3.10.13 to ``--version``
    and in ``sys.version_info`` to ``-c CODE`` (all the Makefiles ask of it), so their refusal is tested on
    every machine, with or without a real 3.10."""
    exe = folder / "python3.10"
    exe.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && {{ echo 'Python {OLD_VERSION}'; exit 0; }}\n"
                   f"[ \"$1\" = -c ] || exit 2\n"
                   f"exec {sys.executable} -c 'import sys; sys.version_info = (3, 10, 13, \"final\", 0); "
                   f"exec(sys.argv[1])' \"$2\"\n")
    exe.chmod(0o755)
    return exe


def make_dry_run(folder, *args):
    """What ``make setup`` in the edition would run (``make -n``: nothing is downloaded)."""
    return subprocess.run(["make", "-n", "setup", *args], cwd=folder, capture_output=True, text=True,
                          check=True).stdout


def torch_install_line(folder, *args):
    return next(ln for ln in make_dry_run(folder, *args).splitlines() if "pip install" in ln and "torch==" in ln)


def test_edition_installs_the_pinned_cpu_torch_on_linux(built):
    pin = next(d for d in edition.student_requirements() if d.startswith("torch=="))
    line = torch_install_line(built)
    if subprocess.run(["uname", "-s"], capture_output=True, text=True).stdout.strip() == "Linux":
        assert f"--index-url {edition.TORCH_CPU_INDEX} {pin}" in line
    assert "--quiet" not in line                          # the student sees what it downloads
    env = (built / "environment.yml").read_text()
    assert f"--extra-index-url {edition.TORCH_CPU_INDEX}" in env       # conda's way: the same CPU build


def test_edition_torch_index_can_be_overridden(built):
    assert "--index-url https://example.org/cu130 torch==" in torch_install_line(built, "TORCH_INDEX=https://example.org/cu130")
    plain = torch_install_line(built, "TORCH_INDEX=")
    assert "--index-url" not in plain and "torch==" in plain          # pip's own configuration


def test_readmes_and_pyprojects_state_the_python_the_makefiles_check(built):
    ours = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    theirs = tomllib.loads((built / "pyproject.toml").read_text())["project"]["requires-python"]
    assert ours == theirs == ">=3.11"
    for readme in (ROOT / "README.md", built / "README.md"):
        assert "Python 3.11 or newer" in readme.read_text() and "3.10" not in readme.read_text()
    for makefile in (ROOT / "Makefile", built / "Makefile"):
        assert "sys.version_info < (3, 11)" in makefile.read_text()


@pytest.mark.parametrize("where", ["repository", "edition"])
def test_an_old_python_is_refused_with_what_to_install(where, built, tmp_path):
    folder = tmp_path / where
    folder.mkdir()
    src = ROOT if where == "repository" else built
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(src / name, folder / name)
    done = subprocess.run(["make", "setup", f"PYTHON={old_python(tmp_path)}"], cwd=folder, capture_output=True,
                          text=True)
    assert done.returncode != 0 and not (folder / ".venv").exists()
    assert "needs Python 3.11 or newer" in done.stdout and f"is Python {OLD_VERSION}" in done.stdout
    assert "PYTHON=python3.12" in done.stdout
