"""`make grades` writes what Canvas's and Moodle's gradebook imports take (course_staff/grading/lms_export.py).

A graded class is built cheaply with nbgrader's own Gradebook API in an SQLite file: two labs, a
check cell and a written answer each, a due date. Each file is then read back as its LMS documents
it: Canvas's gradebook CSV (Student, ID, SIS User ID, SIS Login ID, Section, then one column per
assignment named "<name> (<id>)", and a Points Possible row before the students), Moodle's grade
import (a header row, a user-identity column, one column per grade item, numbers only).
"""

import csv
import os
import shutil
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from course_staff.grading import lms_export
from course_staff.grading.late_policy import LatePolicy

DUE = datetime(2026, 1, 15, 23, 59)
LABS = {"lab11": {"test_kl": 6.0, "answer_kl": 2.0}, "lab12": {"test_gae": 5.0, "answer_ppo": 3.0}}
WRITTEN = {"answer_kl", "answer_ppo"}

# student -> lab -> (days late, {cell: auto score}, {written answer: manual score or None})
CLASS = {
    "ada": {"lab11": (0, {"test_kl": 6.0}, {"answer_kl": 2.0}), "lab12": (0, {"test_gae": 5.0}, {"answer_ppo": 1.5})},
    "bo": {"lab11": (2.5, {"test_kl": 6.0}, {"answer_kl": 2.0})},          # late: 3 started days, 30 % lost
    "cy": {"lab11": (0, {"test_kl": 3.0}, {"answer_kl": None}),            # written answer not graded yet
           "lab12": (0, {"test_gae": 0.0}, {"answer_ppo": 3.0})},
    "eve": {"lab11": (0, {"test_kl": 6.0}, {"answer_kl": 1.0})},           # graded, not in the roster
}
# in the roster, no submission at all: "fay"


def build_gradebook(path):
    from nbgrader.api import Gradebook

    url = f"sqlite:///{path}"
    with Gradebook(url) as gb:
        for lab, cells in LABS.items():
            gb.add_assignment(lab, duedate=DUE)
            gb.add_notebook(lab, lab)
            for cell, points in cells.items():
                gb.add_grade_cell(cell, lab, lab, max_score=points,
                                  cell_type="markdown" if cell in WRITTEN else "code")
        for student, labs in CLASS.items():
            gb.add_student(student)
            for lab, (days, auto, manual) in labs.items():
                gb.add_submission(lab, student, timestamp=DUE + timedelta(days=days) - timedelta(hours=1))
                for cell, score in auto.items():
                    grade = gb.find_grade(cell, lab, lab, student)
                    grade.auto_score, grade.needs_manual_grade = score, False
                for cell, score in manual.items():              # as the formgrader leaves them
                    grade = gb.find_grade(cell, lab, lab, student)
                    grade.manual_score, grade.needs_manual_grade = score, score is None
        gb.db.commit()
    return url


CANVAS_ROSTER = [
    ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 11 (12345)", "Quiz 1 (12399)",
     "Current Score", "Final Score"],
    ["    Points Possible", "", "", "", "", "8.00", "5.00", "(read only)", "(read only)"],
    ["Lovelace, Ada", "101", "S001", "ada", "RL 2026", "", "4.00", "", ""],
    ["Bo, Bo", "102", "S002", "bo", "RL 2026", "", "5.00", "", ""],
    ["Cy, Cy", "103", "S003", "cy", "RL 2026", "", "3.00", "", ""],
    ["Fay, Fay", "104", "S004", "fay", "RL 2026", "", "", "", ""],
    ["Student, Test", "999", "", "", "RL 2026", "", "", "", ""],
]
MOODLE_ROSTER = [
    ["First name", "Last name", "ID number", "Institution", "Department", "Email address",
     "Assignment: Lab 12 (Real)", "Last downloaded from this course"],
    ["Ada", "Lovelace", "S001", "", "", "ada@uni.example", "", "1767225600"],
    ["Bo", "Bo", "S002", "", "", "bo@uni.example", "", "1767225600"],
    ["Cy", "Cy", "S003", "", "", "cy@uni.example", "", "1767225600"],
    ["Fay", "Fay", "S004", "", "", "fay@uni.example", "", "1767225600"],
]


def write_csv(path, rows, bom=False):
    with open(path, "w", newline="", encoding="utf-8-sig" if bom else "utf-8") as f:
        csv.writer(f).writerows(rows)
    return path


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One gradebook for the module (nbgrader creates it by running alembic, from the venv's bin/)."""
    path = tmp_path_factory.mktemp("lms") / "gradebook.db"
    saved = os.environ["PATH"]
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{saved}"
    try:
        build_gradebook(path)
    finally:
        os.environ["PATH"] = saved
    return path


@pytest.fixture
def gradebook(built, tmp_path):
    """A copy of it per test."""
    shutil.copy(built, tmp_path / "gradebook.db")
    return f"sqlite:///{tmp_path / 'gradebook.db'}"


def read_back(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_canvas_file_reads_back_as_canvas_documents_it(tmp_path, gradebook):
    roster = lms_export.read_roster(write_csv(tmp_path / "canvas.csv", CANVAS_ROSTER, bom=True))
    assert (roster.lms, roster.key) == ("canvas", "SIS Login ID")
    result = lms_export.export(gradebook, roster, tmp_path)
    assert result.path.name == "grades_canvas.csv"
    header, points, *rows = read_back(result.path)
    # the five identity columns first, then one column per lab: the roster's own for Lab 11 (its
    # Canvas id kept, so the import updates that assignment), a new "Lab 12" column
    assert header == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Lab 11 (12345)", "Lab 12"]
    assert points[0].strip() == "Points Possible" and points[5:] == ["8", "8"]
    by_login = {r[3]: dict(zip(header, r)) for r in rows}
    assert [r[0] for r in rows] == ["Lovelace, Ada", "Bo, Bo", "Cy, Cy", "Fay, Fay"]    # roster order, no test student
    assert by_login["ada"]["ID"] == "101" and by_login["ada"]["SIS User ID"] == "S001"
    for row in rows:                             # every grade cell is a number or empty
        for col in header[5:]:
            assert row[header.index(col)] == "" or float(row[header.index(col)]) >= 0
    assert by_login["ada"]["Lab 11 (12345)"] == "8"
    assert by_login["ada"]["Lab 12"] == "6.5"                       # the TA's 1.5 on the written answer
    assert by_login["bo"]["Lab 11 (12345)"] == "5.6"                # 8 - 30 %: 2.5 days late
    assert by_login["cy"]["Lab 11 (12345)"] == ""                   # written answer waiting for a TA
    assert by_login["cy"]["Lab 12"] == "3"                          # its written answer graded: 0 + 3
    assert by_login["fay"]["Lab 11 (12345)"] == by_login["fay"]["Lab 12"] == ""
    problems = "\n".join(result.problems)
    assert "lab11: eve is graded but not in the roster" in problems
    assert "lab11: fay (Fay, Fay) is in the roster but has no graded submission" in problems
    assert "lab12: bo (Bo, Bo) is in the roster but has no graded submission" in problems
    assert "lab11: cy (Cy, Cy): waiting for a TA's grade on answer_kl" in problems
    assert len(result.problems) == 5                                # ... and nothing else
    report = lms_export.write_report(result, tmp_path, err=open(tmp_path / "stderr.txt", "w"))
    assert all(p in report.read_text() for p in result.problems)


def test_moodle_file_reads_back_as_moodle_documents_it(tmp_path, gradebook):
    roster = lms_export.read_roster(write_csv(tmp_path / "moodle.csv", MOODLE_ROSTER), key="Email address")
    assert roster.lms == "moodle"
    result = lms_export.export(gradebook, roster, tmp_path)
    assert result.path.name == "grades_moodle.csv"
    header, *rows = read_back(result.path)
    assert header == ["First name", "Last name", "ID number", "Email address", "Lab 11",
                      "Assignment: Lab 12 (Real)"]
    assert len(rows) == 4                                           # users only: no Points Possible row
    by_email = {r[3]: dict(zip(header, r)) for r in rows}
    assert by_email["ada@uni.example"]["Lab 11"] == "8"
    assert by_email["ada@uni.example"]["Assignment: Lab 12 (Real)"] == "6.5"
    assert by_email["bo@uni.example"]["Lab 11"] == "5.6"
    assert by_email["cy@uni.example"]["Lab 11"] == "" and by_email["fay@uni.example"]["Lab 11"] == ""
    assert any(p.startswith("lab11: eve is graded but not in the roster") for p in result.problems)
    assert any(p.startswith("lab11: fay (Fay Fay) is in the roster") for p in result.problems)


def test_late_penalty_is_the_course_policy_on_the_final_score(tmp_path, gradebook):
    """nbgrader fixes the penalty when it autogrades; a written answer graded later must lose its share too."""
    policy = LatePolicy(percent_per_day=50.0)
    roster = lms_export.read_roster(write_csv(tmp_path / "canvas.csv", CANVAS_ROSTER))
    result = lms_export.export(gradebook, roster, tmp_path, policy=policy)
    header, _, *rows = read_back(result.path)
    bo = next(dict(zip(header, r)) for r in rows if r[3] == "bo")
    assert bo["Lab 11 (12345)"] == "0"                              # 3 started days x 50 %: all of it


def test_roster_problems_are_named(tmp_path, gradebook):
    rows = CANVAS_ROSTER + [["Lovelace, Ada (again)", "105", "S005", "ada", "RL 2026", "", "", "", ""],
                            ["Nobody, No", "106", "", "", "RL 2026", "", "", "", ""]]
    roster = lms_export.read_roster(write_csv(tmp_path / "canvas.csv", rows))
    problems = lms_export.export(gradebook, roster, tmp_path).problems
    assert any("'ada' is on an earlier row too" in p for p in problems)
    assert any("(Nobody, No): no SIS Login ID" in p for p in problems)
    with pytest.raises(SystemExit, match="no column 'Login'"):
        lms_export.read_roster(tmp_path / "canvas.csv", key="Login")
    with pytest.raises(SystemExit, match="neither Canvas"):
        lms_export.read_roster(write_csv(tmp_path / "other.csv", [["name", "score"], ["a", "1"]]))


def test_command_writes_the_file_and_the_report(tmp_path, gradebook, monkeypatch, capsys):
    from course_staff.grading import class_grading

    monkeypatch.setattr(class_grading, "gradebook_url", lambda course: gradebook)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")
    write_csv(tmp_path / "roster.csv", CANVAS_ROSTER)
    assert lms_export.main(["roster.csv"]) == 0
    out = capsys.readouterr()
    assert "grades_canvas.csv: the Canvas gradebook import, one row per roster student (4)" in out.out
    assert "5 student(s) need a look before the import" in out.err and "eve is graded" in out.err
    assert (tmp_path / "lms_report.txt").read_text().count("\n  ") == 5
