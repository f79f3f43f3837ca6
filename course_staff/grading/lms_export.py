"""Grades into the LMS: the CSV that Canvas's or Moodle's gradebook import takes, one column per lab.

    python -m course_staff.grading.lms_export roster.csv          # make grades ROSTER=roster.csv
    python -m course_staff.grading.lms_export roster.csv --key "Email address"

The roster is the CSV a TA downloads from the LMS, and it decides which file is written:

* Canvas (Grades > Export): columns Student, ID, SIS User ID, SIS Login ID, Section, then one
  column per assignment named "<name> (<canvas id>)", and a second row "Points Possible".
  Written: grades_canvas.csv with the same five columns, one column per lab (the roster's own
  column when its name is the lab's, "Lab 11 (12345)" for lab11, else a new "Lab 11" column,
  which Canvas's import offers to create), the Points Possible row, a row per roster student.
* Moodle (Grades > Export > Plain text file): a header row, an identity column per user field
  (Email address, ID number, Username, ...), one column per grade item. Written: grades_moodle.csv
  with the identity columns and one column per lab; on import, "Identify user by" maps the
  identity column and each lab column is mapped to its grade item.

Each roster row is matched to an nbgrader student id through one column (``--key``; by default
SIS Login ID for Canvas, Username, else ID number, else Email address for Moodle); an email also
matches by the part before the @. A lab's score is the gradebook's (a TA's manual score wherever
there is one, so the written answers once a TA graded them) minus the course's late penalty
(course_staff/grading/late_policy.py) recomputed on that score: nbgrader fixes the penalty at
autograde time, before a TA grades the written answers. A cell is left empty, and listed, when
the student did not submit the lab or a TA has not yet graded all of it (written answers, a
notebook held for review). Every roster student without a submission, every graded student not
in the roster and every unmatched or duplicate roster row is listed on stderr and in
lms_report.txt: nobody is dropped silently.
"""

import argparse
import csv
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook

from course_staff.grading.late_policy import LatePolicy

CANVAS_IDS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_POSSIBLE = "Points Possible"
MOODLE_IDENTITIES = ("Username", "ID number", "Email address")      # the user fields Moodle matches on
MOODLE_NAMES = ("First name", "Last name")
REPORT = "lms_report.txt"


# -- the roster ------------------------------------------------------------------------------------

@dataclass
class Roster:
    lms: str                    # "canvas" or "moodle"
    header: list                # the roster's columns, in order
    rows: list                  # one dict per student row (the Points Possible row and test students left out)
    key: str                    # the column that holds (or contains) the nbgrader student id


def lms_of(header):
    """"canvas" or "moodle" from a roster's header row; raises SystemExit for anything else."""
    if all(name in header for name in CANVAS_IDS[:3]):
        return "canvas"
    if any(name in header for name in MOODLE_IDENTITIES):
        return "moodle"
    raise SystemExit(f"the roster's columns {header} are neither Canvas's gradebook export (Student, ID, "
                     f"SIS User ID, ...) nor Moodle's (one of {', '.join(MOODLE_IDENTITIES)})")


def _is_student(row, lms):
    """False for Canvas's Points Possible row and its built-in "Student, Test" account."""
    if lms != "canvas":
        return True
    name = (row.get("Student") or "").strip()
    return bool(name) and name != POINTS_POSSIBLE and name != "Student, Test"


def read_roster(path, key=None):
    """The roster CSV at ``path`` (a byte-order mark, as spreadsheets write it, is fine)."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        header = [h.strip() for h in reader.fieldnames or []]
        reader.fieldnames = header
        lms = lms_of(header)
        rows = [row for row in reader if _is_student(row, lms)]
    if key is None:
        key = "SIS Login ID" if lms == "canvas" else next(k for k in MOODLE_IDENTITIES if k in header)
    if key not in header:
        raise SystemExit(f"the roster has no column {key!r} to match nbgrader's student ids with "
                         f"(its columns: {', '.join(header)})")
    return Roster(lms, header, rows, key)


def roster_id(value):
    """The nbgrader id a roster value stands for: itself, or an email's part before the @."""
    value = (value or "").strip()
    return value.split("@", 1)[0] if "@" in value else value


# -- the grades ------------------------------------------------------------------------------------

@dataclass
class LabGrade:
    score: float | None         # what goes into the LMS (None: the cell stays empty)
    max_score: float
    why_empty: str = ""         # "not submitted", "waiting for a TA: ..."
    penalty: float = 0.0


def lab_grades(gb, lab, policy):
    """{student: LabGrade} of everyone with a submission of ``lab`` in the gradebook ``gb``."""
    grades = {}
    for submission in gb.assignment_submissions(lab):
        waiting = sorted(g.name for nb in submission.notebooks for g in nb.grades
                         if g.needs_manual_grade and g.max_score > 0)
        score = float(submission.score)
        penalty = round(score * policy.fraction_lost(submission.total_seconds_late), 6)
        grade = LabGrade(round(score - penalty, 6), float(submission.max_score), penalty=penalty)
        if waiting:
            grade.score = None
            grade.why_empty = f"waiting for a TA's grade on {', '.join(waiting)} (in the formgrader)"
        grades[submission.student_id] = grade
    return grades


def title(lab):
    """The LMS column a lab goes under: "Lab 11" for lab11."""
    m = re.fullmatch(r"([A-Za-z]+)[ _-]*(\d+)", lab)
    return f"{m.group(1).capitalize()} {int(m.group(2))}" if m else lab


def _plain(name):
    """A column name without Canvas's "(12345)" or Moodle's "Assignment: ... (Real)", lower case,
    letters and digits only: "lab11"."""
    name = re.sub(r"\s*\([^()]*\)\s*$", "", re.sub(r"^[^:]*:\s*", "", name.strip()))
    return re.sub(r"[^a-z0-9]", "", name.lower())


def lab_column(lab, header):
    """The roster's column for ``lab`` ("Lab 11 (12345)", "lab11", "Lab 11"), else a new "Lab 11"."""
    for name in header:
        if _plain(name) in (_plain(lab), _plain(title(lab))):
            return name
    return title(lab)


def number(x):
    """A score as the LMS reads it: plain decimal, no thousands separator, no trailing zeros."""
    return f"{x:.6f}".rstrip("0").rstrip(".")


# -- the export ------------------------------------------------------------------------------------

@dataclass
class Export:
    path: Path
    columns: dict                                   # lab -> the LMS column it was written to
    problems: list = field(default_factory=list)    # one line per student who is not simply graded


def export(db_url, roster, out_dir, policy=None, labs=None):
    """Write the LMS's file for ``roster`` (a Roster) from the gradebook; returns an Export."""
    policy = policy or LatePolicy()
    with Gradebook(db_url) as gb:
        labs = labs or sorted(a.name for a in gb.assignments)
        grades = {lab: lab_grades(gb, lab, policy) for lab in labs}
        max_scores = {lab: float(gb.find_assignment(lab).max_score) for lab in labs}
    columns = {lab: lab_column(lab, roster.header) for lab in labs}
    problems = []

    by_id = {}
    for n, row in enumerate(roster.rows, start=2):
        sid = roster_id(row.get(roster.key))
        if not sid:
            problems.append(f"roster row {n} ({_who(row)}): no {roster.key}, so no grade can be matched to it")
        elif sid in by_id:
            problems.append(f"roster row {n} ({_who(row)}): {roster.key} {sid!r} is on an earlier row too; "
                            "only the first gets grades")
        else:
            by_id[sid] = row
    for lab in labs:
        for student in sorted(set(grades[lab]) - set(by_id)):
            problems.append(f"{lab}: {student} is graded but not in the roster (no row whose {roster.key} is "
                            f"{student!r}): enter the grade by hand or add the student to the LMS course")

    if roster.lms == "canvas":
        ids = list(CANVAS_IDS)
        points = {**{c: "" for c in ids}, "Student": POINTS_POSSIBLE}
        table = [points | {columns[lab]: number(max_scores[lab]) for lab in labs}]
    else:
        ids = [c for c in (*MOODLE_NAMES, *MOODLE_IDENTITIES) if c in roster.header]
        table = []
    for sid, row in by_id.items():
        line = {c: row.get(c, "") for c in ids}
        for lab in labs:
            grade = grades[lab].get(sid)
            if grade is None:
                problems.append(f"{lab}: {sid} ({_who(row)}) is in the roster but has no graded submission: "
                                "left empty")
                line[columns[lab]] = ""
            elif grade.score is None:
                problems.append(f"{lab}: {sid} ({_who(row)}): {grade.why_empty}: left empty")
                line[columns[lab]] = ""
            else:
                line[columns[lab]] = number(grade.score)
        table.append(line)

    path = Path(out_dir) / f"grades_{roster.lms}.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=ids + [columns[lab] for lab in labs])
        writer.writeheader()
        writer.writerows(table)
    return Export(path, columns, problems)


def _who(row):
    name = row.get("Student") or " ".join(filter(None, (row.get(c, "") for c in MOODLE_NAMES)))
    return name.strip() or "no name"


def write_report(result, out_dir, err=None):
    """The problems to ``out_dir``/lms_report.txt and to stderr; returns the report's path."""
    err = err or sys.stderr
    path = Path(out_dir) / REPORT
    lines = [f"{result.path.name}: " + ", ".join(f"{lab} -> column {col!r}" for lab, col in result.columns.items())]
    lines += [f"  {p}" for p in result.problems] or ["  every roster student has a grade and every graded "
                                                     "student is in the roster"]
    path.write_text("\n".join(lines) + "\n")
    if result.problems:
        print(f"{len(result.problems)} student(s) need a look before the import (also in {path}):", file=err)
        for p in result.problems:
            print(f"  {p}", file=err)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_staff.grading.lms_export",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("roster", help="the gradebook CSV exported from Canvas or Moodle")
    parser.add_argument("--key", help="the roster column holding the nbgrader student id")
    parser.add_argument("--out", default=".", help="folder for the files (default: here)")
    args = parser.parse_args(argv)
    from course_staff.course import config
    from course_staff.grading.class_grading import gradebook_url

    course = Path(os.getcwd())
    roster = read_roster(args.roster, args.key)
    result = export(gradebook_url(course), roster, args.out, policy=LatePolicy(config=config(course)))
    report = write_report(result, args.out)
    print(f"{result.path}: the {roster.lms.capitalize()} gradebook import, one row per roster student "
          f"({len(roster.rows)}), matched on {roster.key!r}; {len(result.problems)} problem(s) listed in {report}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
