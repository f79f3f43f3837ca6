"""Autograde a class: JOBS worker processes on one machine, SHARD=k/n of the class per machine.

    python -m course_staff.grading.class_grading autograde lab11 --jobs 2 --shard 1/2   # make autograde
    python -m course_staff.grading.class_grading record lab11 lab12                     # make record

Run in the course directory (where nbgrader_config.py is). ``autograde``:

1. records the lab in the gradebook if it is not there yet (``record``: generate_assignment into a
   temporary folder, so release/ is never touched from a grading command);
2. takes the students collected in submitted/<student>/<lab>/, keeps its shard (a student's shard
   is a hash of the name: every machine computes the same split from any roster) and leaves out
   the students already graded (an executed autograded notebook, and no newer submission since;
   what a dead grader leaves is a notebook never run, which is graded again: see ``graded``);
3. grades the rest in ``jobs`` worker processes, each taking the next student from one queue and
   running nbgrader's own autograde on that one student (``NbGraderAPI.autograde``), so no student
   is graded twice and each runs in its own kernel. A worker that dies (out of memory, killed)
   is replaced; the student it was grading is reported and left for the next run, and every
   student graded before stays graded. Run the same command again to grade what is left.

Every notebook runs in the grading sandbox (course_staff/grading/sandbox.py, configured in
nbgrader_config.py): where it cannot start, ``autograde`` stops before grading anyone, saying how
to install it; SANDBOX=off grades without it and says so on every run.

Several workers need a gradebook that takes several writers: PostgreSQL (NBGRADER_DB_URL). With
the default SQLite file, ``jobs`` above 1 stops with a message. A lock file keeps a second run on
the same machine and lab from grading the same students at the same time. Output: a line per
student (score, seconds, and nbgrader's warnings and errors about that student), then a summary.
"""

import argparse
import fcntl
import hashlib
import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path

from course_staff.course import config
from course_staff.grading import sandbox

RERUN = "make autograde LAB={lab} JOBS={jobs}{shard}"


# -- the course and its gradebook ------------------------------------------------------------------

def gradebook_url(course):
    """The gradebook nbgrader uses in ``course`` (NBGRADER_DB_URL or the SQLite file)."""
    return config(course).CourseDirectory.db_url


def nbgrader_api(course):
    """nbgrader's Python API on ``course``, its log kept for the results, not printed."""
    from nbgrader.apps.api import NbGraderAPI

    api = NbGraderAPI(config=config(course))
    api.log.handlers = []
    api.log.propagate = False
    return api


def is_sqlite(url):
    return url.startswith("sqlite")


def alembic_head():
    """The schema revision nbgrader stamps a new gradebook with, read from nbgrader's migration scripts
    in this process. nbgrader's own ``get_alembic_version`` asks a new `alembic heads` process, which
    imports nbgrader all over again: about 4 CPU-s for every new gradebook. ``main`` uses this one."""
    import nbgrader
    from alembic.script import ScriptDirectory

    return ScriptDirectory(str(Path(nbgrader.__file__).parent / "alembic")).get_current_head()


def recorded(url, lab):
    """True when the gradebook knows ``lab`` with at least one notebook."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(url) as gb:
        try:
            return len(gb.find_assignment(lab).notebooks) > 0
        except MissingEntry:
            return False


def record(course, lab):
    """Record ``lab`` (its cells, points, hidden tests) in the gradebook from source/: nbgrader's
    generate_assignment, writing the student version into a temporary folder so that release/
    stays as it is. Returns nbgrader's log."""
    api = nbgrader_api(course)
    with tempfile.TemporaryDirectory(prefix=f"record-{lab}-") as scratch:
        api.coursedir.release_directory = scratch       # an absolute path: outside the course
        result = api.generate_assignment(lab, force=True, create=True)
    if not result["success"]:
        raise SystemExit(f"recording {lab} in the gradebook failed:\n{result.get('log', '')}"
                         f"{result.get('error', '')}")
    return result.get("log", "")


# -- who is graded where ---------------------------------------------------------------------------

def shard_of(student, n):
    """The shard (1..n) of ``student``: a hash of the name, the same on every machine."""
    return int(hashlib.sha256(student.encode()).hexdigest(), 16) % n + 1


def parse_shard(text):
    k, n = (int(x) for x in text.split("/"))
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"SHARD={text}: want k/n with 1 <= k <= n")
    return k, n


def collected(course, lab):
    """Students with a submitted/<student>/<lab>/ folder, sorted."""
    root = Path(course) / "submitted"
    return sorted(p.parent.name for p in root.glob(f"*/{lab}") if p.is_dir()) if root.is_dir() else []


def misnamed(course, lab, student):
    """A message if the student's folder lacks <lab>.ipynb (nbgrader would end in "No notebooks
    found"), naming what is there and how to fix it; None when the notebook is there."""
    folder = Path(course) / "submitted" / student / lab
    if (folder / f"{lab}.ipynb").exists():
        return None
    others = sorted(p.name for p in folder.glob("*.ipynb"))
    if not others:
        return (f"{student} submitted no notebook for {lab} (the folder {folder} holds no .ipynb): "
                f"ask the student to submit {lab}.ipynb from the Assignments tab")
    return (f"{student} submitted '{others[0]}' instead of '{lab}.ipynb' (nbgrader grades only the "
            f"lab's own file name). Fix: mv '{folder / others[0]}' '{folder / f'{lab}.ipynb'}' "
            f"and run make autograde LAB={lab} again")


def _timestamp(folder):
    """The UTC time in <folder>/timestamp.txt (as nbgrader's collect writes it), or None."""
    from dateutil import parser    # what nbgrader parses it with, without importing all of nbgrader

    path = Path(folder) / "timestamp.txt"
    if not path.exists():
        return None
    stamp = parser.parse(path.read_text().strip())
    return stamp.astimezone(timezone.utc).replace(tzinfo=None) if stamp.tzinfo else stamp


def graded(course, lab, student):
    """True when nbgrader finished this student's submission and no newer one came in since.

    nbgrader writes autograded/<student>/<lab>/<lab>.ipynb twice: sanitized (outputs cleared)
    before running it, then executed. A grader that dies in between leaves the sanitized one, and
    plain `nbgrader autograde` then skips the student for good; here it counts as not graded."""
    done = Path(course) / "autograded" / student / lab
    try:
        cells = json.loads((done / f"{lab}.ipynb").read_text()).get("cells", [])
    except (OSError, ValueError):
        return False                    # never graded, or cut off while writing
    if not any(c.get("execution_count") for c in cells if c.get("cell_type") == "code"):
        return False                    # sanitized but never run: its grader died
    new, old = _timestamp(Path(course) / "submitted" / student / lab), _timestamp(done)
    return not (new and old and new > old)


# -- workers ---------------------------------------------------------------------------------------

def worker(lab):
    """A worker process: grades each student named on stdin, one JSON line per student on stdout."""
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)                        # anything else printed goes to stderr, not the protocol
    from nbgrader.api import Gradebook

    api = nbgrader_api(os.getcwd())      # its log comes back in each result
    url = api.coursedir.db_url
    for line in sys.stdin:
        student = line.strip()
        t0 = time.perf_counter()
        result = api.autograde(lab, student, force=True, create=True)
        result.update(student=student, seconds=round(time.perf_counter() - t0, 2))
        if result["success"]:
            with Gradebook(url) as gb:
                submission = gb.find_submission(lab, student)
                result.update(score=submission.score, max_score=submission.max_score)
        protocol.write(json.dumps(result) + "\n")
        protocol.flush()


@dataclass
class Outcome:
    graded: dict = field(default_factory=dict)       # student -> result of a successful autograde
    failed: dict = field(default_factory=dict)       # student -> nbgrader's error lines
    lost: dict = field(default_factory=dict)         # student -> how its worker died


def workers_log(course, lab):
    """Where the workers' own output goes (kernels' start-up chatter, a dying worker's traceback)."""
    return Path(course) / "autograded" / f".{lab}.workers.log"


def _start_worker(course, lab):
    with workers_log(course, lab).open("a") as log:
        return subprocess.Popen([sys.executable, "-m", "course_staff.grading.class_grading", "worker", lab],
                                cwd=course, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=log, text=True, bufsize=1)


def _serve(proc, course, lab, todo, outcome, report, lock):
    """One worker's thread: hand the worker ``proc`` students from ``todo`` until it is empty."""
    try:
        while True:
            try:
                student = todo.get_nowait()
            except queue.Empty:
                return
            proc.stdin.write(student + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            with lock:
                if not line:             # the worker died while grading this student
                    code = proc.wait()
                    outcome.lost[student] = (f"its worker died (exit {code}) while grading it; "
                                             f"the worker's output is in {workers_log(course, lab)}")
                    report(student, None)
                    proc = _start_worker(course, lab)
                    continue
                result = json.loads(line)
                if result["success"]:
                    outcome.graded[student] = result
                else:
                    outcome.failed[student] = _errors(result)
                report(student, result)
    finally:
        proc.stdin.close()
        proc.wait()


_EXCEPTION = re.compile(r"^\s*[\w.]+(Error|Exception|Exit)\b.*:")


def _notable(result):
    """The warnings and errors nbgrader logged about one student: its info lines left out, and
    of a traceback only the exception line."""
    keep, traceback, lines = False, False, []
    for line in (result or {}).get("log", "").splitlines():
        if line.startswith("["):
            keep = line.startswith(("[WARNING]", "[ERROR]", "[CRITICAL]"))
            traceback = "Traceback" in line
            if keep and not traceback and "Please see the" not in line:
                lines.append(line)
        elif keep and (not traceback or _EXCEPTION.match(line)):
            lines.append(line.strip() if traceback else line)
    return lines


def _errors(result):
    """Why nbgrader could not grade a submission: the exception and nbgrader's error lines."""
    return "\n".join(ln for ln in _notable(result) if not ln.startswith("[WARNING]")) \
        or result.get("error", "unknown error").strip().splitlines()[-1]


# -- the command -----------------------------------------------------------------------------------

def autograde(course, lab, jobs=1, shard=(1, 1), out=print):
    """Grade what is left of ``lab`` in ``course``; returns an Outcome (also printed)."""
    course = Path(course).resolve()
    sandboxed = sandbox.require()        # stops here if student code could not be sandboxed
    url = gradebook_url(course)
    if jobs > 1 and is_sqlite(url):
        raise SystemExit(
            f"JOBS={jobs} needs a PostgreSQL gradebook: SQLite ({url}) takes one writer at a time, so "
            "parallel graders would wait on each other or fail with 'database is locked'. Grade with "
            "JOBS=1, or point NBGRADER_DB_URL at PostgreSQL (`make postgres` starts a local one for a "
            "dry run; docs/ta_guide.md, 'Many students').")
    (course / "autograded").mkdir(exist_ok=True)
    lock_file = (course / "autograded" / f".{lab}.lock").open("w")
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit(f"another `make autograde LAB={lab}` is running in {course}: wait for it "
                         "(a run that died holds no lock)") from None
    k, n = shard
    everyone = collected(course, lab)
    mine = [s for s in everyone if shard_of(s, n) == k]
    outcome = Outcome(failed={s: m for s in mine if (m := misnamed(course, lab, s))})
    done = [s for s in mine if s not in outcome.failed and graded(course, lab, s)]
    todo = [s for s in mine if s not in outcome.failed and s not in done]
    where = f" in shard {k}/{n}" if n > 1 else ""
    out(f"{lab}: {len(mine)} submissions{where} ({len(everyone)} collected), {len(done)} already "
        f"graded, {len(todo)} to grade with {min(jobs, len(todo))} worker(s); gradebook "
        f"{'SQLite' if is_sqlite(url) else url.split('@')[-1]}; "
        f"{'every notebook in the sandbox' if sandboxed else 'NO SANDBOX (SANDBOX=off)'}")
    t0 = time.perf_counter()
    workers = [_start_worker(course, lab) for _ in range(min(jobs, len(todo)))]   # they start up ...
    if not recorded(url, lab):                                                   # ... meanwhile
        record(course, lab)
        out(f"{lab} was not in the gradebook: recorded it from source/ (release/ untouched)")

    lock, finished = threading.Lock(), []

    def report(student, result):
        finished.append(student)
        if result is None:
            status = outcome.lost[student]
        elif result["success"]:
            status = f"{result['score']:g}/{result['max_score']:g}"
        else:
            status = "NOT GRADED"
        out(f"  [{len(finished)}/{len(todo)}] {student}: {status}"
            + (f" ({result['seconds']:.1f} s)" if result else ""))
        for line in _notable(result):
            out(f"      {line}")

    queue_ = queue.Queue()
    for student in todo:
        queue_.put(student)
    threads = [threading.Thread(target=_serve, args=(proc, course, lab, queue_, outcome, report, lock))
               for proc in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _summary(lab, jobs, shard, outcome, done, time.perf_counter() - t0, out)
    return outcome


def _summary(lab, jobs, shard, outcome, done, seconds, out):
    rerun = RERUN.format(lab=lab, jobs=jobs, shard=f" SHARD={shard[0]}/{shard[1]}" if shard[1] > 1 else "")
    n = len(outcome.graded)
    out(f"{lab}: graded {n} in {seconds:.0f} s" + (f" ({seconds / n:.1f} s of wall time per submission "
                                                      f"with {jobs} worker(s))" if n else "")
        + f", {len(done)} graded before, {len(outcome.failed)} not gradable, "
          f"{len(outcome.lost)} left by a dead worker")
    for student, message in outcome.failed.items():
        out(f"NOT GRADED {student}: {message}")
    if outcome.lost:
        out(f"LEFT FOR THE NEXT RUN (their worker died; every other grade is kept): "
            f"{', '.join(sorted(outcome.lost))}.\nRun `{rerun}` again to grade them (and only them). "
            "If a worker dies on the same student again, that notebook is what kills it: grade it "
            f"alone (`nbgrader autograde {lab} --student=<student> --force`) and look at its log.")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m course_staff.grading.class_grading")
    sub = parser.add_subparsers(dest="command", required=True)
    grade = sub.add_parser("autograde", help="grade the collected submissions of a lab")
    grade.add_argument("lab")
    grade.add_argument("--jobs", type=int, default=1)
    grade.add_argument("--shard", type=parse_shard, default=(1, 1))
    rec = sub.add_parser("record", help="record labs in the gradebook (release/ untouched)")
    rec.add_argument("labs", nargs="+")
    rec.add_argument("--force", action="store_true", help="record again even if the gradebook has it")
    work = sub.add_parser("worker")
    work.add_argument("lab")
    args = parser.parse_args(argv)

    import nbgrader.api
    nbgrader.api.get_alembic_version = alembic_head      # a new gradebook: the same stamp, no new process
    if args.command == "worker":
        worker(args.lab)
        return 0
    course = Path.cwd()
    if args.command == "record":
        url = gradebook_url(course)
        for lab in args.labs:
            if recorded(url, lab) and not args.force:
                print(f"{lab} is already in the gradebook (--force records it again)")
            else:
                record(course, lab)
                print(f"{lab} recorded in the gradebook from source/ (release/ untouched)")
        return 0
    outcome = autograde(course, args.lab, jobs=max(1, args.jobs), shard=args.shard)
    return 1 if outcome.failed or outcome.lost else 0


if __name__ == "__main__":
    sys.exit(main())
