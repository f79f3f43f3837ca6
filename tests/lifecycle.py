"""The whole nbgrader lifecycle of every lab, run ONCE per test session (course_staff/testbed/harness.py:
``once``, so that both xdist workers share it) for the tests that read its verdicts: tests/test_lifecycle.py
(every step and every score) and tests/test_validate_agrees.py (what `nbgrader validate` says about the
same notebooks).

generate_assignment -> release_assignment -> fetch and submit for simulated students (one with the real
command line, the others through nbgrader's exchange API) -> collect -> ONE `nbgrader autograde` of every
lab's submissions -> a TA grades written answers in the gradebook, as the formgrader does -> ONE
`nbgrader generate_feedback` -> export grades.csv. The command line's steps (release, the CLI student's
fetch and submit, collect, feedback, export) run several to a process (harness.nbgrader_batch, as nbgrader's
own tests run its command line); autograde runs as a process of its own.

    life = run()
    life.rosters["lab11"]["sol"]        -> (submission, expected {grade cell: points} or None)
    life.autograded["lab11"]["sol"]     -> harness.Grades right after autograde
    life.grades["lab11"]["sol"]         -> after the TA's grading
    life.course                         -> the course folder (submitted/, autograded/, feedback/, grades.csv)
"""

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_staff.course import COURSE_ID
from course_staff.testbed import harness as h
from course_staff.testbed import students as st
from course_staff.testbed.lab_tables import table

LABS = list(h.LABS)
CLI_STUDENT = "sol"          # fetches and submits with the real command line; the others via the API


# -- who submits ------------------------------------------------------------------------------------

def chatty(lab):
    """The task whose function writes to stderr in the "chatter" student (course_staff/testbed/students' PARTS)."""
    return st.PARTS[lab]["chatter"]


def _validate_extras(lab):
    """{student: builder} of the notebooks validate is asked about that the lifecycle's roster lacks."""
    row = lambda name: st.row(lab, name)                  # noqa: E731
    extras = {"chatter": lambda: st.stderr_chatter(lab, row(chatty(lab)))}    # stderr that looks like a warning
    if lab == "lab11":
        extras.update({
            "kl_partial": lambda: st.partial(lab, ("kl_estimators", "tilted_optimum", "concept_kl_limit"),
                                             answered=("answer_kl_signs",)),
            "numpywarn": lambda: st.numpy_warning(lab),   # numpy warns from inside a check: full marks
        })
    return extras


def validated(lab):
    """The students whose notebooks `nbgrader validate` also checks (tests/test_validate_agrees.py): the
    ones on which the two graders could part ways. Lab 11: the solution, the blank release, a partial one,
    warnings from numpy and from every function (full marks), stderr that looks like a warning, the checks
    rebound (held at 0); the other labs: the solution, the warnings, the stderr."""
    if lab == "lab11":
        return ("sol", "blank", "kl_partial", "numpywarn", "warnings", "chatter", "rebound")
    return ("sol", "warnings", "chatter")


def roster(lab):
    """{student: builder}: the lifecycle's students (course_staff/testbed/students) and validate's."""
    students = st.roster(lab)
    students.update({name: build for name, build in _validate_extras(lab).items() if name not in students})
    assert set(validated(lab)) <= set(students), sorted(set(validated(lab)) - set(students))
    return students


def ta_grading(lab):
    """{student: {answer cell: (score, comment)}}: what the TA gives in the formgrader."""
    written = table(lab).written_marks()
    return {
        "sol": {q: (p, f"Full marks ({q}): every point of the rubric is there.") for q, p in written.items()},
        "partial": {q: ((written[q] / 2, f"Half marks ({q}): the idea is right, the reason is missing.")
                        if q in st.PARTS[lab]["answered"] else (0.0, "No answer.")) for q in written},
        "blank": {q: (0.0, "No answer.") for q in written},
    }


def final_expected(lab, student, expected):
    """What ``student`` should have once the TA has graded: ``expected`` with the TA's scores."""
    if expected is None:
        return None
    return {**expected, **{q: score for q, (score, _) in ta_grading(lab).get(student, {}).items()}}


# -- the run ----------------------------------------------------------------------------------------

@dataclass
class Lifecycle:
    course: Path
    rosters: dict = field(default_factory=dict)     # lab -> {student: (submission, expected)}
    autograded: dict = field(default_factory=dict)  # lab -> harness.Grades right after autograde
    grades: dict = field(default_factory=dict)      # lab -> harness.Grades after the TA's grading
    logs: dict = field(default_factory=dict)        # step -> nbgrader output
    timings: dict = field(default_factory=dict)     # step -> seconds


class _Timer:
    def __init__(self, timings, name):
        self.timings, self.name = timings, name

    def __enter__(self):
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        self.timings[self.name] = round(time.perf_counter() - self.t0, 1)


def _fetch(exchange, home, lab):
    """The CLI student's `nbgrader fetch_assignment` of ``lab``, in their home."""
    return home, ["fetch_assignment", lab, f"--course={COURSE_ID}", f"--Exchange.root={exchange}"]


def _submit(exchange, home, lab):
    """The CLI student's `nbgrader submit` of ``lab``."""
    return home, ["submit", lab, f"--course={COURSE_ID}", f"--Exchange.root={exchange}", f"--student={CLI_STUDENT}"]


def _logged(run, names, results):
    """Keep each command's output under its step name; NbgraderError for the first that exited non-zero."""
    for name, (code, out) in zip(names, results, strict=True):
        run.logs[name] = out
        if code != 0:
            raise h.NbgraderError(f"`{name}` exited {code}:\n{out}")


def build(tmp):
    """Every step of the lifecycle in ``tmp``; returns the Lifecycle. The nbgrader commands of a step run
    in one process (harness.nbgrader_batch: nbgrader's command line, started once), autograde on its own."""
    assert LABS, "no lab in source/"
    timings = {}
    with _Timer(timings, "course copy + generate_assignment"):
        course = h.course_copy(tmp, labs=LABS)
    run = Lifecycle(course=course, timings=timings)

    exchange = course / "exchange"
    exchange.mkdir(mode=0o777)
    with _Timer(timings, "release_assignment, fetch, submit, collect"):
        _logged(run, [f"release {lab}" for lab in LABS],
                h.nbgrader_batch([(course, ["release_assignment", lab]) for lab in LABS]))
        cli = []
        for lab in LABS:
            run.rosters[lab] = {name: make() for name, make in roster(lab).items()}
            for student, (submission, _) in run.rosters[lab].items():
                home = tmp / "homes" / student
                if student == CLI_STUDENT:      # fetched, then written, then submitted: below
                    home.mkdir(parents=True, exist_ok=True)
                    cli.append((home, lab, submission))
                else:
                    h.exchange_submit(course, exchange, home, student, lab, submission)
        _logged(run, [f"fetch {lab}" for _, lab, _ in cli],
                h.nbgrader_batch([_fetch(exchange, home, lab) for home, lab, _ in cli]))
        for home, lab, submission in cli:
            h._write(home / lab / f"{lab}.ipynb", submission)
        _logged(run, [f"submit {lab}" for _, lab, _ in cli] + [f"collect {lab}" for lab in LABS],
                h.nbgrader_batch([_submit(exchange, home, lab) for home, lab, _ in cli]
                                 + [(course, ["collect", lab]) for lab in LABS]))
    with _Timer(timings, f"autograde ({sum(map(len, run.rosters.values()))} submissions of {len(LABS)} labs)"):
        run.autograded = h.grade_labs(course, {lab: list(run.rosters[lab]) for lab in LABS})
    with _Timer(timings, "written answers graded by a TA"):
        for lab in LABS:
            for student, marks in ta_grading(lab).items():
                for grade_id, (score, comment) in marks.items():
                    h.manual_grade(course, lab, student, grade_id, score, comment)
            run.grades[lab] = h.read_grades(course, lab, list(run.rosters[lab]), run.autograded[lab].log)
    with _Timer(timings, "generate_feedback, export"):
        (_, run.logs["feedback"]), export = h.nbgrader_batch(
            [(course, ["generate_feedback", "*"]), (course, ["export", "--to", "grades.csv"])])
        _logged(run, ["export"], [export])
    return run


def report(run):
    """The timings and every student's expected and final total, as text."""
    lines = [f"lifecycle timings (s): {json.dumps(run.timings, indent=1)}"]
    for lab in LABS:
        lines.append(f"{lab}: student, expected, got (of {sum(st.full_marks(lab).values()):g})")
        for student, (_, expected) in run.rosters[lab].items():
            expected = final_expected(lab, student, expected)
            got = run.grades[lab][student]
            lines.append(f"  {student:10s} {'ungradable' if expected is None else f'{h.total(expected):g}':>10s} "
                         f"{'ungradable' if student in run.grades[lab].ungradable else f'{h.total(got):g}':>10s}"
                         f"{'  held for review' if student in run.grades[lab].flagged else ''}")
    return "\n".join(lines)


def run():
    """The lifecycle of this test session (built by the first process that asks, shared by all)."""
    return h.once("lifecycle", build)
