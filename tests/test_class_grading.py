"""A class of 30 graded in parallel on a real PostgreSQL gradebook, as two machines would.

Two course checkouts ("machines") share one exchange and one PostgreSQL gradebook. The lab is
recorded once; 30 simulated students (each kind three times) (course_staff/testbed/classroom.py) fetch and submit; each machine collects
the whole class and grades its shard (SHARD=1/2, SHARD=2/2) with JOBS=2, both machines at the same
time (four graders writing to one gradebook); each writes the feedback of its shard; one exports
grades.csv and the per-task CSV. The reference: what each distinct notebook of the class must score,
cell by cell (course_staff/testbed/students), which plain `nbgrader autograde` on SQLite gives them in
tests/test_lifecycle.py (the same roster, graded once there). Every student's every cell must equal
the reference for that student's notebook, and every student appear once in grades.csv.

A second class of four checks what a dead worker leaves: its student is regraded by the same
command, and no one else.
"""

import csv
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from course_staff.testbed import harness as h
from course_staff.grading.class_grading import alembic_head, graded, shard_of
from course_staff.testbed import classroom
from tests import requirements
from course_staff.testbed import students as st

pytestmark = pytest.mark.slow

LAB = classroom.LAB
SIZE = 30                 # each of the 10 kinds of students three times


def grading(course, *args, env, wait=True):
    """`python -m course_staff.grading.class_grading ...` in ``course`` (what make autograde runs)."""
    cmd = [sys.executable, "-m", "course_staff.grading.class_grading", *map(str, args)]
    proc = subprocess.Popen(cmd, cwd=course, env={**h._env(), **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    return proc.communicate(timeout=900) + (proc.returncode,) if wait else proc


def on_both(machines, *args, **kwargs):
    """`nbgrader *args` on every machine at the same time, as their TAs would; [(exit code, output)].
    (Only for commands that write nothing both machines share: two collects would add the same
    students to the gradebook at once.)"""
    with ThreadPoolExecutor(len(machines)) as pool:
        return list(pool.map(lambda machine: h.nbgrader(machine, *args, **kwargs), machines))


@pytest.fixture(scope="module")
def the_class(postgres, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("class")
    kinds = classroom.distinct()
    roster = classroom.class_of(SIZE, kinds)

    # two machines, one exchange, one PostgreSQL gradebook
    url = postgres.create_database("class_of_30")
    exchange = tmp / "exchange"
    exchange.mkdir(mode=0o777)
    env = {"NBGRADER_DB_URL": url, "NBGRADER_EXCHANGE": str(exchange)}
    machines = [h.course_copy(tmp / f"machine{i}", labs=()) for i in (1, 2)]
    logs = {"record": grading(machines[0], "record", LAB, env=env)[0]}
    h.nbgrader(machines[0], "release_assignment", LAB, env=env)
    classroom.ship(exchange, tmp / "homes", roster, kinds)
    for i, machine in enumerate(machines, 1):
        logs[f"collect {i}"] = h.nbgrader(machine, "collect", LAB, env=env)[1]
    running = [grading(m, "autograde", LAB, "--jobs", 2, "--shard", f"{i}/2", env=env, wait=False)
               for i, m in enumerate(machines, 1)]
    for i, proc in enumerate(running, 1):
        logs[f"autograde {i}"] = proc.communicate(timeout=900)[0]
        print(logs[f"autograde {i}"])
    for i, (_, log) in enumerate(on_both(machines, "generate_feedback", LAB, env=env, check=False), 1):
        logs[f"feedback {i}"] = log
    h.nbgrader(machines[0], "export", "--to", "grades.csv", env=env)
    proc = subprocess.run([sys.executable, "-m", "course_staff.grading.task_grades"], cwd=machines[0],
                          env={**h._env(), **env}, capture_output=True, text=True)
    logs["tasks"] = proc.stdout + proc.stderr
    return dict(kinds=kinds, roster=roster, url=url, machines=machines, logs=logs,
                pg=classroom.gradebook_scores(url, roster))


def _gradable(the_class):
    return [s for s, kind in the_class["roster"].items() if the_class["kinds"][kind][1] is not None]


def test_the_class_has_every_kind_repeated(the_class):
    kinds = Counter(the_class["roster"].values())
    assert len(the_class["roster"]) == SIZE and set(kinds) == set(the_class["kinds"])
    assert min(kinds.values()) >= 3, kinds
    assert "Outdated config" not in the_class["logs"]["collect 1"]


def test_each_machine_grades_its_shard_and_nothing_twice(the_class):
    by_machine = [{s for s in the_class["roster"] if graded(m, LAB, s)} for m in the_class["machines"]]
    assert not by_machine[0] & by_machine[1], "a student graded on both machines"
    assert by_machine[0] | by_machine[1] == set(_gradable(the_class))
    for k, done in enumerate(by_machine, 1):
        assert done and all(shard_of(s, 2) == k for s in done), (k, sorted(done))
        log = the_class["logs"][f"autograde {k}"]
        assert f"graded {len(done)} in" in log and "with 2 worker(s)" in log, log


def test_every_score_equals_the_reference(the_class):
    pg = the_class["pg"]
    mismatches = []
    for student, kind in the_class["roster"].items():
        expected = the_class["kinds"][kind][1]
        if expected is None:                      # not JSON: ungradable, 0 points
            log = the_class["logs"][f"autograde {shard_of(student, 2)}"]
            assert f"NOT GRADED {student}: " in log and "not appear to be JSON" in log, log
            assert h.total(pg.get(student, {})) == 0
            continue
        if pg.get(student) != expected:
            mismatches.append(f"{student}: PostgreSQL {pg.get(student)} != the reference {expected}")
    assert not mismatches, "\n".join(mismatches)


def test_every_student_once_in_grades_csv(the_class):
    rows = [r for r in csv.DictReader((the_class["machines"][0] / "grades.csv").open())
            if r["assignment"] == LAB]
    count = Counter(r["student_id"] for r in rows)
    assert set(count) == set(the_class["roster"]) and set(count.values()) == {1}, count
    for row in rows:
        kind = the_class["roster"][row["student_id"]]
        assert float(row["score"]) == pytest.approx(h.total(the_class["kinds"][kind][1] or {})), row


def test_feedback_once_for_every_graded_student(the_class):
    for student in the_class["roster"]:
        pages = [m for m in the_class["machines"] if (m / "feedback" / student / LAB / f"{LAB}.html").exists()]
        assert len(pages) == (1 if student in _gradable(the_class) else 0), (student, pages)


def test_per_task_csv_has_a_column_per_check(the_class):
    path = the_class["machines"][0] / f"grades_by_task_{LAB}.csv"
    assert path.exists(), the_class["logs"]["tasks"]
    rows = list(csv.DictReader(path.open()))
    checks = classroom.graded_cells()                         # in the source notebook's order
    assert list(rows[0])[1:len(checks) + 1] == checks
    for row in rows:
        scores = the_class["pg"].get(row["student_id"], {})
        assert {g: (float(row[g]) if row[g] else None) for g in checks} == \
            ({g: scores.get(g) for g in checks} if scores else {g: None for g in checks}), row
    for gid in checks:
        assert gid in the_class["logs"]["tasks"]                # the class mean of every check


# -- a worker that dies --------------------------------------------------------------------------

KILL_ONCE = '''
import os, pathlib, signal
_flag = pathlib.Path({flag!r})
if _flag.exists():              # the first time only: the grader's worker is killed (as by the OOM killer)
    _flag.unlink()
    os.kill(os.getppid(), signal.SIGKILL)
'''


def test_a_dead_worker_leaves_its_student_for_the_same_command(postgres, tmp_path):
    url = postgres.create_database("dead_worker")
    # the notebook kills its worker, as the OOM killer would: only an unsandboxed kernel can reach
    # it (a sandboxed one sees neither the flag file nor the worker's PID: tests/test_sandbox.py)
    env = {"NBGRADER_DB_URL": url, "SANDBOX": "off"}
    course = h.course_copy(tmp_path, labs=())
    release = {p: p.stat().st_mtime_ns for p in (course / "release").rglob("*")}
    flag = tmp_path / "kill-worker-once"
    flag.touch()
    killer, _ = st.solution(LAB)
    first = st.rows(LAB)[0].solution
    cell = next(c for c in killer.cells if h._grading(c).get("grade_id") == first)
    cell.source += "\n" + KILL_ONCE.format(flag=str(flag))
    subs = {"alice": st.solution(LAB)[0], "bob": st.blank(LAB)[0], "killer": killer, "zoe": st.solution(LAB)[0]}
    for student, nb in subs.items():
        h._write(course / "submitted" / student / LAB / f"{LAB}.ipynb", nb)

    out, _, code = grading(course, "autograde", LAB, "--jobs", 2, env=env)
    assert code == 1 and not flag.exists(), out
    assert "was not in the gradebook: recorded it" in out             # recorded on first use ...
    assert {p: p.stat().st_mtime_ns for p in (course / "release").rglob("*")} == release   # ... release/ untouched
    assert "killer: its worker died" in out and "LEFT FOR THE NEXT RUN" in out, out
    assert "make autograde LAB=lab11 JOBS=2" in out
    survivors = {s for s in subs if graded(course, LAB, s)}
    assert survivors == {"alice", "bob", "zoe"}, out
    assert (course / "autograded" / "killer" / LAB).is_dir()     # what the dead worker left ...
    _, plain = h.nbgrader(course, "autograde", LAB, env=env)     # ... plain nbgrader skips for good
    assert "Skipping existing assignment" in plain and not graded(course, LAB, "killer")
    before = {s: (course / "autograded" / s / LAB / f"{LAB}.ipynb").stat().st_mtime_ns for s in survivors}

    out, _, code = grading(course, "autograde", LAB, "--jobs", 2, env=env)
    assert code == 0, out
    auto, full = h.total(st.solution(LAB)[1]), sum(st.full_marks(LAB).values())   # written answers wait for a TA
    assert "3 already graded, 1 to grade" in out and f"killer: {auto:g}/{full:g}" in out, out
    assert before == {s: (course / "autograded" / s / LAB / f"{LAB}.ipynb").stat().st_mtime_ns for s in survivors}
    scores = classroom.gradebook_scores(url, subs)
    assert {s: h.total(v) for s, v in scores.items()} == {"alice": auto, "bob": 0, "killer": auto, "zoe": auto}


def test_sqlite_refuses_parallel_workers(tmp_path):
    course = h.course_copy(tmp_path, labs=())
    out, _, code = grading(course, "autograde", LAB, "--jobs", 2, env={})
    assert code != 0 and "JOBS=2 needs a PostgreSQL gradebook" in out and "NBGRADER_DB_URL" in out, out
    assert not (course / "gradebook.db").exists()           # stopped before touching anything


def test_a_kernel_that_dies_while_starting_is_started_again(monkeypatch, tmp_path):
    """Several graders on one machine: a new kernel's ports can be taken before it binds them, and
    it dies before replying (seen once in this test file under load). The grader starts another."""
    from nbclient import NotebookClient
    from nbformat.v4 import new_code_cell, new_notebook

    from course_staff.grading.nbgrader_plugins import SurviveKernelDeath

    real, starts = NotebookClient.async_start_new_kernel_client, []

    async def dies_the_first_time(self):
        starts.append(self.km)
        if len(starts) == 1:                      # what nbclient does when the kernel died
            self.kc = self.km.client()
            await self._async_cleanup_kernel()
            raise RuntimeError("Kernel died before replying to kernel_info")
        return await real(self)

    monkeypatch.setattr(NotebookClient, "async_start_new_kernel_client", dies_the_first_time)
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb = new_notebook(cells=[new_code_cell("print(6 * 7)")], metadata={"kernelspec": kernelspec})
    nb, _ = SurviveKernelDeath(timeout=60).preprocess(nb, {"metadata": {"path": str(tmp_path)}})
    assert nb.cells[0].outputs[0]["text"] == "42\n" and len(starts) == 2
    assert starts[0] is not starts[1]                 # a new kernel manager: new ports


def test_the_dry_run_server_starts_serves_a_gradebook_and_stops(tmp_path, monkeypatch):
    """`make postgres` / `make postgres-stop`: the command a TA runs for a dry run."""
    import re

    monkeypatch.setenv("PATH", h._env()["PATH"])                # nbgrader calls alembic on a new gradebook

    from course_staff.grading.postgres import PostgresMissing, Server, bindir
    try:
        bindir()
    except PostgresMissing as missing:
        requirements.missing("postgres", str(missing))
    run = lambda *args: subprocess.run([sys.executable, "-m", "course_staff.grading.postgres", *args],  # noqa: E731
                                       capture_output=True, text=True, timeout=120)
    started = run("start", tmp_path)
    assert started.returncode == 0, started.stderr
    url = re.search(r"export NBGRADER_DB_URL=(\S+)", started.stdout).group(1)
    data = Path(Server.of(tmp_path).data)
    try:
        assert run("start", tmp_path).returncode == 1                  # one server per folder
        from nbgrader.api import Gradebook
        from sqlalchemy import text
        with Gradebook(url) as gb:                                      # nbgrader creates its tables
            gb.add_student("alice")
        with Gradebook(url) as gb:
            assert [s.id for s in gb.students] == ["alice"]
            stamp = gb.db.execute(text("SELECT version_num FROM alembic_version")).scalar()
        assert stamp == alembic_head()          # nbgrader's `alembic heads` stamped it: class_grading's is the same
    finally:
        stopped = run("stop", tmp_path)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout, stopped.stderr
    assert not data.exists() and not (tmp_path / "server.json").exists()


def test_the_config_spares_only_the_end_of_a_process_the_garbage_collectors_passes():
    """nbgrader_config.py freezes the garbage collector's objects at exit (the last passes over nbgrader's
    imports cost an nbgrader command ~0.4 s CPU), and not before: a process that loads it while it runs (a
    test session, the benchmark, a class's workers) collects its garbage as ever."""
    code = ("import atexit, gc\n"
            "atexit.register(lambda: print('at exit', gc.get_freeze_count() > 0))\n"   # runs after the config's
            "from course_staff.course import config\n"
            "config()\n"
            "print('loaded', gc.get_freeze_count())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["loaded", "0", "at", "exit", "True"], out
