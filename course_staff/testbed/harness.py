"""Grade notebooks with the real nbgrader, on a temporary copy of the course.

    course = course_copy(tmp_path)                       # nbgrader_config.py, source/, release/
    subs = {"alice": solved_submission("lab11"),
            "bob": solved_submission("lab11", edits={"kl_solution": [("p * ", "q * ")]}),
            "carol": blank_submission("lab11"),
            "dave": "{ not json"}                       # a str is written as is
    grades = autograde(course, "lab11", subs)           # ONE `nbgrader autograde lab11` for all
    grades["bob"]["test_kl"]  -> 0.0
    max_scores(course, "lab11") -> {"test_kl": 2.0, ...}
    by_lab = autograde_labs(course, {"lab11": subs, "lab12": ...})   # ONE `nbgrader autograde "*"`: every lab
    run = once("lifecycle", build)                      # build(folder) once per test session, for every process

Scores come from nbgrader's gradebook (per grade cell: the manual score if a TA gave one, else the
automatic one, None for a written answer still waiting for a TA). A submission that nbgrader could
not grade at all (e.g. not valid JSON) maps to an empty dict and is listed, with nbgrader's error
lines, in ``grades.ungradable``; ``grades.log`` holds nbgrader's whole output.

    manual_grade(course, "lab11", "alice", "answer_kl_signs", 1.5, "Right numbers; ...")   # as formgrader
    read_grades(course, "lab11", ["alice"])             # the gradebook again, after a TA's grading
    validate(path)                                      # what `nbgrader validate` tells the student

nbgrader runs from the course's virtual environment (its bin/ first on PATH: nbgrader calls
alembic), with NBGRADER_DB_URL and NBGRADER_EXCHANGE removed so that a copy never touches a real
gradebook or exchange. Any sign of a broken nbgrader_config.py fails the call.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

from course_staff import course
from course_staff.course import COURSE_ID, is_grade, is_solution

# where source/ and release/ are read from: this checkout, or another one named in COURSE_UNDER_TEST
REPO = Path(os.environ.get("COURSE_UNDER_TEST") or course.REPO)
LABS = course.labs(REPO)
BIN = Path(sys.executable).parent               # the venv that runs pytest also runs nbgrader

_MARKER = re.compile(r"^\s*(?:###\s*)?(?:BEGIN|END) SOLUTION\s*$")
_CONFIG_BROKEN = ("Exception while loading config file", "nbgrader_config.py is broken")


class NbgraderError(RuntimeError):
    """An nbgrader command failed as a whole (not one student's submission)."""


class Grades(dict):
    """{student: {grade_id: score}}, plus ``log`` (nbgrader's output), ``ungradable`` ({student:
    nbgrader's error lines} for submissions that could not be graded at all) and ``flagged``
    ({student: [grade_id, ...]} of cells that nbgrader marked "needs manual grade")."""

    def __init__(self, *args, log="", ungradable=None, flagged=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.log = log
        self.ungradable = dict(ungradable or {})
        self.flagged = dict(flagged or {})


def _env():
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("NBGRADER_DB_URL", None)
    env.pop("NBGRADER_EXCHANGE", None)
    env.setdefault("PYTHONWARNINGS", "ignore")      # keeps nbgrader's own log readable
    return env


def nbgrader(course, *args, check=True, timeout=None, env=None):
    """Run ``nbgrader *args`` in ``course``; returns (returncode, stdout+stderr as one text).

    Raises NbgraderError when the configuration failed to load, or (check=True) on a non-zero exit.
    """
    proc = subprocess.run([str(BIN / "nbgrader"), *map(str, args)], cwd=course,
                          env={**_env(), **(env or {})}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=timeout)
    out = proc.stdout
    if any(line in out for line in _CONFIG_BROKEN):
        raise NbgraderError(f"nbgrader_config.py failed to load in {course}:\n{out}")
    if check and proc.returncode != 0:
        raise NbgraderError(f"`nbgrader {' '.join(map(str, args))}` exited {proc.returncode}:\n{out}")
    return proc.returncode, out


def nbgrader_batch(commands, timeout=None):
    """Several nbgrader commands, one after the other, in ONE Python process: [(folder, [arg, ...]), ...]
    -> [(returncode, output), ...], each what ``nbgrader(folder, *args, check=False)`` returns.

    Each command runs as nbgrader's own test suite runs its command line (``run_nbgrader``):
    ``NbGraderApp.instance()``, ``initialize(args)`` in ``folder`` (which reads that folder's
    nbgrader_config.py), ``start()``, then ``reset()`` (every app instance cleared), so that only starting
    Python and importing nbgrader (3-4 s of CPU) is paid once. Raises NbgraderError as ``nbgrader`` does
    when a configuration fails to load, or when the process dies (``folder`` and ``args`` named)."""
    payload = json.dumps([[str(folder), list(map(str, args))] for folder, args in commands])
    proc = subprocess.run([str(BIN / "python"), "-c", "from course_staff.testbed.harness import _batch; _batch()"],
                          input=payload, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)
    results = [tuple(json.loads(line)) for line in proc.stdout.splitlines() if line.startswith("[")]
    for (folder, args), (_, out) in zip(commands, results):
        if any(line in out for line in _CONFIG_BROKEN):
            raise NbgraderError(f"nbgrader_config.py failed to load in {folder}:\n{out}")
    if len(results) < len(commands):
        folder, args = commands[len(results)]
        raise NbgraderError(f"`nbgrader {' '.join(map(str, args))}` in {folder} ended its process "
                            f"(exit {proc.returncode}):\n{proc.stderr}")
    return results


def _batch():
    """The process of ``nbgrader_batch``: commands as JSON on stdin, one JSON line [returncode, output] per
    command on stdout (written as each ends: a command that ends the process leaves the others unwritten)."""
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from jupyter_core.application import NoStart
    from nbgrader.apps.nbgraderapp import NbGraderApp

    class Tee(io.StringIO):                         # a config that exits the process leaves its message
        def write(self, chunk):
            sys.__stderr__.write(chunk)
            return super().write(chunk)

    out = sys.stdout
    for folder, args in json.loads(sys.stdin.read()):
        os.chdir(folder)
        buffer = Tee()
        app = NbGraderApp.instance()
        code = 0
        with redirect_stdout(buffer), redirect_stderr(buffer):
            try:
                app.initialize(args)
                app.start()
            except NoStart:                         # a subcommand ran (what launch_instance ends on)
                code = 0
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
            except Exception:  # noqa: BLE001 -- reported as nbgrader's own exit would be
                import traceback
                traceback.print_exc()
                code = 1
            finally:
                app.reset()
        out.write(json.dumps([code, buffer.getvalue()]) + "\n")
        out.flush()


def db_url(course):
    return f"sqlite:///{Path(course) / 'gradebook.db'}"


# A folder that the processes of one test session share (tests/conftest.py sets it): every lab is
# generated there once, and every later course_copy copies it (generate_assignment costs a few CPU seconds
# per lab; the lifecycle, the mutants, the broken notebooks, the sandbox and the hub each need a fresh
# course), and what ``once`` builds is kept there. A copy asked for fewer labs gets them all generated: the
# others are recorded in its gradebook too, and nothing is graded unless a test submits it.
TEMPLATES = None


def course_copy(tmp_path, labs=LABS):
    """A fresh course in ``tmp_path/course``: the config, source/ and release/ of the repo, with
    ``generate_assignment`` run for each lab (which also records the labs in a new gradebook): for each
    of ``labs`` at least (from the session's template, every lab of the repo)."""
    course = Path(tmp_path) / "course"
    if TEMPLATES is None or not labs:
        return _generate(course, labs)
    from filelock import FileLock

    labs = LABS if set(labs) <= set(LABS) else labs
    template = Path(TEMPLATES) / "+".join(labs)
    with FileLock(f"{template}.lock"):               # one process generates, the others wait and copy
        if not (template / "generated").exists():
            shutil.rmtree(template, ignore_errors=True)
            _generate(template / "course", labs)
            (template / "generated").touch()
    shutil.copytree(template / "course", course)
    return course


def once(name, build):
    """``build(folder)``, run ONCE per test session and shared by its processes (both xdist workers):
    the first process to ask runs it in ``TEMPLATES/<name>/`` under a FileLock while any other waits,
    and every process gets the same (pickled) result. The session's folder is new for every run, so
    ``name`` is the key (what it builds comes from this checkout's files, which a run does not change).
    Outside a test session (TEMPLATES unset) it builds in a new temporary folder."""
    if name in _ONCE:
        return _ONCE[name]
    if TEMPLATES is None:
        import tempfile
        _ONCE[name] = build(Path(tempfile.mkdtemp(prefix=f"{name}-")))
        return _ONCE[name]
    import pickle

    from filelock import FileLock

    folder = Path(TEMPLATES) / name
    result = folder / "result.pickle"
    with FileLock(f"{folder}.lock"):
        if not result.exists():                     # a build that failed midway is started over
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            built = build(folder)
            (folder / "result.tmp").write_bytes(pickle.dumps(built))
            (folder / "result.tmp").rename(result)
        _ONCE[name] = pickle.loads(result.read_bytes())
    return _ONCE[name]


_ONCE = {}                                          # name -> result, in this process


def _generate(course, labs):
    course.mkdir(parents=True)
    shutil.copy2(REPO / "nbgrader_config.py", course / "nbgrader_config.py")
    for folder in ("source", "release"):
        if (REPO / folder).is_dir():
            shutil.copytree(REPO / folder, course / folder,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    labs = [lab for lab in labs if (course / "source" / lab).is_dir()]
    _checked(nbgrader_batch([(course, ["generate_assignment", lab, "--force"]) for lab in labs]))
    return course


def _checked(results):
    """``results`` of nbgrader_batch, or NbgraderError for the first command that exited non-zero."""
    for code, out in results:
        if code != 0:
            raise NbgraderError(f"an nbgrader command exited {code}:\n{out}")
    return results


def _read(folder, lab):
    return nbformat.read(str(REPO / folder / lab / f"{lab}.ipynb"), as_version=4)


def _grading(cell):
    return cell.metadata.get("nbgrader", {})


def blank_submission(lab):
    """The release notebook of ``lab`` exactly as students get it."""
    return _read("release", lab)


def solution_text(lab):
    """{grade_id: the instructor's solution as a student would write it} for every solution cell
    of the SOURCE notebook (the BEGIN/END SOLUTION marker lines removed)."""
    texts = {}
    for cell in _read("source", lab).cells:
        if is_solution(cell):
            lines = [ln for ln in cell.source.splitlines() if not _MARKER.match(ln)]
            texts[_grading(cell)["grade_id"]] = "\n".join(lines)
    return texts


def solved_submission(lab, edits=None):
    """The release notebook with every solution cell filled from the source's solution.

    ``edits`` = {grade_id: [(old, new), ...]} replaces (str.replace, every occurrence) ``old`` by
    ``new`` in that cell's solution text -- a mutant. Each ``old`` must occur, each grade_id exist.
    """
    texts = solution_text(lab)
    for gid, pairs in (edits or {}).items():
        assert gid in texts, f"{lab}: no solution cell {gid!r} (have {sorted(texts)})"
        for old, new in pairs:
            assert old in texts[gid], f"{lab}/{gid}: {old!r} does not occur in the solution:\n{texts[gid]}"
            texts[gid] = texts[gid].replace(old, new)
    nb = _read("release", lab)
    filled = set()
    for cell in nb.cells:
        meta = _grading(cell)
        if is_solution(cell):
            assert meta["grade_id"] in texts, f"{lab}: release cell {meta['grade_id']!r} not in source"
            cell.source = texts[meta["grade_id"]]
            filled.add(meta["grade_id"])
    missing = set(texts) - filled
    assert not missing, f"{lab}: solution cells missing from release/: {sorted(missing)}"
    return nb


def _write(path, submission):
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(submission, (str, bytes)):
        path.write_bytes(submission.encode() if isinstance(submission, str) else submission)
    else:
        nbformat.write(submission, str(path))


def autograde(course, lab, submissions, timeout=None):
    """Write submitted/<student>/<lab>/<lab>.ipynb for each student, run ONE ``nbgrader autograde``
    and return Grades {student: {grade_id: score}} read from the gradebook.

    Students graded by earlier calls on the same course are not regraded (nbgrader skips existing
    autograded/ folders); a student named again is replaced.
    """
    _submit(course, lab, submissions)
    return grade(course, lab, list(submissions), timeout=timeout)


def autograde_labs(course, submissions, timeout=None):
    """``autograde`` of several labs at once: {lab: {student: submission}} written, ONE ``nbgrader
    autograde "*"`` (nothing else may be in submitted/), {lab: Grades}."""
    for lab, subs in submissions.items():
        _submit(course, lab, subs)
    return grade_labs(course, {lab: list(subs) for lab, subs in submissions.items()}, timeout=timeout)


def _submit(course, lab, submissions):
    course = Path(course)
    for student, submission in submissions.items():
        for step in ("submitted", "autograded", "feedback"):
            shutil.rmtree(course / step / student / lab, ignore_errors=True)
        _write(course / "submitted" / student / lab / f"{lab}.ipynb", submission)


def grade(course, lab, students, timeout=None):
    """Run ONE ``nbgrader autograde <lab>`` on what is in submitted/ (e.g. after ``nbgrader
    collect``) and return Grades for ``students``. A score is None where nbgrader left the cell
    to a human (it could not grade it automatically)."""
    course = Path(course)
    _, log = nbgrader(course, "autograde", lab, check=False, timeout=timeout)
    return read_grades(course, lab, students, log)


def grade_labs(course, students, timeout=None):
    """ONE ``nbgrader autograde "*"`` for every lab at once ({lab: [student, ...]}, every lab that
    submitted/ holds): {lab: Grades}, each with that call's whole log."""
    course = Path(course)
    there = {p.name for p in course.glob("submitted/*/*") if p.is_dir()}
    assert there == set(students), f"submitted/ holds {sorted(there)}, grading {sorted(students)}"
    _, log = nbgrader(course, "autograde", "*", check=False, timeout=timeout)
    return {lab: read_grades(course, lab, names, log) for lab, names in students.items()}


def _score(grade):
    """A grade cell's score: the TA's if there is one, else the autograder's (None: left to a TA)."""
    from course_staff.grading.manual_scores import counted_score
    return counted_score(grade)


def read_grades(course, lab, students, log=""):
    """Grades of ``students`` as the gradebook holds them now (after autograde, or after a TA's manual
    grading); ``log`` is the autograde output that tells which submissions nbgrader could not grade."""
    from nbgrader.api import Gradebook, MissingEntry

    course = Path(course)
    grades, ungradable, flagged = {}, {}, {}
    failed = set(re.findall(rf"error processing assignment '{re.escape(lab)}' for student '([^']+)'", log))
    with Gradebook(db_url(course)) as gb:
        for student in students:
            graded = (course / "autograded" / student / lab / f"{lab}.ipynb").exists()
            try:
                if student in failed or not graded:
                    raise MissingEntry()
                nb = gb.find_submission_notebook(lab, lab, student)
            except MissingEntry:
                grades[student] = {}
                ungradable[student] = _errors_about(log, student, lab)
                continue
            grades[student] = {g.name: _score(g) for g in nb.grades if g.max_score > 0}
            review = sorted(g.name for g in nb.grades if g.needs_manual_grade)
            if review:
                flagged[student] = review
    return Grades(grades, log=log, ungradable=ungradable, flagged=flagged)


def _errors_about(log, student, lab):
    """nbgrader's ERROR lines (and what follows them) about one student's submission of ``lab`` (the
    log of one autograde may hold every lab's)."""
    blocks, keep = [], False
    for line in log.splitlines():
        if line.startswith("[") and "]" in line:
            keep = "ERROR" in line.split("]")[0] and ((student in line and lab in line) or keep)
            if "error processing assignment" in line:
                keep = f"/{student}/{lab}" in line or f"'{lab}' for student '{student}'" in line
        if keep:
            blocks.append(line)
    if not blocks:
        return f"no autograded notebook for {student} (see grades.log)"
    causes = [ln.strip() for ln in blocks if re.match(r"^\s*[\w.]+(Error|Exception|Exit)\b.*:", ln)]
    return "\n".join(causes[-1:] + blocks)


def manual_grade(course, lab, student, grade_id, score, comment=None):
    """Give ``student``'s cell ``grade_id`` a manual score and a comment, exactly as the formgrader
    does when a TA types them in (nbgrader's formgrader API: GradeHandler.put, CommentHandler.put):
    the manual score replaces the automatic one and clears "needs manual grade"."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url(course)) as gb:
        grade = gb.find_grade(grade_id, lab, lab, student)
        grade.manual_score = score
        grade.extra_credit = None
        grade.needs_manual_grade = grade.manual_score is None and grade.auto_score is None
        if comment is not None:
            gb.find_comment(grade_id, lab, lab, student).manual_comment = comment
        gb.db.commit()


def validate(path, timeout=None):
    """What `nbgrader validate` on a student's machine decides for the notebook at ``path``: nbgrader's
    own Validator with its defaults (a student has no course configuration), on a copy.

    Returns {"failed": [grade_id, ...], "changed": [source, ...], "error": "..." or None}: the check
    cells and blank answers that validation reports as failed, the locked cells it reports as
    changed, and the exception that stopped validation (a dead kernel, say). "Success" is all three
    empty."""
    import tempfile

    from nbgrader.validator import Validator
    from traitlets.config import Config

    nb = nbformat.read(str(path), as_version=4)
    by_source = {}
    for cell in nb.cells:
        if is_grade(cell):
            by_source.setdefault(cell.source.strip(), []).append(_grading(cell)["grade_id"])
    config = Config()
    if timeout:
        config.Execute.timeout = timeout
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / Path(path).name
        shutil.copy(path, copy)
        try:
            result = Validator(config=config).validate(str(copy))
        except Exception as err:  # noqa: BLE001 -- what the student would see instead of a verdict
            return {"failed": [], "changed": [], "error": f"{type(err).__name__}: {err}"}
    failed, seen = [], {}
    for entry in result.get("failed", []):
        ids = by_source.get(entry["source"], [entry["source"][:60]])
        k = seen[entry["source"]] = seen.get(entry["source"], -1) + 1
        failed.append(ids[min(k, len(ids) - 1)])
    changed = [entry["source"] for entry in result.get("changed", []) + result.get("type_changed", [])]
    return {"failed": failed, "changed": changed, "error": None}


def max_scores(course, lab):
    """{grade_id: points} of every graded cell of ``lab``, as the gradebook records them."""
    from nbgrader.api import Gradebook

    with Gradebook(db_url(course)) as gb:
        nb = gb.find_notebook(lab, lab)
        return {c.name: float(c.max_score) for c in nb.grade_cells if c.max_score > 0}


def total(scores):
    return sum(v or 0.0 for v in scores.values())


def exchange_submit(course, exchange, home, student, lab, submission):
    """What `nbgrader fetch_assignment` then `nbgrader submit` do, through nbgrader's exchange API."""
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import ExchangeFetchAssignment, ExchangeSubmit
    from traitlets.config import Config

    config = Config()
    config.Exchange.root = str(exchange)
    config.Exchange.assignment_dir = str(home)
    config.CourseDirectory.course_id = COURSE_ID
    config.CourseDirectory.assignment_id = lab
    config.CourseDirectory.student_id = student
    for step in (ExchangeFetchAssignment, None, ExchangeSubmit):
        if step is None:
            _write(home / lab / f"{lab}.ipynb", submission)
            continue
        coursedir = CourseDirectory(config=config)
        step(coursedir=coursedir, authenticator=Authenticator(config=config), config=config).start()


__all__ = ["course_copy", "solved_submission", "blank_submission", "autograde", "autograde_labs", "max_scores",
           "grade", "grade_labs", "once", "read_grades", "manual_grade", "validate", "solution_text", "nbgrader",
           "nbgrader_batch", "db_url", "Grades", "NbgraderError", "total", "LABS", "REPO"]

if __name__ == "__main__":     # quick manual check: python -m tests.harness /tmp/x lab11
    tmp, lab = Path(sys.argv[1]), sys.argv[2]
    c = course_copy(tmp)
    print(json.dumps(autograde(c, lab, {"solved": solved_submission(lab),
                                        "blank": blank_submission(lab)}), indent=1))
