"""The student edition, tested as a new student uses it (slow: a fresh venv, JupyterLab, kernels).

One test, in the order a student goes: build the edition (``make student-edition``'s code) into a
temporary folder and search it for secrets; then, inside it and with nothing of this repository on
PATH, run the README's first command (``make lab``: set-up in a fresh .venv, then JupyterLab, stopped
once it answers); run the start-here notebook; run each blank lab top to bottom as JupyterLab's Run
All would (the only tracebacks allowed are the unfinished tasks' checks); run the README's second
command (``make check``) on the blank labs, then on the labs with every solution cell filled from
source/ (course_staff/testbed/harness.py), where every visible check must pass.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from course_staff.edition import student_edition as edition
from course_staff.testbed.harness import solved_submission
from course_staff.edition.leaks import leaks
from course_utils import selfcheck
from course_staff.course import REPO as ROOT
from tests.make_lab import make_lab_until_it_answers

pytestmark = pytest.mark.slow

LABS = sorted(edition.labs())
SETUP_LIMIT_S = 900                 # a fresh venv with torch: about 1-2 minutes here, more on a busy machine

# In the edition's own Python, one process: where course_utils and torch come from, then each notebook
# named on the command line run the way JupyterLab's Run All does (a fresh kernel each); prints JSON,
# {"probe": [course_utils' file, torch's CUDA version, the specs of course_staff and nbgrader], path: run}.
RUN_ALL = """
import json, sys
import course_utils, torch, importlib.util as u
from course_utils import selfcheck
found = {"probe": [course_utils.__file__, str(torch.version.cuda),
                   f"{u.find_spec('course_staff')} {u.find_spec('nbgrader')}"]}
for path in sys.argv[1:]:
    nb, errors, fatal = selfcheck.run(path, grading=False)
    found[path] = {"fatal": fatal,
                   "errors": {i: [selfcheck.is_check(nb.cells[i]), e["ename"]] for i, e in errors.items()},
                   "checks": [i for i, c in enumerate(nb.cells) if selfcheck.is_check(c)],
                   "printed": "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                                      for o in c.outputs)}
print(json.dumps(found))
"""

def student_env():
    """The environment of a student's shell: nothing of this repository's venv on PATH."""
    ours = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "NBGRADER_EXECUTION", "CONDA_PREFIX")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != ours)
    # torch from pip's own configuration, unless TORCH_INDEX is given: a test machine may not reach
    # PyTorch's CPU index (the Makefile's default on Linux, checked without a download by
    # tests/test_edition.py); the CPU build is still asserted below (torch.version.cuda is None)
    env["TORCH_INDEX"] = os.environ.get("TORCH_INDEX", "")
    return env


def run(args, folder, env, timeout=600):
    return subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)


def test_a_new_student_sets_up_works_and_checks(tmp_path):
    t0 = time.monotonic()
    course = edition.build(tmp_path / "course")
    assert leaks(course) == []
    env = student_env()
    py = str(course / ".venv" / "bin" / "python")
    timings = {}

    # the README's first command, on a machine that has never seen the course
    make_lab_until_it_answers(course, env, SETUP_LIMIT_S)
    timings["make lab (set-up + JupyterLab)"] = time.monotonic() - t0
    start_here = "notebooks/00_start_here.ipynb"
    blank_labs = [f"{lab}/{lab}.ipynb" for lab in LABS]
    res = run([py, "-c", RUN_ALL, start_here, *blank_labs], course, env, timeout=300 + 600 * len(LABS))
    assert res.returncode == 0, res.stderr[-3000:]
    ran = json.loads(res.stdout.splitlines()[-1])
    where, cuda, absent = ran["probe"]
    assert Path(where).resolve().parent == (course / "course_utils").resolve()   # the edition's own package
    assert cuda == "None"                                                     # a CPU build of torch
    assert absent == "None None"                                              # no graders' code, no nbgrader

    # the start-here notebook: the set-up check passes in the fresh venv
    start = ran[start_here]
    assert start["errors"] == {} and not start["fatal"]
    assert "All set." in start["printed"] and "As expected." in start["printed"]

    # each blank lab, top to bottom: only the unfinished tasks' checks raise, and only NotImplementedError
    for path in blank_labs:
        out = ran[path]
        assert not out["fatal"], (path, out["fatal"])
        assert {int(i): e for i, e in out["errors"].items()} == {i: [True, "NotImplementedError"] for i in out["checks"]}
        assert "Traceback" not in out["printed"] and "Finish Task" in out["printed"]
    timings["start here + blank labs"] = time.monotonic() - t0 - sum(timings.values())

    # the README's second command: blank labs are unfinished, every task listed
    blank = run(["make", "check"], course, env)
    assert blank.returncode == 2, blank.stdout + blank.stderr
    checks = sum(1 for lab in LABS for c in nbformat.read(str(course / lab / f"{lab}.ipynb"), as_version=4).cells
                 if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution"))
    cells = [c for lab in LABS for c in nbformat.read(str(course / lab / f"{lab}.ipynb"), as_version=4).cells]
    answers = sum(1 for c in cells if selfcheck.is_answer(c))
    concepts = sum(1 for c in cells if selfcheck.is_concept_check(c))
    # every check and every written answer is unfinished (the concept checks' stubs raise too)
    assert blank.stdout.count("  unfinished  ") == checks + answers and "  failed  " not in blank.stdout

    # ... and on the labs with every solution cell filled from source/, every visible check passes
    for lab in LABS:
        nbformat.write(solved_submission(lab), str(course / lab / f"{lab}.ipynb"))
    solved = run(["make", "check"], course, env)
    assert solved.returncode == 0, solved.stdout + solved.stderr
    assert solved.stdout.count("  passed  ") == checks - concepts and "Every visible check passes" in solved.stdout
    assert solved.stdout.count("  answered  ") == concepts and solved.stdout.count("  written  ") == answers
    timings["make check twice"] = time.monotonic() - t0 - sum(timings.values())
    print("\nstudent edition timings (s):", {k: round(v) for k, v in timings.items()})
