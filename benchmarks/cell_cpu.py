"""The CPU seconds of each code cell of Lab 12's Run All, in a fresh kernel, with its PPO runs apart.

    PYTHONPATH=. python -m benchmarks.cell_cpu [--lab lab12] [--top 15] [--repeats 3]

The reference solution runs in a fresh kernel with COURSE_WORKERS=1 (every run in the kernel itself);
a probe cell (benchmarks.bench's) after each code cell reads the kernel's CPU clock, and a cell put
after ``runs.use(train_rlhf)`` times each call of the training loop, so a cell's CPU splits into its
PPO runs and the rest. Figures: medians over ``--repeats`` kernels.
"""

import argparse
import copy
import os
import re
import statistics
import subprocess
import time

from benchmarks.bench import _PROBE, _run_cell, _stdout_text, parse_probe
from course_staff.solutions import notebook_path

_TIME_RUNS = """
import time as _t
_ppo_cpu = [0.0]
_ppo_fn = runs.train_fn
def _timed_run(*args, **kwargs):
    t0 = _t.process_time()
    try:
        return _ppo_fn(*args, **kwargs)
    finally:
        _ppo_cpu[0] += _t.process_time() - t0
runs.train_fn = _timed_run
"""
_PPO_PROBE = "print(f'ppo-probe {_ppo_cpu[0]!r}' if '_ppo_cpu' in globals() else 'ppo-probe 0.0')"


def _ppo(outputs):
    return float(re.findall(r"ppo-probe ([0-9.eE+-]+)", _stdout_text(outputs))[-1])


def cell_cpu(nb, cwd):
    """[(cell index, first line, CPU s, of which PPO s)] of one Run All in a fresh kernel."""
    from nbclient import NotebookClient

    from course_utils.kernel_client import SteadyKernelManager

    env = {k: v for k, v in os.environ.items() if k != "NBGRADER_EXECUTION"}
    env["COURSE_WORKERS"] = "1"
    client = NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=False,
                            kernel_manager_class=SteadyKernelManager, resources={"metadata": {"path": str(cwd)}})
    rows = []
    with client.setup_kernel(env=env, cwd=str(cwd), stderr=subprocess.DEVNULL):
        client.wait_for_reply(client.kc.kernel_info())
        _, cpu, kids = _run_cell(client, nb, _PROBE, parse_probe)
        ppo = 0.0
        for index, cell in enumerate(list(nb.cells)):
            if cell.cell_type != "code":
                continue
            client.execute_cell(cell, index)
            if "runs.use(train_rlhf)" in cell.source:
                _run_cell(client, nb, _TIME_RUNS, lambda o: None)
            _, cpu1, kids1 = _run_cell(client, nb, _PROBE, parse_probe)
            ppo1 = _run_cell(client, nb, _PPO_PROBE, _ppo)
            first = next((line for line in cell.source.splitlines() if line.strip() and not line.startswith("#")), "")
            rows.append((index, first.strip()[:70], cpu1 + kids1 - cpu - kids, ppo1 - ppo))
            cpu, kids, ppo = cpu1, kids1, ppo1
    return rows


def main():
    import nbformat

    ap = argparse.ArgumentParser()
    ap.add_argument("--lab", default="lab12")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    path = notebook_path(args.lab)
    samples = []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        samples.append(cell_cpu(nbformat.read(str(path), as_version=4), path.parent))
        print(f"(one Run All: {time.perf_counter() - t0:.1f} s wall)", flush=True)
    med = lambda i, k: statistics.median(s[i][k] for s in samples)          # noqa: E731
    rows = [(r[0], r[1], med(i, 2), med(i, 3)) for i, r in enumerate(samples[0])]
    print(f"{args.lab} Run All, CPU s per code cell (median of {args.repeats}; COURSE_WORKERS=1):")
    print(f"{'cell':>4} {'CPU':>7} {'PPO':>7} {'rest':>7}  source")
    for index, first, cpu, ppo in sorted(rows, key=lambda r: -(r[2] - r[3]))[:args.top]:
        print(f"{index:>4} {cpu:7.2f} {ppo:7.2f} {cpu - ppo:7.2f}  {first}")
    totals = [sum(r[2] for r in s) for s in samples]
    ppos = [sum(r[3] for r in s) for s in samples]
    rest = [t - p for t, p in zip(totals, ppos)]
    print(f"total {statistics.median(totals):.2f} s {[round(t, 2) for t in totals]}; PPO runs "
          f"{statistics.median(ppos):.2f} s; PPO-free {statistics.median(rest):.2f} s {[round(t, 2) for t in rest]}")


if __name__ == "__main__":
    main()
