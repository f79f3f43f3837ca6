"""Set-up: pins agree, the package imports on its own, nbgrader's config loads (and fails loudly if broken)."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from course_staff.course import REPO as ROOT

BIN = Path(sys.executable).parent


def pyproject_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return sorted(project["dependencies"] + project["optional-dependencies"]["dev"])


def test_environment_yml_has_the_same_pins_as_pyproject():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps and "pip" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    assert "-e ." in pip, "environment.yml must install course_utils editable (-e .)"
    assert sorted(p for p in pip if p != "-e .") == pyproject_pins()


def test_every_pin_is_exact():
    assert all("==" in p for p in pyproject_pins())


def test_makefile_installs_the_pinned_torch():
    torch_pin = next(p for p in pyproject_pins() if p.startswith("torch=="))
    assert f"pip install --quiet {torch_pin}" in (ROOT / "Makefile").read_text()


def test_course_utils_imports_in_a_fresh_interpreter(tmp_path):
    res = subprocess.run([sys.executable, "-c", "import course_utils.tinylm, course_utils.prefs, "
                          "course_utils.twotoken, course_utils.checks; print(course_utils.tinylm.__file__)"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""                                  # not even a warning
    assert Path(res.stdout.strip()).resolve().parent == ROOT / "course_utils"   # the editable install


def run_nbgrader(folder):
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("NBGRADER_DB_URL", None)
    return subprocess.run([str(BIN / "nbgrader"), "db", "student", "list"], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow   # starts nbgrader
def test_nbgrader_config_loads_cleanly(tmp_path):
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    res = run_nbgrader(tmp_path)
    output = res.stdout + res.stderr
    assert res.returncode == 0, output
    assert "Exception while loading config file" not in output
    assert "is broken" not in output
    assert (tmp_path / "gradebook.db").exists()             # the course root follows the config's folder


@pytest.mark.slow   # starts nbgrader
def test_broken_nbgrader_config_fails_loudly(tmp_path):
    text = (ROOT / "nbgrader_config.py").read_text()
    anchor = "    c = get_config()"
    assert anchor in text
    broken = text.replace(anchor, "    c.Execute.timeout = sixty_seconds  # a typo\n" + anchor, 1)
    (tmp_path / "nbgrader_config.py").write_text(broken)
    res = run_nbgrader(tmp_path)
    assert res.returncode != 0
    assert "sixty_seconds" in res.stderr and "nbgrader_config.py is broken" in res.stderr
    assert not (tmp_path / "gradebook.db").exists()          # nothing ran with a partial configuration


@pytest.mark.slow   # starts nbgrader
def test_config_with_a_syntax_error_stops_the_ta_targets(tmp_path):
    """A syntax error escapes the config's own try (nbgrader logs it and goes on): the Makefile's
    TA targets first run course_staff.grading.nbgrader_plugins, which must fail on it."""
    text = (ROOT / "nbgrader_config.py").read_text()
    (tmp_path / "nbgrader_config.py").write_text(text.replace("c = get_config()", "c = get_config(", 1))
    res = subprocess.run([sys.executable, "-m", "course_staff.grading.nbgrader_plugins", "nbgrader_config.py"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "SyntaxError" in res.stderr, res.stderr[-2000:]
    ok = subprocess.run([sys.executable, "-m", "course_staff.grading.nbgrader_plugins", str(ROOT / "nbgrader_config.py")],
                        capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "loads cleanly" in ok.stdout, ok.stderr[-2000:]


# ----------------------------------------------------------------------------- the start-here notebook
START_HERE = ROOT / "notebooks" / "00_start_here.ipynb"


def test_start_here_is_saved_without_outputs():
    import nbformat

    nb = nbformat.read(START_HERE, as_version=4)
    assert "widgets" not in nb.metadata
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


def _environment_cell_says(monkeypatch, capsys, version_info, version):
    """What start-here's environment cell prints in this process with sys.version_info faked."""
    import nbformat

    source = next(c.source for c in nbformat.read(START_HERE, as_version=4).cells
                  if c.cell_type == "code" and "Requires-Python" in c.source)
    monkeypatch.setattr(sys, "version_info", version_info)
    monkeypatch.setattr(sys, "version", version)
    exec(compile(source, "00_start_here environment cell", "exec"), {})   # noqa: S102
    monkeypatch.undo()
    return capsys.readouterr().out


def test_start_here_says_when_python_is_too_old(monkeypatch, capsys):
    """A kernel older than Requires-Python (e.g. another interpreter picked in VS Code) is named with what to
    do, and start-here does not say "All set." (control: this interpreter, which the course accepts, is)."""
    from importlib.metadata import metadata

    least = metadata("course-utils")["Requires-Python"].removeprefix(">=")        # "3.11"
    old = _environment_cell_says(monkeypatch, capsys, (3, 9, 18, "final", 0), "3.9.18 (main) [GCC 12.2.0]")
    assert "All set." not in old, old
    assert f"python      3.9.18       too old: the course needs {least} or newer" in old, old
    assert f"This kernel runs Python 3.9.18; the course needs {least} or newer" in old, old
    now = _environment_cell_says(monkeypatch, capsys, sys.version_info, sys.version)
    assert now.rstrip().endswith("All set.") and "too old" not in now, now


@pytest.mark.slow   # starts a kernel
def test_start_here_runs(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    from course_utils.kernel_client import SteadyKernelManager

    nb = nbformat.read(START_HERE, as_version=4)
    NotebookClient(nb, timeout=60, kernel_name="python3", kernel_manager_class=SteadyKernelManager,
                   resources={"metadata": {"path": str(START_HERE.parent)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "All set." in text and "As expected." in text
    assert not any(o.output_type == "error" for c in nb.cells if c.cell_type == "code" for o in c.outputs)


# ----------------------------------------------------------------------------- make lab
@pytest.mark.slow   # starts JupyterLab
def test_make_lab_starts_jupyterlab():
    """The README's first command: `make lab` serves JupyterLab (stopped again once it answers)."""
    from tests.make_lab import make_lab_until_it_answers

    make_lab_until_it_answers(ROOT, dict(os.environ), limit_s=90)
