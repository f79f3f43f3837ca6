"""Time the autograding of a class on a real PostgreSQL gradebook, with one grader then two.

    python benchmarks/bench_class.py            # or: make bench-class   (about 8 minutes on 2 cores)
    python benchmarks/bench_class.py --size 12  # a smaller class

The class is tests/classroom.py's: the lifecycle test's Lab 11 students repeated to ``size``. A
throwaway PostgreSQL server (course_staff.postgres) gets one database per run; the lab is recorded
before the clock starts; each run is the whole `make autograde LAB=lab11 JOBS=<n>` command
(python -m course_staff.class_grading), start-up included, on a fresh copy of the course. Then every
cell of every student is compared between the two gradebooks. The last line reads

    class: 40 submissions, JOBS=1 <s>s, JOBS=2 <s>s, speed-up <x>x, scores identical

(or ``scores differ``). Raw figures go to artifacts/bench_class.json.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))            # course_staff, from a checkout
sys.path.insert(0, str(HERE.parent / "tests"))  # the simulated students

from course_staff import harness as h  # noqa: E402
from course_staff.postgres import Server  # noqa: E402
import classroom  # noqa: E402

LAB = classroom.LAB


def grade_class(server, tmp, roster, kinds, jobs):
    """A fresh course with the class in submitted/, graded with ``jobs`` graders; returns
    (seconds, scores, output)."""
    course = h.course_copy(tmp / f"jobs{jobs}", labs=())
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    for student, kind in roster.items():
        h._write(course / "submitted" / student / LAB / f"{LAB}.ipynb", kinds[kind][0])
        (course / "submitted" / student / LAB / "timestamp.txt").write_text(stamp)
    url = server.create_database(f"bench_jobs{jobs}")
    env = {**h._env(), "NBGRADER_DB_URL": url}
    command = [sys.executable, "-m", "course_staff.class_grading"]
    subprocess.run(command + ["record", LAB], cwd=course, env=env, check=True, capture_output=True)
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(command + ["autograde", LAB, "--jobs", str(jobs)], cwd=course, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    print(next((ln for ln in proc.stdout.splitlines() if ln.startswith(f"{LAB}: graded")), proc.stdout[-500:]))
    return seconds, cpu, classroom.gradebook_scores(url, roster), proc.stdout


def _children_cpu():
    """CPU seconds of every finished descendant (graders and their kernels are waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=40)
    args = parser.parse_args(argv)
    kinds = classroom.distinct()
    roster = classroom.class_of(args.size, kinds)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start "
          f"(other work on the machine slows every figure)")
    server = Server.start()
    tmp = Path(tempfile.mkdtemp(prefix="bench-class-"))
    try:
        runs = {}
        for jobs in (1, 2):
            seconds, cpu, scores, out = grade_class(server, tmp, roster, kinds, jobs)
            runs[jobs] = {"seconds": round(seconds, 1), "cpu": round(cpu, 1), "scores": scores,
                          "load_average_after": os.getloadavg()[0]}
            print(f"JOBS={jobs}: {seconds:.1f} s wall for {len(roster)} submissions ({seconds / len(roster):.2f} s "
                  f"each); {cpu:.0f} CPU seconds in all ({cpu / len(roster):.2f} per submission); load "
                  f"average {os.getloadavg()[0]:.1f} after", flush=True)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    same = runs[1]["scores"] == runs[2]["scores"] and len(runs[1]["scores"]) == len(roster)
    one, two = runs[1]["seconds"], runs[2]["seconds"]
    (HERE.parent / "artifacts").mkdir(exist_ok=True)
    (HERE.parent / "artifacts" / "bench_class.json").write_text(json.dumps(
        {"size": len(roster), "identical": same,
         "runs": {jobs: {k: v for k, v in run.items() if k != "scores"} for jobs, run in runs.items()}},
        indent=1))
    print(f"class: {len(roster)} submissions, JOBS=1 {one:.0f}s, JOBS=2 {two:.0f}s, "
          f"speed-up {one / two:.2f}x, scores {'identical' if same else 'differ'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
