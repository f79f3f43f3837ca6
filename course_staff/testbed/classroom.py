"""A class of simulated students for the class-grading tests and `make bench-class`.

The lifecycle test's Lab 11 students -- honest, partial and adversarial, the notebook that is not
JSON included -- except the infinite loop (a 30 s timeout per call would be all the test measured),
each repeated under new names until the class has ``size`` students:

    kinds = distinct()                     # {"sol": (notebook, expected {grade_id: points}), ...}
    roster = class_of(40, kinds)           # {"sol-01": "sol", "blank-01": "blank", ...}: student -> kind
    ship(exchange, course, roster, kinds)  # every student fetches lab11 and submits their notebook

Grading is per student, so a copy of a notebook must get the same grade as the original: the
class test grades each kind once, serially, on SQLite, and compares every student of the class
with the grade of its kind.
"""

import itertools

from course_staff.testbed import harness as h
from course_staff.testbed import students

LAB = "lab11"
LEFT_OUT = {"loop"}          # infinite loop: one 30 s timeout per call


def distinct(lab=LAB):
    """{kind: (submission, expected)} of the lifecycle roster of ``lab``, minus LEFT_OUT."""
    return {kind: build() for kind, build in students.roster(lab).items() if kind not in LEFT_OUT}


def class_of(size, kinds):
    """{student: kind}: the kinds in turn (sol-01, blank-01, ..., sol-02, ...) up to ``size``."""
    names = {}
    for i, kind in zip(range(size), itertools.cycle(sorted(kinds))):
        names[f"{kind}-{i // len(kinds) + 1:02d}"] = kind
    return names


def ship(exchange, homes, roster, kinds, lab=LAB):
    """Every student of ``roster`` fetches ``lab`` from ``exchange`` and submits their kind's
    notebook, through nbgrader's exchange API (homes/<student> is their home)."""
    for student, kind in roster.items():
        h.exchange_submit(None, exchange, homes / student, student, lab, kinds[kind][0])


def gradebook_scores(url, students, lab=LAB):
    """{student: {grade_id: score}} of every graded cell, for the students with a submission in
    the gradebook at ``url`` (the score nbgrader counts: a manual one where a TA gave it; None for
    a written answer no TA has graded)."""
    from nbgrader.api import Gradebook, MissingEntry

    scores = {}
    with Gradebook(url) as gb:
        for student in students:
            try:
                nb = gb.find_submission_notebook(lab, lab, student)
            except MissingEntry:
                continue
            scores[student] = {g.name: h._score(g) for g in nb.grades if g.max_score > 0}
    return scores


def graded_cells(lab=LAB):
    """The grade_ids of the lab's graded cells (checks and written answers), in notebook order."""
    return [h._grading(c)["grade_id"] for c in h._read("source", lab).cells
            if h._grading(c).get("grade") and float(h._grading(c).get("points", 0)) > 0]
