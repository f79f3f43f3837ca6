"""Every verdict the course's numerical checks reach, computed in this process: what the capability
matrix (tests/test_capability_matrix.py) compares between CPU kernels and thread counts.

    ATEN_CPU_CAPABILITY=default COURSE_THREADS=4 python -m tests.verdicts --out v.json [--only grading]

Three parts, each a dict of plain verdicts (booleans and short labels, never the numbers behind them):

* ``grading``: each lab's check cells, in-process (tests/in_process.py), on the instructor's solution
  and on every mistake and correct variant of the lab tables (tests/lab_tables). Per check cell: did
  its visible part pass (it printed "visible checks pass"), and did it score full points (hidden
  tests included).
* ``science``: the one-seed smoke run of ``make science`` (tests/test_science.py): per criterion,
  whether it is met and whether each negative control fails it.
* ``reference``: the drift check of Lab 12's reference curves (tests/test_reference_curves.py): the
  list of problems it finds in the notebook's default run (empty when the curve matches).

Threads: course_utils.tinylm sets one torch thread when imported; COURSE_THREADS (default 1) is set
after that import, so the whole computation runs with that many.
"""

import argparse
import contextlib
import json
import os
from pathlib import Path

TESTS = Path(__file__).resolve().parent

import torch  # noqa: E402

import course_utils.tinylm  # noqa: E402,F401 -- sets one thread; COURSE_THREADS overrides it below
from tests import in_process  # noqa: E402
from course_utils.runtime import machine_record  # noqa: E402
from tests.lab_tables import table  # noqa: E402

from tests.harness import LABS  # noqa: E402
PARTS = ("grading", "science", "reference")


def environment():
    """What decides the last bits of the numbers here: CPU kernels, threads, torch build."""
    return machine_record()


# ----------------------------------------------------------------------------- grading
def grading_verdicts(lab):
    """{student: {check cell: [visible part passed, full points]}} of every check cell of the lab, for
    the solution and for each mistake and variant of its table (tests/in_process.py runs them)."""
    full, t = table(lab).auto_marks(), table(lab)
    cases = {"solution": None, **{m.student: {row.solution: list(m.edits)} for row, m in t.mistakes() + t.variants()}}
    return {student: {gid: [bool(in_process.VISIBLE_PASSED.search(out)), points == full[gid]]
                      for gid, (points, out) in in_process.scores(lab, edits).items()}
            for student, edits in cases.items()}


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


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="*", choices=PARTS, default=list(PARTS))
    parser.add_argument("--tolerance-scale", type=float, default=1.0,
                        help="multiply every check's tolerance (the control: 0.01 must change a verdict)")
    args = parser.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("COURSE_THREADS", "1")))
    with tolerances_scaled(args.tolerance_scale):
        result = verdicts(args.only)
    args.out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
