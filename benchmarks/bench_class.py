"""Time the autograding of a class on a real PostgreSQL gradebook, with one grader then two, then two
again with the grading sandbox off (course_staff/grading/sandbox.py: what the sandbox costs).

    python -m benchmarks.bench_class            # or: make bench-class   (about 8 minutes on 2 cores)
    python -m benchmarks.bench_class --size 12  # a smaller class

The class is course_staff/testbed/classroom.py's: the lifecycle test's Lab 11 students repeated to ``size``. A
throwaway PostgreSQL server (course_staff.grading.postgres) gets one database per run; the lab is recorded
before the clock starts; each run is the whole `make autograde LAB=lab11 JOBS=<n>` command
(python -m course_staff.grading.class_grading), start-up included, on a fresh copy of the course. Then every
cell of every student is compared between the three gradebooks. The last line reads

    class: 40 submissions, JOBS=1 <s>s, JOBS=2 <s>s, speed-up <x>x, sandbox <x>x of unsandboxed, scores identical

(or ``scores differ``: with one grader, two, or without the sandbox). The raw figures go to benchmarks/results/bench_class.json (commit them with
the README table that quotes them: ``python -m benchmarks.bench_class --markdown`` renders it).
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

from benchmarks import provenance  # noqa: E402
from benchmarks.bench import commit, machine, today  # noqa: E402  (benchmarks/bench.py: the same notes on every figure)
from course_staff.testbed import harness as h  # noqa: E402
from course_staff.grading.postgres import Server  # noqa: E402
from course_staff.testbed import classroom  # noqa: E402

LAB = classroom.LAB
RESULTS = HERE / "results" / "bench_class.json"


RUNS = (("1", 1, "on"), ("2", 2, "on"), ("2, sandbox off", 2, "off"))   # (name, graders, SANDBOX)


def grade_class(server, tmp, roster, kinds, jobs, sandbox="on"):
    """A fresh course with the class in submitted/, graded with ``jobs`` graders (SANDBOX=``sandbox``);
    returns (seconds, cpu, scores, output)."""
    name = f"jobs{jobs}_sandbox_{sandbox}"
    course = h.course_copy(tmp / name, labs=())
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    for student, kind in roster.items():
        h._write(course / "submitted" / student / LAB / f"{LAB}.ipynb", kinds[kind][0])
        (course / "submitted" / student / LAB / "timestamp.txt").write_text(stamp)
    url = server.create_database(f"bench_{name}")
    env = {**h._env(), "NBGRADER_DB_URL": url, "SANDBOX": sandbox}
    command = [sys.executable, "-m", "course_staff.grading.class_grading"]
    subprocess.run(command + ["record", LAB], cwd=course, env=env, check=True, capture_output=True)
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run(command + ["autograde", LAB, "--jobs", str(jobs)], cwd=course, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    print(next((ln for ln in proc.stdout.splitlines() if ln.startswith(f"{LAB}: graded")), proc.stdout[-500:]))
    return seconds, cpu, classroom.gradebook_scores(url, roster), proc.stdout


def _children_cpu():
    """CPU seconds of every finished descendant the grader waited for: graders and unsandboxed kernels. A
    sandboxed kernel is reaped inside its own process namespace and is not counted: with the sandbox on,
    this is the graders' CPU alone (the sandbox's cost is read from the wall time, as both runs use JOBS=2)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def summary(data):
    """The last line: sizes, wall times, speed-up, whether the two gradebooks agree."""
    one, two = data["runs"]["1"]["seconds"], data["runs"]["2"]["seconds"]
    off = data["runs"].get("2, sandbox off", {}).get("seconds")
    cost = f", sandbox {two / off:.2f}x the wall time of unsandboxed" if off else ""
    return (f"class: {data['size']} submissions, JOBS=1 {one:.0f}s, JOBS=2 {two:.0f}s, speed-up "
            f"{one / two:.2f}x{cost}, scores {'identical' if data['identical'] else 'differ'}")


def markdown():
    """The table benchmarks/README.md quotes, rendered from the committed raw figures."""
    data = json.loads(RESULTS.read_text())
    sandboxed = any("sandbox off" in name for name in data["runs"])        # a file from before the sandbox: no
    cpu = "CPU time (graders; their kernels only without the sandbox)" if sandboxed else "CPU time (graders and kernels)"
    lines = [f"| graders | wall time | {cpu} | per submission | load average before, after |",
             "| --- | --- | --- | --- | --- |"]
    for jobs, run in data["runs"].items():
        lines.append(f"| JOBS={jobs} | {run['seconds']:.0f} s | {run['cpu']:.0f} s | "
                     f"{run['seconds'] / data['size']:.2f} s wall, {run['cpu'] / data['size']:.2f} s CPU | "
                     f"{run['load'][0]:.1f}, {run['load'][1]:.1f} |")
    return "\n".join(lines + ["", f"`{summary(data)}`", "",
                              f"* `{RESULTS.relative_to(HERE.parent)}`: {data['command']} at commit "
                              f"{data['commit']}; {data['machine']}"])


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=40)
    parser.add_argument("--markdown", action="store_true", help="print the README table from the raw figures")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
        return 0
    for line in provenance.stale_report():
        print(f"warning: {line}")
    kinds = classroom.distinct()
    roster = classroom.class_of(args.size, kinds)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start "
          f"(other work on the machine slows every figure)")
    server = Server.start()
    tmp = Path(tempfile.mkdtemp(prefix="bench-class-"))
    runs, scores = {}, {}
    try:
        for name, jobs, sandbox in RUNS:
            load_before = os.getloadavg()[0]
            seconds, cpu, scores[name], _ = grade_class(server, tmp, roster, kinds, jobs, sandbox)
            runs[name] = {"seconds": round(seconds, 1), "cpu": round(cpu, 1), "jobs": jobs,
                          "load": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
            print(f"JOBS={name}: {seconds:.1f} s wall for {len(roster)} submissions ({seconds / len(roster):.2f} s "
                  f"each); {cpu:.0f} CPU seconds in all ({cpu / len(roster):.2f} per submission); load "
                  f"average {os.getloadavg()[0]:.1f} after", flush=True)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    first = scores[RUNS[0][0]]
    same = len(first) == len(roster) and all(scores[name] == first for name, _, _ in RUNS)
    command = "python -m benchmarks.bench_class " + " ".join(argv if argv is not None else sys.argv[1:])
    data = {"command": command.strip(), "commit": commit(), "date": today(), "machine": machine(),
            "fingerprint": provenance.fingerprint("bench_class.json"), "inputs": provenance.inputs("bench_class.json"),
            "size": len(roster), "identical": same, "runs": runs}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")
    print(f"raw figures: {RESULTS.relative_to(HERE.parent)}")
    provenance.render_documents()
    print(summary(data))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
