"""The same verdicts on every machine: every numerical check decided under other CPU kernels and
thread counts.

Students run their visible checks on their own laptops (any CPU), TAs grade on a server, CI runs on
yet another machine: the last bits of float32 arithmetic differ between them (vector width, thread
count), and no verdict may depend on those bits. This test computes every verdict (tests/verdicts.py:
each lab's check cells on the solution and on every mistake and variant of the lab tables, the
one-seed science smoke run, the reference-curve drift check) in fresh processes, with torch's CPU
kernels as this machine picks them and as ``ATEN_CPU_CAPABILITY=default`` forces them (no vector
instructions), with 1 and with 4 threads, and asserts that

* every environment gives the expected verdicts (the solution passes every check cell, each mistake
  fails a check of its own row, each variant passes its row, each science criterion is met and
  fails its controls, the reference curve matches), and
* all environments give the same verdicts, cell by cell.

One process per CPU-kernel setting computes both of its thread counts (tests/verdicts.py: the kernels are
fixed when torch starts, the threads are not), each from a fresh load of the lab and the process's starting
random states. The grading part runs in all four environments (it is cheap: in-process, no nbgrader). The training
parts (science, reference), about 40 s of CPU each, run where they differ from what the suite already
computes: under ``default, 4 threads``. Their verdicts with this CPU's kernels and one thread, the other
corner, are tests/test_science.py's and tests/test_reference_curves.py's (the same runs, in pytest's own
process: native kernels, one thread), which hold them to the same expectations (every criterion met,
every control failing, no drift), so every environment is still held to the same verdicts without
training the same runs twice in one `make test`.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
NATIVE = "native"                     # ATEN_CPU_CAPABILITY unset: the kernels torch picks for this CPU
ENVIRONMENTS = {                      # name -> (ATEN_CPU_CAPABILITY, threads), and the parts it runs
    "native, 1 thread": ((NATIVE, 1), ("grading",)),      # science, reference: test_science, test_reference_curves
    "native, 4 threads": ((NATIVE, 4), ("grading",)),
    "default, 1 thread": (("default", 1), ("grading",)),
    "default, 4 threads": (("default", 4), ("grading", "science", "reference")),
}

pytestmark = pytest.mark.slow


def compute(capability, runs, out):
    """{threads: verdicts} of ``runs`` [(threads, parts)], computed in one process under ``capability``."""
    env = {k: v for k, v in os.environ.items() if k not in ("ATEN_CPU_CAPABILITY", "NBGRADER_EXECUTION")}
    if capability != NATIVE:
        env["ATEN_CPU_CAPABILITY"] = capability
    # idle OpenMP threads sleep instead of spinning: the same numbers (how a waiting thread waits changes no
    # sum), without four spinning threads burning the CPU that the other tests of the run share
    env["OMP_WAIT_POLICY"] = "PASSIVE"
    specs = [f"{threads}={','.join(parts)}" for threads, parts in runs]
    proc = subprocess.run([sys.executable, "-m", "tests.verdicts", "--out", str(out), "--run", *specs], cwd=TESTS.parent,
                          env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, f"verdicts under {capability} ({' '.join(specs)}) failed:\n{proc.stderr[-3000:]}"
    return {int(threads): v for threads, v in json.loads(Path(out).read_text()).items()}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    folder = tmp_path_factory.mktemp("verdicts")
    by_capability = {}
    for name, ((cap, threads), parts) in ENVIRONMENTS.items():
        by_capability.setdefault(cap, []).append((name, threads, parts))
    got = {}
    for i, (cap, envs) in enumerate(by_capability.items()):
        per_threads = compute(cap, [(threads, parts) for _, threads, parts in envs], folder / f"{i}.json")
        got.update({name: per_threads[threads] for name, threads, _ in envs})
    return {name: got[name] for name in ENVIRONMENTS}


def flat(tree, prefix=()):
    """{path: leaf} of a nested dict of verdicts."""
    if isinstance(tree, dict):
        return {k: v for key, sub in tree.items() for k, v in flat(sub, prefix + (key,)).items()}
    return {"/".join(map(str, prefix)): tree}


def expected_problems(verdicts):
    """What in one environment's verdicts is not what the course expects (empty when all is well)."""
    from course_staff.testbed import lab_tables
    problems = []
    for lab, students in verdicts.get("grading", {}).items():
        t = lab_tables.table(lab)
        problems += [f"{lab}: the solution fails {gid} ({'hidden' if vis else 'visible'} part)"
                     for gid, (vis, ok) in students["solution"].items() if not ok]
        for row, m in t.mistakes():
            own = dict(row.checks)
            if all(students[m.student][gid][1] for gid in own):
                problems.append(f"{lab}: mistake {m.name} passes every check of {row.name}")
            problems += [f"{lab}: mistake {m.name} of {row.name} also fails {gid}"
                         for gid, (_, ok) in students[m.student].items() if gid not in own and not ok]
        for row, v in t.variants():
            problems += [f"{lab}: correct variant {v.name} fails {gid}"
                         for gid, (_, ok) in students[v.student].items() if not ok]
    for name, v in verdicts.get("science", {}).items():
        if not v["met"]:
            problems.append(f"science: {name} is missed")
        problems += [f"science: {name} is met by its control {label}" for label, fails in v["controls fail"].items()
                     if not fails]
    reference = verdicts.get("reference", {})
    problems += [f"reference curves, default run: {p}" for p in reference.get("default run", [])]
    return problems


def test_every_environment_gives_the_expected_verdicts(matrix):
    problems = {name: expected_problems(v) for name, v in matrix.items()}
    bad = {name: p for name, p in problems.items() if p}
    assert not bad, "verdicts that are not what the course expects:\n" + "\n".join(
        f"  [{name}] {p}" for name, ps in bad.items() for p in ps)


def test_all_environments_give_the_same_verdicts(matrix):
    first_name, first = next(iter(matrix.items()))
    for name, v in matrix.items():
        assert v["environment"]["threads"] == ENVIRONMENTS[name][0][1], f"{name}: ran with {v['environment']}"
    base = {part: flat(first[part]) for part in ("grading", "science", "reference") if part in first}
    differ = []
    for name, v in list(matrix.items())[1:]:
        for part, leaves in base.items():
            if part not in v:
                continue
            other = flat(v[part])
            differ += [f"  {part}/{k}: {leaves.get(k)} under {first_name}, {other.get(k)} under {name}"
                       for k in sorted(set(leaves) | set(other)) if leaves.get(k) != other.get(k)]
    assert not differ, "a verdict depends on the CPU kernels or the thread count:\n" + "\n".join(differ)


def test_the_environments_really_differ(matrix):
    """The control: 'default' really switched the vector kernels off, 'native' ran with the kernels torch
    picks for this CPU when nothing forces them (on a CPU without vector kernels the two coincide, and the
    matrix still compares 1 and 4 threads), and the threads were set."""
    envs = {name: v["environment"] for name, v in matrix.items()}
    assert envs["default, 1 thread"]["capability"] == envs["default, 4 threads"]["capability"] == "DEFAULT"
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    picked = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                            env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert envs["native, 1 thread"]["capability"] == envs["native, 4 threads"]["capability"] == picked
    assert {e["threads"] for e in envs.values()} == {1, 4}
