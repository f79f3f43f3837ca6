"""Grades per task: one CSV per lab with a column per graded cell, so a TA sees where a class struggled.

    python -m course_staff.grading.task_grades          # make grades (after grades.csv): grades_by_task_<lab>.csv

Each row is a student who submitted the lab; each graded cell's column (check cells and written
answers, in notebook order) holds the score the gradebook counts: a TA's manual score where there
is one, else the automatic one, empty for a written answer no TA has graded yet. Then the raw
score, the late penalty, the score and the maximum. Printed: each cell's class mean against its points.
"""

import csv
import os
import sys
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from course_staff.grading.manual_scores import counted_score


def check_cells(gb, lab, course):
    """[(notebook, grade_id, points)] of the lab's graded cells, in the source notebook's order."""
    cells = []
    for notebook in gb.find_assignment(lab).notebooks:
        points = {c.name: float(c.max_score) for c in notebook.grade_cells if c.max_score > 0}
        path = Path(course) / "source" / lab / f"{notebook.name}.ipynb"
        order = [c.metadata.get("nbgrader", {}).get("grade_id") for c in
                 nbformat.read(str(path), as_version=4).cells] if path.exists() else []
        rank = {gid: i for i, gid in enumerate(order)}
        cells += [(notebook.name, gid, points[gid]) for gid in sorted(points, key=lambda g: (rank.get(g, len(rank)), g))]
    return cells


def rows(gb, lab, cells):
    """One dict per student who submitted ``lab``, sorted by student id."""
    table = []
    for submission in sorted(gb.assignment_submissions(lab), key=lambda s: s.student_id):
        scores = {(nb.name, g.name): counted_score(g) for nb in submission.notebooks for g in nb.grades}
        row = {"student_id": submission.student_id}
        for notebook, gid, _ in cells:
            score = scores.get((notebook, gid))
            row[gid] = "" if score is None else f"{score:g}"
        row.update(raw_score=f"{submission.score:g}", late_submission_penalty=f"{submission.late_submission_penalty:g}",
                   score=f"{submission.score - submission.late_submission_penalty:g}",
                   max_score=f"{submission.max_score:g}")
        table.append(row)
    return table


def write(db_url, course, out_dir):
    """Write grades_by_task_<lab>.csv for every lab in the gradebook; returns {lab: path}."""
    written = {}
    with Gradebook(db_url) as gb:
        for lab in sorted(a.name for a in gb.assignments):
            cells = check_cells(gb, lab, course)
            table = rows(gb, lab, cells)
            path = Path(out_dir) / f"grades_by_task_{lab}.csv"
            fields = ["student_id"] + [gid for _, gid, _ in cells] + \
                     ["raw_score", "late_submission_penalty", "score", "max_score"]
            with path.open("w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=fields)
                writer.writeheader()
                writer.writerows(table)
            written[lab] = path
            print(f"{path.name}: {len(table)} students")
            for _, gid, points in cells:
                got = [float(r[gid]) for r in table if r[gid] != ""]
                mean = sum(got) / len(got) if got else float("nan")
                print(f"  {gid:<36} class mean {mean:5.2f} of {points:g}")
    return written


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    from course_staff.grading.class_grading import gradebook_url
    course = Path(os.getcwd())
    write(gradebook_url(course), course, Path(argv[0]) if argv else course)
    return 0


if __name__ == "__main__":
    sys.exit(main())
