"""The labs' lessons, rerun over 5 seeds with the reference solution, each against a negative control.

    python -m benchmarks.science                  # or: make science   (a few minutes, 2 processes)
    python -m benchmarks.science --seeds 1 --only lab12.kl_penalty     # iterate on one experiment

An *experiment* (benchmarks/criteria.py) is ``run_seed(seed) -> {figure: float}`` and the *criteria*
read from those figures. A criterion names one figure, a threshold that follows from the sentence it
backs, and one or more *negative controls*: the same figure after an ablation of exactly the
mechanism the sentence names (the controller's sign flipped, the rankings shuffled, the KL penalty
at another beta, ...). A criterion is worth something only if its controls fail it, so the script
checks both:

    claims: K/N backed                                      (benchmarks/claims.py: every sentence, its figure)
    controls: K/N criteria fail their negative control      (every control, every seed)
    science: K/5 seeds meet every criterion                 (exit 1 unless K = 5, every control fails, K = N)

The claims line comes first too, before the run (quotes found, every backing named); at the end a
claim is backed when every criterion it names was met on every seed with its controls failing and
every test it names ran and passed in this run (claims.run_tests).

Figures of time and cost (``MEASURED`` of an experiment module: GRPO's CPU time against PPO's) are
the measurement lane: printed and stored with the machine they were measured on, never a criterion.

Experiments live in modules listed in MODULES, each exposing ``EXPERIMENTS`` (a list of
``Experiment``); a new module joins the table with one line there. Every seed runs all experiments in
one worker process, so experiments of a lab can share that seed's expensive set-up (see
science_lab12.world). ``--short 4`` divides every training run's length by 4: the smoke runs of
tests/test_science.py, where verdicts are not decided. Raw figures go to
benchmarks/results/science.json (a full run) or artifacts/science.json (a partial one).
"""

import argparse
import dataclasses
import importlib
import json
import math
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

from benchmarks import claims  # noqa: E402  -- the ledger of the notebooks' sentences (it imports nothing of this module)
from benchmarks import criteria  # noqa: E402
from benchmarks.criteria import Criterion, Experiment  # noqa: E402,F401  -- re-exported for the experiment modules' readers

MODULES = ("benchmarks.science_lab11", "benchmarks.science_lab12", "benchmarks.science_lab13",
           "benchmarks.science_beyond")   # each defines EXPERIMENTS (and may define MEASURED)
SEEDS = 5
RESULTS = HERE / "results" / "science.json"
SMOKE_SHORT = 4                          # a smoke run (tests/test_science.py) divides every run's length by this


def experiments(only=None, modules=MODULES, attr="EXPERIMENTS"):
    """Every Experiment of MODULES, in order (those whose name starts with one of ``only``, if given)."""
    found = [e for m in modules for e in getattr(importlib.import_module(m), attr, [])]
    if only:
        found = [e for e in found if any(e.name == o or e.name.startswith(o + ".") for o in only)]
    return found


def criteria_by_name():
    """{"experiment.criterion": Criterion} of every experiment."""
    return {f"{e.name}.{c.name}": c for e in experiments() for c in e.criteria}


# ----------------------------------------------------------------------------- running
def run_one_seed(seed, names=None, attr="EXPERIMENTS"):
    """{experiment name: figures (and their "inputs")} of one seed, for the experiments named (all by default)."""
    out = {}
    for exp in experiments(names, attr=attr):
        t0 = time.process_time()
        raw = exp.run_seed(seed)
        figures = {k: float(v) for k, v in raw.items() if k != "inputs"}      # numpy scalars too
        out[exp.name] = dict(figures, cpu_s=time.process_time() - t0, inputs=raw.get("inputs", {}))
    return out


def _worker(args):
    seed, names, short, attr = args
    criteria.SHORT = short
    return run_one_seed(seed, names, attr)


def run(seeds, names=None, jobs=1, short=1, attr="EXPERIMENTS"):
    """[{experiment name: figures} per seed]; seeds run in ``jobs`` forked processes. ``short``: divide
    every training run's length by this (criteria.SHORT; 1 = full runs)."""
    tasks = [(seed, names, short, attr) for seed in seeds]
    if jobs > 1 and len(tasks) > 1:
        with mp.get_context("fork").Pool(min(jobs, len(tasks))) as pool:
            return pool.map(_worker, tasks, chunksize=1)
    return [_worker(t) for t in tasks]


# ----------------------------------------------------------------------------- judging
@dataclasses.dataclass
class Verdict:
    """One criterion over the seeds: its values, whether each seed met it, and each control's values."""
    experiment: str
    criterion: Criterion
    values: list
    met: list
    controls: dict                     # {label: [value per seed]}

    @property
    def controls_fail(self):
        """True when every control fails the criterion on every seed."""
        return all(not self.criterion.meets(v) for vals in self.controls.values() for v in vals)

    def as_dict(self):
        c = self.criterion
        return {"experiment": self.experiment, "name": c.name, "claim": c.claim, "fmt": c.fmt,
                "threshold": c.threshold_text(), "values": self.values, "met": self.met,
                "controls": {label: {"values": vals, "fails": [not c.meets(x) for x in vals]}
                             for label, vals in self.controls.items()},
                "controls_fail": self.controls_fail}


def judge(exps, results):
    """[Verdict] of every criterion of ``exps`` over ``results`` (one dict per seed)."""
    verdicts = []
    for exp in exps:
        for c in exp.criteria:
            values = [r[exp.name][c.key] for r in results]
            controls = {label: [r[exp.name][key] for r in results] for label, key in c.controls}
            verdicts.append(Verdict(exp.name, c, values, [c.meets(v) for v in values], controls))
    return verdicts


NAME_WIDTH, CELL_WIDTH = 64, 9


def _cell(c, v, bad):
    text = "nan" if math.isnan(v) else c.fmt.format(v)
    return f"{text + ('!' if bad else ' '):>{CELL_WIDTH}}"


def table(verdicts, seeds):
    """Per experiment, a row per criterion (its value per seed; ! = missed) and under it a row per
    control (the same figure under the control; ! = the control meets the criterion, which it must not)."""
    head = f"{'experiment / criterion: claim':<{NAME_WIDTH}} {'threshold':>10} " + "".join(
        f"{'seed ' + str(s):>{CELL_WIDTH}}" for s in seeds)
    lines = [head, "-" * (len(head) + 12)]
    experiment = None
    for v in verdicts:
        c = v.criterion
        if v.experiment != experiment:
            experiment = v.experiment
            lines.append(experiment)
        cells = "".join(_cell(c, x, not ok) for x, ok in zip(v.values, v.met))
        name = f"  {c.name:<14} {c.claim}"
        lines.append(f"{name[:NAME_WIDTH]:<{NAME_WIDTH}} {c.threshold_text():>10} {cells}  met {sum(v.met)}/{len(v.met)}")
        for label, vals in v.controls.items():
            fails = [not c.meets(x) for x in vals]
            cells = "".join(_cell(c, x, not f) for x, f in zip(vals, fails))
            name = f"{'':17}control: {label}"
            lines.append(f"{name[:NAME_WIDTH]:<{NAME_WIDTH}} {'':>10} {cells}  fails {sum(fails)}/{len(fails)}")
    lines.append("! on a criterion: that seed misses it; ! on a control: that control meets the criterion "
                 "(it should fail)")
    return "\n".join(lines)


def summary(verdicts, n_seeds):
    """The two closing lines, and whether the run passes: every control fails, every seed meets every criterion."""
    failing = sum(v.controls_fail for v in verdicts)
    seeds_ok = sum(all(v.met[i] for v in verdicts) for i in range(n_seeds))
    lines = [f"controls: {failing}/{len(verdicts)} criteria fail their negative control",
             f"science: {seeds_ok}/{n_seeds} seeds meet every criterion"]
    return lines, failing == len(verdicts) and seeds_ok == n_seeds


def met_on_every_seed(verdicts):
    """{"experiment.criterion"} of the criteria met on every seed of the run, every control failing."""
    return {f"{v.experiment}.{v.criterion.name}" for v in verdicts if all(v.met) and v.controls_fail}


def machine():
    """The machine a measured figure was measured on: CPU model, cores, threads, kernels, load."""
    import torch
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "kernels": torch.backends.cpu.get_cpu_capability(), "load": round(os.getloadavg()[0], 1)}


def measure(seeds, jobs):
    """The measurement lane: figures of time and cost (science_*.MEASURED), with the machine they were
    measured on. They back no criterion and decide nothing."""
    exps = experiments(attr="MEASURED")
    if not exps:
        return {}
    results = run(seeds, [e.name for e in exps], jobs, attr="MEASURED")
    return {"machine": machine(), "figures": {e.name: [r[e.name] for r in results] for e in exps}}


def markdown(path=RESULTS):
    """The table benchmarks/README.md quotes: each criterion and its controls over the seeds (the
    range of their figures), rendered from the committed raw figures."""
    data = json.loads(Path(path).read_text())
    n = len(data["seeds"])
    lines = ["| criterion | threshold | figures over the seeds | met | negative control | its figures | fails |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    span = lambda fmt, vals: (fmt.format(min(vals)) if fmt.format(min(vals)) == fmt.format(max(vals))  # noqa: E731
                              else f"{fmt.format(min(vals))} .. {fmt.format(max(vals))}")
    for c in data["criteria"]:
        thr, fmt = c["threshold"], c["fmt"]
        first = True
        for label, control in c["controls"].items():
            claim = c["claim"].replace("|", "\\|")                   # a pipe would end the cell
            left = (f"| `{c['experiment']}.{c['name']}`: {claim} | {thr} | {span(fmt, c['values'])} | "
                    f"{sum(c['met'])}/{n} |") if first else "| | | | |"
            lines.append(f"{left} {label} | {span(fmt, control['values'])} | {sum(control['fails'])}/{n} |")
            first = False
    lines += [""] + [f"`{line}`  " for line in data["summary"][:-1]] + [f"`{data['summary'][-1]}`"]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main
def main(argv=None):
    parser = argparse.ArgumentParser(description="the labs' lessons over 5 seeds, each against a negative control")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes, one seed each (default 2)")
    parser.add_argument("--seeds", type=int, default=SEEDS, help=f"number of seeds (default {SEEDS})")
    parser.add_argument("--only", nargs="*", help="experiments (or labs: lab11, lab12, lab13) to run")
    parser.add_argument("--short", type=int, default=1, help="divide every run's length by this (smoke: 4)")
    parser.add_argument("--no-measure", action="store_true", help="skip the measurement lane (CPU-time figures)")
    parser.add_argument("--out", type=Path, help="where the raw figures go (default: results/science.json after a "
                        "full run, artifacts/science.json after a partial one)")
    parser.add_argument("--markdown", action="store_true", help="print the README table from results/science.json")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
        return 0

    names = criteria_by_name()
    print(claims.summary_line(claims.backed(names=names)))   # before the run: quotes found, every backing named
    exps = experiments(args.only)
    seeds = list(range(args.seeds))
    t0 = time.perf_counter()
    results = run(seeds, [e.name for e in exps], args.jobs, args.short)
    wall = time.perf_counter() - t0
    verdicts = judge(exps, results)
    print(table(verdicts, seeds))
    cpu = sum(m["cpu_s"] for r in results for m in r.values())
    load = os.getloadavg()[0]
    print(f"({wall:.0f} s wall, {cpu:.0f} s CPU in {args.jobs} process{'es' if args.jobs > 1 else ''}, "
          f"load average {load:.1f} on {os.cpu_count()} cores)")

    full = not args.only and args.short == 1 and args.seeds == SEEDS
    measured = {} if args.no_measure or not full else measure(seeds, args.jobs)
    for name, per_seed in measured.get("figures", {}).items():
        print(f"measured (not a criterion): {name}: " + ", ".join(
            f"{k} {min(r[k] for r in per_seed):.3f}..{max(r[k] for r in per_seed):.3f}"
            for k in per_seed[0] if k not in ("inputs", "cpu_s")) + f" on {measured['machine']}")
    tests = claims.run_tests(claims.cited_tests())          # the ledger's tests, run now
    states = claims.backed(names=names, met=met_on_every_seed(verdicts), tests_passed=tests)
    for c, ok in states if full else ():
        if not ok and not all(claims.is_measured(b) for b in c.backed_by):
            print(f"not backed: {c.where}: {c.quote[:90]!r} ({', '.join(c.backed_by)})")
    lines, ok = summary(verdicts, len(seeds))
    claim_line = claims.summary_line(states)
    lines, ok = [claim_line] + lines, ok and (all(s for _, s in states) or not full)
    out = args.out or (RESULTS if full else HERE.parent / "artifacts" / "science.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"seeds": seeds, "jobs": args.jobs, "short": args.short, "wall_s": round(wall, 1),
                               "cpu_s": round(cpu, 1), "load": load, "machine": machine(), "summary": lines,
                               "criteria": [v.as_dict() for v in verdicts], "measured": measured,
                               "tests_passed": sorted(tests), "results": results}, indent=1) + "\n")
    print(f"raw figures: {out}")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
