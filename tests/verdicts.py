"""Every verdict the course's numerical checks reach, computed in this process: what the capability
matrix (tests/test_capability_matrix.py) compares between CPU kernels and thread counts.

    ATEN_CPU_CAPABILITY=default python -m tests.verdicts --out v.json --run 1=grading 4=grading,science

Three parts, each a dict of plain verdicts (booleans and short labels, never the numbers behind them):

* ``grading``: each lab's check cells, in-process (tests/in_process.py), on the instructor's solution
  and on every mistake and correct variant of the lab tables (course_staff/testbed/lab_tables). Per check cell: did
  its visible part pass (it printed "visible checks pass"), and did it score full points (hidden
  tests included).
* ``science``: the one-seed smoke run of ``make science`` (tests/test_science.py): per criterion,
  whether it is met and whether each negative control fails it.
* ``reference``: the drift check of Lab 12's reference curves (tests/test_reference_curves.py): the
  list of problems it finds in the notebook's default run (empty when the curve matches).

Threads: one process computes every thread count of its CPU kernels (the kernels are chosen when torch
starts, the thread count can change at any time): each ``--run THREADS=PARTS`` in turn, with that many
threads, from the random states the process started with and the lab's solution loaded again, so no run
reuses a number another thread count computed. The output: {THREADS: {"environment", PART: verdicts}}.
"""

import argparse
import contextlib
import json
from pathlib import Path

TESTS = Path(__file__).resolve().parent

import torch  # noqa: E402

import course_utils.tinylm  # noqa: E402,F401 -- sets one thread; each --run sets its own below
from tests import in_process  # noqa: E402
from course_utils.runtime import machine_record  # noqa: E402
from course_staff.testbed.lab_tables import table  # noqa: E402

from course_staff.testbed.harness import LABS  # noqa: E402
PARTS = ("grading", "science", "reference")


def environment():
    """What decides the last bits of the numbers here: CPU kernels, threads, torch build."""
    return machine_record()


# ----------------------------------------------------------------------------- grading
def grading_verdicts(lab, students=None):
    """{student: {check cell: [visible part passed, full points]}} of every check cell of the lab, for
    the solution and for each mistake and variant of its table (tests/in_process.py runs them), or only
    for the ``students`` named (e.g. ["solution"])."""
    full, t = table(lab).auto_marks(), table(lab)
    cases = {"solution": None, **{m.student: {row.solution: list(m.edits)} for row, m in t.mistakes() + t.variants()}}
    return {student: {gid: [bool(in_process.VISIBLE_PASSED.search(out)), points == full[gid]]
                      for gid, (points, out) in in_process.scores(lab, edits).items()}
            for student, edits in cases.items() if students is None or student in students}


# ----------------------------------------------------------------------------- science and reference
def science_verdicts():
    """{experiment.criterion: {"met": bool, "controls fail": {label: bool}}} of the smoke run, seed 0."""
    from benchmarks import science
    smoke = [e for e in science.experiments() if e.smoke]
    results = science.run([0], [e.name for e in smoke])
    return {f"{v.experiment}.{v.criterion.name}": {
                "met": bool(v.met[0]),
                "controls fail": {label: not v.criterion.meets(values[0]) for label, values in v.controls.items()}}
            for v in science.judge(smoke, results)}


def reference_verdicts():
    """{"default run": [problems]} of the reference-curve drift check on the notebook's default run."""
    from tests import reference_drift
    return {"default run": reference_drift.default_run_problems()}


def verdicts(parts=PARTS):
    out = {"environment": environment()}
    if "grading" in parts:
        out["grading"] = {lab: grading_verdicts(lab) for lab in LABS}
    if "science" in parts:
        out["science"] = science_verdicts()
    if "reference" in parts:
        out["reference"] = reference_verdicts()
    return out


@contextlib.contextmanager
def tolerances_scaled(factor, floats_only=False):
    """Every ``assert_close`` of the checks with its atol and rtol multiplied by ``factor`` (only the
    float tolerances, not the frequencies', with ``floats_only``): the margin test asks how far a
    tolerance can move before a verdict changes."""
    from course_utils import checks
    close = checks._close

    def scaled(got, expected, atol, rtol):
        if floats_only and atol >= checks.FREQUENCY_ATOL:
            return close(got, expected, atol, rtol)
        return close(got, expected, atol * factor, rtol * factor)
    checks._close = scaled
    try:
        yield
    finally:
        checks._close = close


def run_spec(text):
    """"4=grading,science" -> (4, ("grading", "science"))."""
    threads, _, parts = text.partition("=")
    parts = tuple(parts.split(",")) if parts else PARTS
    if not threads.isdigit() or int(threads) < 1 or not set(parts) <= set(PARTS):
        raise argparse.ArgumentTypeError(f"{text!r}: THREADS=PART,PART with PART among {', '.join(PARTS)}")
    return int(threads), parts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--run", nargs="+", type=run_spec, default=[(1, PARTS)], metavar="THREADS=PARTS",
                        help="thread count and the parts computed with it (default 1=" + ",".join(PARTS) + ")")
    parser.add_argument("--tolerance-scale", type=float, default=1.0,
                        help="multiply every check's tolerance (the control: 0.01 must change a verdict)")
    args = parser.parse_args(argv)
    import random

    import numpy as np
    start = random.getstate(), np.random.get_state(), torch.get_rng_state()
    result = {}
    for threads, parts in args.run:
        random.setstate(start[0])
        np.random.set_state(start[1])
        torch.set_rng_state(start[2])
        in_process.reference.cache_clear()            # the lab's namespace, loaded again with these threads
        torch.set_num_threads(threads)
        with tolerances_scaled(args.tolerance_scale):
            result[str(threads)] = verdicts(parts)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
