"""A TA's week without traps: each trap a new TA met following docs/ta_guide.md, and its fix.

One small course (SQLite, Lab 11) goes through a week: the lab is recorded without touching
release/, a due date is set, five students submit (an honest blank, a late full solution, an edited
test cell, a student who will resubmit, a notebook under another name), `make autograde`'s command
grades them; a TA gives a manual score; the student resubmits; the regrade says the manual score
hides the new one; the one command from the guide clears it; grades.csv and the per-task CSV come
out. Unit-level checks (no kernel) cover the checksum alarms and the configuration.
"""

import copy
import csv
import logging
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from course_staff.testbed import harness as h
from course_staff import course
from course_staff.grading.class_grading import graded
from course_staff.grading.late_policy import LatePolicy
from course_staff.grading.manual_scores import SHADOWED
from course_staff.grading.nbgrader_plugins import TAMPER_ALARM, RestoreReadOnlyCells, check_config
from course_staff.testbed import classroom
from course_staff.testbed import students as st
from course_staff.testbed.lab_tables import table

LAB = "lab11"
DUE = datetime(2026, 1, 15, 23, 59, tzinfo=timezone.utc)
GUIDE = (h.REPO / "docs" / "ta_guide.md").read_text()


def command(course, module, *args):
    """`python -m course_staff.grading.<module> ...` in ``course``; returns (exit code, output)."""
    proc = subprocess.run([sys.executable, "-m", f"course_staff.grading.{module}", *map(str, args)], cwd=course,
                          env=h._env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc.returncode, proc.stdout


def submit(course, student, notebook, when, name=f"{LAB}.ipynb"):
    folder = course / "submitted" / student / LAB
    for old in folder.glob("*.ipynb"):
        old.unlink()
    h._write(folder / name, notebook)
    (folder / "timestamp.txt").write_text(when.strftime("%Y-%m-%d %H:%M:%S.%f UTC"))


def scores(course, student):
    return classroom.gradebook_scores(h.db_url(course), [student])[student]


@pytest.fixture(scope="module")
def week(tmp_path_factory):
    course = h.course_copy(tmp_path_factory.mktemp("week"), labs=())
    release = {p: p.read_bytes() for p in (course / "release").rglob("*") if p.is_file()}
    run = {"record": command(course, "class_grading", "record", LAB),
           "record again": command(course, "class_grading", "record", LAB)}
    run["release untouched"] = release == {p: p.read_bytes() for p in (course / "release").rglob("*") if p.is_file()}
    h.nbgrader(course, "db", "assignment", "add", LAB, f"--duedate={DUE:%Y-%m-%d %H:%M:%S} UTC")

    edited = st.rows(LAB)[2]
    run["edited"] = edited
    submit(course, "honest", st.blank(LAB)[0], DUE - timedelta(hours=1))
    submit(course, "late", st.solution(LAB)[0], DUE + timedelta(days=2, hours=12))     # 3 started days
    submit(course, "edits", st.edited_test(LAB, edited)[0], DUE - timedelta(hours=2))
    submit(course, "resub", st.blank(LAB)[0], DUE - timedelta(days=1))
    submit(course, "gina", st.solution(LAB)[0], DUE - timedelta(hours=3), name=f"{LAB} (gina).ipynb")
    run["round 1"] = command(course, "class_grading", "autograde", LAB)

    # a TA gives resub 1 point on one check by hand, and grades a written answer; then resub
    # submits the full solution
    from nbgrader.api import Gradebook
    run["manual cell"] = cell = st.rows(LAB)[0].checks[0][0]
    run["written answer"] = answer = table(LAB).questions[0].name
    with Gradebook(h.db_url(course)) as gb:
        gb.find_grade(cell, LAB, LAB, "resub").manual_score = 1.0
        gb.find_grade(answer, LAB, LAB, "resub").manual_score = 0.5
        gb.db.commit()
    submit(course, "resub", st.solution(LAB)[0], DUE - timedelta(hours=4))
    run["round 2"] = command(course, "class_grading", "autograde", LAB)
    run["tasks"] = command(course, "task_grades")
    h.nbgrader(course, "export", "--to", "grades.csv")
    run["resub before clearing"] = scores(course, "resub")
    run["clear"] = command(course, "manual_scores", "clear", LAB, "resub")
    run["resub after clearing"] = scores(course, "resub")
    for step in ("round 1", "round 2"):
        print(f"--- {step}\n{run[step][1]}")
    return course, run


# -- record the labs once, never touch release/ from a grading target ------------------------------

@pytest.mark.slow
def test_record_leaves_release_alone_and_happens_once(week):
    course, run = week
    assert run["record"][0] == 0 and "recorded in the gradebook" in run["record"][1], run["record"]
    assert "already in the gradebook" in run["record again"][1]
    assert run["release untouched"]
    assert "was not in the gradebook" not in run["round 1"][1]         # autograde did not record again


def test_grading_targets_never_regenerate(tmp_path):
    """With NBGRADER_DB_URL set there is no gradebook.db for make to find: no grading target may
    then fall back on generate_assignment (which rewrites release/ and the shared gradebook)."""
    plan = subprocess.run(["make", "-n", "-C", str(h.REPO), "autograde", "feedback", "grades", "clear-manual",
                           "LAB=lab11", "STUDENT=x", "NBGRADER_DB_URL=postgresql://nbgrader@db/course"],
                          capture_output=True, text=True)
    assert plan.returncode == 0, plan.stderr
    assert "course_staff.grading.class_grading autograde lab11" in plan.stdout
    assert "generate_assignment" not in plan.stdout and "release" not in plan.stdout, plan.stdout


# -- honest submissions raise no alarm; tampering stands out ---------------------------------------

def _overwrite_log(preprocessor_class, course, notebook, student):
    """The log of nbgrader's OverwriteCells (or the course's subclass) on one notebook."""
    records = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())
    pp = preprocessor_class()
    pp.log.addHandler(handler)
    try:
        pp.preprocess(copy.deepcopy(notebook), {"nbgrader": {"notebook": LAB, "assignment": LAB,
                                                              "student": student, "db_url": h.db_url(course)}})
    finally:
        pp.log.removeHandler(handler)
    return records


@pytest.mark.slow
def test_nbgrader_alone_alarms_on_every_honest_submission(week):
    """The trap itself: nbgrader's OverwriteCells warns for every test cell of a blank release."""
    from nbgrader.preprocessors import OverwriteCells

    course, _ = week
    alarms = [m for m in _overwrite_log(OverwriteCells, course, st.blank(LAB)[0], "honest") if "has changed" in m]
    assert len(alarms) >= 5, alarms


@pytest.mark.slow
def test_honest_cells_are_restored_quietly_and_edits_loudly(week):
    course, run = week
    assert _overwrite_log(RestoreReadOnlyCells, course, st.blank(LAB)[0], "honest") == []
    assert _overwrite_log(RestoreReadOnlyCells, course, st.solution(LAB)[0], "sol") == []
    edited = run["edited"]
    log = _overwrite_log(RestoreReadOnlyCells, course, st.edited_test(LAB, edited)[0], "edits")
    assert log and all(m.startswith(f"{TAMPER_ALARM} edits / {LAB}") for m in log), log
    checks = {gid for gid, _ in edited.checks}
    assert {gid for gid in checks if any(gid in m for m in log)} == checks


@pytest.mark.slow
def test_the_autograde_log_names_only_the_tamperer(week):
    _, run = week
    out = run["round 1"][1]
    assert "has changed!" not in out
    alarms = [line for line in out.splitlines() if TAMPER_ALARM in line]
    assert alarms and all(f"{TAMPER_ALARM} edits / " in line for line in alarms), alarms


# -- a notebook under another name -----------------------------------------------------------------

@pytest.mark.slow
def test_a_misnamed_notebook_names_student_file_and_fix(week):
    course, run = week
    code, out = run["round 1"]
    assert code == 1
    line = next(ln for ln in out.splitlines() if ln.startswith("NOT GRADED gina"))
    assert f"'{LAB} (gina).ipynb' instead of '{LAB}.ipynb'" in line and "mv '" in line, line
    assert "No notebooks found" not in out
    assert {s for s in ("honest", "late", "edits", "resub") if graded(course, LAB, s)} == \
        {"honest", "late", "edits", "resub"}, out           # everyone else is graded


# -- a resubmission after a manual score -----------------------------------------------------------

@pytest.mark.slow
def test_the_regrade_says_which_manual_score_hides_the_new_one(week):
    _, run = week
    out, cell = run["round 2"][1], run["manual cell"]
    assert "3 already graded, 1 to grade" in out, out                     # only the resubmission
    full = st.full_marks(LAB)[cell]
    line = next(ln for ln in out.splitlines() if SHADOWED in ln)
    assert f"resub / {LAB} / {cell}: the manual score 1 stays in force; the new automatic score " \
           f"is {full:g}" in line, line
    assert f"make clear-manual LAB={LAB} STUDENT=resub" in line
    assert sum(SHADOWED in ln for ln in out.splitlines()) == 1         # one line: one cell, one student


@pytest.mark.slow
def test_the_guide_command_clears_it(week):
    _, run = week
    cell = run["manual cell"]
    assert "make clear-manual LAB=lab11 STUDENT=" in GUIDE
    assert run["resub before clearing"][cell] == 1.0
    assert run["clear"][0] == 0 and f"{cell}: manual score 1 dropped" in run["clear"][1], run["clear"]
    answer = run["written answer"]
    assert f"{answer}:" not in run["clear"][1]
    assert run["resub after clearing"] == {**st.solution(LAB)[1], answer: 0.5}   # the TA's written-answer score stays


# -- late policy ---------------------------------------------------------------------------------

def test_the_late_policy_in_steps():
    policy = LatePolicy()                       # the course's defaults: what nbgrader_config.py uses
    minute, day = 60, 24 * 3600
    assert [policy.fraction_lost(s) for s in (0, 15 * minute, 16 * minute, day + 15 * minute,
                                               day + 16 * minute, 9 * day, 20 * day)] == \
        pytest.approx([0, 0, 0.1, 0.1, 0.2, 0.9, 1.0])
    config = course.config(h.REPO)
    assert config.AssignLatePenalties.plugin_class is LatePolicy
    assert "LatePolicy" not in config, "nbgrader_config.py restates the policy: its numbers live in late_policy.py"


@pytest.mark.slow
def test_the_course_configures_the_late_policy(week):
    course, run = week
    config = check_config(course / "nbgrader_config.py")
    assert config.AssignLatePenalties.plugin_class is LatePolicy
    assert "per started day" in GUIDE and "LatePolicy" in GUIDE
    rows = {r["student_id"]: r for r in csv.DictReader((course / "grades.csv").open())}
    raw = h.total(st.solution(LAB)[1])           # what the autograder gave (written answers wait for a TA)
    assert float(rows["late"]["raw_score"]) == pytest.approx(raw), rows["late"]
    assert float(rows["late"]["late_submission_penalty"]) == pytest.approx(0.3 * raw), rows["late"]
    assert float(rows["late"]["score"]) == pytest.approx(0.7 * raw)
    assert float(rows["honest"]["late_submission_penalty"]) == 0
    assert "late is 60.0 h late: loses 30 % of the score" in run["round 1"][1]


# -- outdated configuration names ------------------------------------------------------------------

@pytest.mark.slow   # loads the config into every nbgrader application, in a new interpreter too
def test_outdated_config_names_stop_the_ta_targets(tmp_path):
    good = h.REPO / "nbgrader_config.py"
    check_config(good)                                        # the course's own config: no outdated name
    assert "CollectApp" not in good.read_text().replace("(formerly CollectApp", "")
    bad = tmp_path / "nbgrader_config.py"
    bad.write_text(good.read_text().replace("    c.ExchangeCollect.check_owner = False",
                                            "    c.CollectApp.check_owner = False"))
    assert "CollectApp.check_owner" in bad.read_text()
    proc = subprocess.run([sys.executable, "-m", "course_staff.grading.nbgrader_plugins", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode != 0
    assert "Use ExchangeCollect in config, not CollectApp" in proc.stderr, proc.stderr


# -- grades per task ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_per_task_csv_counts_manual_scores(week):
    course, run = week
    assert run["tasks"][0] == 0, run["tasks"]
    rows = {r["student_id"]: r for r in csv.DictReader((course / f"grades_by_task_{LAB}.csv").open())}
    checks = classroom.graded_cells()                               # in notebook order
    assert list(next(iter(rows.values())))[1:len(checks) + 1] == checks
    as_csv = lambda score: "" if score is None else f"{score:g}"    # noqa: E731 (None: waits for a TA)
    cell, answer = run["manual cell"], run["written answer"]
    assert rows["resub"][cell] == "1"                                     # the TA's score, not the new one
    assert rows["resub"][answer] == "0.5"                                 # a written answer a TA graded
    assert {g: rows["resub"][g] for g in checks if g not in (cell, answer)} == \
        {g: as_csv(s) for g, s in st.solution(LAB)[1].items() if g not in (cell, answer)}
    assert {g: rows["honest"][g] for g in checks} == {g: as_csv(s) for g, s in st.blank(LAB)[1].items()}
    assert float(rows["late"]["late_submission_penalty"]) > 0
