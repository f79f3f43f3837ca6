"""A class that leaves Lab 13 out (labs.txt, docs/ta_guide.md "Leaving a lab out"): the make targets
record and export grades without it, the student edition and the hub's course folder (what students
are released) hold none of it, release/ keeps it (slow: nbgrader records the class's labs).

The class folder is laid out as a clone of the course (its own Makefile, nbgrader_config.py,
source/ and release/; the packages and .venv of this checkout linked in), and every step is the make
target a TA types in it. The control: the same folder without labs.txt assigns every lab.
"""

import csv
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from course_staff import course
from course_staff.edition import student_edition as edition
from course_staff.edition.leaks import files_of
from course_staff.testbed import harness as h

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:Object of type:Warning")]   # nbgrader add_submission's SQLAlchemy chatter

LEFT_OUT = "lab13"                  # the optional lab
KEPT = [lab for lab in h.LABS if lab != LEFT_OUT]
STUDENT = "ada"


def make(folder, *args):
    """``make -s *args`` in ``folder`` as a TA runs it there; returns its output (fails on a non-zero exit)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NBGRADER_", "PYTHON", "VIRTUAL_ENV"))}
    # -o: the linked .venv is never set up again from here (that would point its editable install at this folder)
    done = subprocess.run(["make", "-s", "-o", ".venv/.installed", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, f"make {' '.join(args)}:\n{done.stdout}{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """A course folder as a class's clone has it, without labs.txt yet."""
    folder = tmp_path_factory.mktemp("class") / "course"
    folder.mkdir()
    for name in ("Makefile", "nbgrader_config.py", "pyproject.toml"):
        shutil.copy2(h.REPO / name, folder / name)
    for name in ("source", "release"):
        shutil.copytree(h.REPO / name, folder / name, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    for name in (".venv", "course_staff", "course_utils", "notebooks"):       # read, never written
        (folder / name).symlink_to(course.REPO / name)
    return folder


def test_a_class_without_lab13_releases_grades_and_exports_without_it(clone, tmp_path):
    assert LEFT_OUT in h.LABS, f"source/ holds no {LEFT_OUT}: nothing to leave out"
    assert make(clone, "labs").split() == list(h.LABS)              # the control: no labs.txt, every lab
    (clone / course.CLASS_LABS).write_text("# this term's class\n" + "\n".join(KEPT) + "\n")
    assert make(clone, "labs").split() == KEPT

    # release/ stays every lab's, in step with source/ (the make target's dry run: release/ is the instructor's)
    release = make(clone, "-n", "release")
    assert f"for lab in {' '.join(h.LABS)}; do" in release, release

    # the term's gradebook, a student's submission in it (as autograde leaves one), the grades and the LMS file
    make(clone, "record")
    with Gradebook(h.db_url(clone)) as gb:
        assert sorted(a.name for a in gb.assignments) == KEPT
        gb.add_student(STUDENT)
        gb.add_submission(KEPT[0], STUDENT)
    roster = clone / "roster.csv"
    with roster.open("w", newline="") as f:
        csv.writer(f).writerows([["Student", "ID", "SIS User ID", "SIS Login ID", "Section"],
                                 ["    Points Possible", "", "", "", ""],
                                 ["Lovelace, Ada", "101", "S001", STUDENT, "RL"]])
    make(clone, "grades", f"ROSTER={roster}")
    rows = list(csv.DictReader((clone / "grades.csv").open()))
    assert {r["assignment"] for r in rows} == set(KEPT), rows
    assert sorted(p.name for p in clone.glob("grades_by_task_*.csv")) == [f"grades_by_task_{lab}.csv" for lab in KEPT]
    header = next(csv.reader((clone / "grades_canvas.csv").open()))
    number = LEFT_OUT.removeprefix("lab")
    assert not [c for c in header if number in c] and all(f"Lab {lab.removeprefix('lab')}" in header for lab in KEPT), header

    # the student edition: no folder of the left-out lab, a README that does not name it
    built = edition.build(tmp_path / "edition", root=clone)
    assert sorted({p.parts[0] for p in files_of(built) if p.parts[0].startswith("lab")}) == KEPT
    readme = (built / "README.md").read_text()
    assert f"Lab {number}" not in readme and LEFT_OUT not in readme and "<!--" not in readme
    assert readme.startswith(f"# RL for language models — {edition.lab_titles(KEPT)}\n")

    # the hub's course folder: source/ and release/ without it
    from course_staff.hub import __main__ as hub
    for folder in ("source", "release"):
        assert hub._ignored(clone / folder, [*h.LABS, "x.ipynb"], root=clone) == {LEFT_OUT}


def test_labs_txt_naming_a_lab_source_does_not_hold_stops_make(clone, tmp_path):
    folder = tmp_path / "typo"
    shutil.copytree(clone, folder, symlinks=True)
    (folder / course.CLASS_LABS).write_text("lab11\nlab31\n")
    done = subprocess.run(["make", "-s", "-o", ".venv/.installed", "labs"], cwd=folder, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode != 0 and "lists lab31" in done.stderr and "no labs to work on" in done.stderr, done
