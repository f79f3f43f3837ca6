"""Every verdict the course's numerical checks reach, computed in this process: what the capability
matrix (tests/test_capability_matrix.py) compares between CPU kernels and thread counts.

    ATEN_CPU_CAPABILITY=default COURSE_THREADS=4 python tests/verdicts.py --out v.json [--only grading]

Three parts, each a dict of plain verdicts (booleans and short labels, never the numbers behind them):

* ``grading``: each lab's check cells, in-process, on the instructor's solution and on every mistake
  and correct variant of the lab tables (tests/lab_tables). A mutant's solution cell is executed in a
  copy of the lab's namespace (``course_staff.solutions.load_lab``), then its row's check cells run as
  nbgrader runs them (NBGRADER_EXECUTION set). Per check cell: did its visible part pass (it printed
  "visible checks pass"), and did the whole cell pass (hidden tests included). The solution runs
  every check cell of the lab.
* ``science``: the one-seed smoke run of ``make science`` (tests/test_science.py): per criterion,
  whether it is met and whether each negative control fails it.
* ``reference``: the drift check of Lab 12's reference curves (tests/test_reference_curves.py): the
  list of problems it finds in the notebook's default run (empty when the curve matches); and
  whether the Beyond PPO cache is current.

Threads: course_utils.tinylm sets one torch thread when imported; COURSE_THREADS (default 1) is set
after that import, so the whole computation runs with that many.
"""

import argparse
import contextlib
import io
import json
import os
import re
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS.parent / "benchmarks"))

import nbformat  # noqa: E402
import torch  # noqa: E402

import course_utils.tinylm  # noqa: E402,F401 -- sets one thread; COURSE_THREADS overrides it below
from course_staff.harness import solution_text  # noqa: E402
from course_staff.solutions import load_lab, notebook_path  # noqa: E402
from course_utils.runtime import machine_record  # noqa: E402
from lab_tables import table  # noqa: E402

LABS = ("lab11", "lab12")
PARTS = ("grading", "science", "reference")
VISIBLE_PASSED = re.compile(r"visible checks pass")


def environment():
    """What decides the last bits of the numbers here: CPU kernels, threads, torch build."""
    return machine_record()


# ----------------------------------------------------------------------------- grading
def check_cells(lab):
    """{grade_id: source} of every autograded code cell of the SOURCE notebook, in notebook order."""
    nb = nbformat.read(str(notebook_path(lab)), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")}


def run_check(namespace, source):
    """[visible part passed, whole cell passed] of one check cell run in a copy of ``namespace``."""
    out = io.StringIO()
    passed = True
    saved = os.environ.get("NBGRADER_EXECUTION")
    os.environ["NBGRADER_EXECUTION"] = "autograde"
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            exec(compile(source, "<check cell>", "exec"), dict(namespace))   # noqa: S102 -- the course's own checks
    except Exception:  # noqa: BLE001 -- any failure of a check cell costs its points
        passed = False
    finally:
        if saved is None:
            os.environ.pop("NBGRADER_EXECUTION", None)
        else:
            os.environ["NBGRADER_EXECUTION"] = saved
    return [bool(VISIBLE_PASSED.search(out.getvalue())), passed]


def mutated(lab, row, mistake):
    """The row's solution cell with the mistake's edits spliced in (as tests/test_mutants.py does)."""
    text = solution_text(lab)[row.solution]
    for old, new in mistake.edits:
        assert old in text, f"{lab}/{row.solution}: {old!r} does not occur in the solution"
        text = text.replace(old, new)
    return text


def grading_verdicts(lab):
    """{student: {check cell: [visible passed, cell passed]}}: the solution on every check cell, each
    mistake and variant on its own row's check cells."""
    namespace, cells, lab_table = load_lab(lab), check_cells(lab), table(lab)
    verdicts = {"solution": {gid: run_check(namespace, src) for gid, src in cells.items()}}
    for row, m in lab_table.mistakes() + lab_table.variants():
        ns = dict(namespace)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                exec(compile(mutated(lab, row, m), f"<{m.student}>", "exec"), ns)   # noqa: S102
        except Exception:  # noqa: BLE001 -- a cell that does not even run fails every check of its row
            verdicts[m.student] = {gid: [False, False] for gid, _ in row.checks}
            continue
        verdicts[m.student] = {gid: run_check(ns, cells[gid]) for gid, _ in row.checks}
    return verdicts


# ----------------------------------------------------------------------------- science and reference
def science_verdicts():
    """{experiment.criterion: {"met": bool, "controls fail": {label: bool}}} of the smoke run, seed 0."""
    import science
    smoke = [e for e in science.experiments() if e.smoke]
    results = science.run([0], [e.name for e in smoke])
    return {f"{v.experiment}.{v.criterion.name}": {
                "met": bool(v.met[0]),
                "controls fail": {label: not v.criterion.meets(values[0]) for label, values in v.controls.items()}}
            for v in science.judge(smoke, results)}


def reference_verdicts():
    """{"default run": [problems]} of the reference-curve drift check on the notebook's default run,
    and whether the Beyond PPO cache is current (its fingerprint: code, checkpoint and torch version)."""
    import reference_drift
    from course_staff.beyond_results import load_cache
    return {"default run": reference_drift.default_run_problems(), "beyond ppo cache": load_cache() is not None}


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
