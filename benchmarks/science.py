"""The labs' lessons, rerun over 5 seeds with the reference solution, each against a negative control.

    python benchmarks/science.py                  # or: make science   (a few minutes, 2 processes)
    python benchmarks/science.py --seeds 1 --only lab12.kl_penalty     # iterate on one experiment

An *experiment* is a small unit: ``run_seed(seed) -> {measurement: float}`` and the *criteria* read
from those measurements. A criterion names one figure, a threshold, and one or more *negative
controls*: the same figure after the smallest change that removes what the criterion claims (the
controller switched off, the rankings shuffled, the KL penalty removed, ...). A criterion is worth
something only if its controls fail it, so the script checks both:

    claims: K/N backed                                      (benchmarks/claims.py: every sentence, its figure)
    controls: K/N criteria fail their negative control      (every control, every seed)
    science: K/5 seeds meet every criterion                 (exit 1 unless K >= 4 and every control fails)

The claims line comes first too, before the run: there it counts the ledger's quotes found in their
notebooks with every backing named; at the end, the claims whose criteria this run met.

Experiments live in modules listed in MODULES, each exposing ``EXPERIMENTS`` (a list of
``Experiment``); a new module joins the table with one line there. Every seed runs all experiments in
one worker process, so experiments of a lab can share that seed's expensive set-up (see
science_lab12.world). Raw figures go to benchmarks/results/science.json (a full run) or
artifacts/science.json (a partial one).
"""

import argparse
import dataclasses
import importlib
import json
import math
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent

MODULES = ("benchmarks.science_lab11", "benchmarks.science_lab12", "benchmarks.science_beyond")   # each defines EXPERIMENTS
SEEDS = 5
NEEDED = 4                                     # seeds that must meet every criterion
RESULTS = HERE / "results" / "science.json"


@dataclasses.dataclass(frozen=True)
class Criterion:
    """One claim, read from an experiment's measurements.

    ``key`` is the figure; the claim is met when it is >= threshold (``above``) or <= threshold.
    ``controls`` pairs a label with the key of the same figure under a negative control; each
    control must fail the threshold.
    """
    name: str
    claim: str
    key: str
    threshold: float
    controls: tuple                    # ((label, key), ...)
    above: bool = True
    fmt: str = "{:.3f}"

    def meets(self, value):
        return value >= self.threshold if self.above else value <= self.threshold

    def threshold_text(self):
        return f"{'>=' if self.above else '<='} {self.fmt.format(self.threshold)}"


@dataclasses.dataclass(frozen=True)
class Experiment:
    """``run_seed(seed) -> {key: float}`` and the criteria read from it.

    ``smoke``: cheap enough (well under a minute of CPU for one seed) for the smoke test in make test.
    """
    name: str
    run_seed: Callable
    criteria: tuple
    smoke: bool = False


def experiments(only=None, modules=MODULES):
    """Every Experiment of MODULES, in order (those whose name starts with one of ``only``, if given)."""
    found = [e for m in modules for e in importlib.import_module(m).EXPERIMENTS]
    if only:
        found = [e for e in found if any(e.name == o or e.name.startswith(o + ".") for o in only)]
    return found


# ----------------------------------------------------------------------------- running
def run_one_seed(seed, names=None):
    """{experiment name: measurements} of one seed, for the experiments named (all by default)."""
    out = {}
    for exp in experiments(names):
        t0 = time.process_time()
        figures = {k: float(v) for k, v in exp.run_seed(seed).items()}      # numpy scalars too
        out[exp.name] = dict(figures, cpu_s=time.process_time() - t0)
    return out


def _worker(args):
    seed, names = args
    return run_one_seed(seed, names)


def run(seeds, names=None, jobs=1):
    """[{experiment name: measurements} per seed]; seeds run in ``jobs`` forked processes."""
    tasks = [(seed, names) for seed in seeds]
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
    """The two closing lines, and whether the run passes."""
    failing = sum(v.controls_fail for v in verdicts)
    seeds_ok = sum(all(v.met[i] for v in verdicts) for i in range(n_seeds))
    lines = [f"controls: {failing}/{len(verdicts)} criteria fail their negative control",
             f"science: {seeds_ok}/{n_seeds} seeds meet every criterion"]
    ok = failing == len(verdicts) and seeds_ok >= min(NEEDED, n_seeds)
    return lines, ok


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
    parser.add_argument("--only", nargs="*", help="experiments (or labs: lab11, lab12) to run")
    parser.add_argument("--smoke", action="store_true", help="only the experiments of the smoke test")
    parser.add_argument("--markdown", action="store_true", help="print the README table from results/science.json")
    args = parser.parse_args(argv)
    from benchmarks import claims         # the ledger of the notebooks' sentences (it reads this module's criteria)
    if args.markdown:
        print(markdown())
        return 0

    print(claims.summary_line())          # before the run: every quote in its notebook, every backing named
    exps = [e for e in experiments(args.only) if e.smoke or not args.smoke]
    names = [e.name for e in exps]
    seeds = list(range(args.seeds))
    t0 = time.perf_counter()
    results = run(seeds, names, args.jobs)
    wall = time.perf_counter() - t0
    verdicts = judge(exps, results)
    print(table(verdicts, seeds))
    cpu = sum(m["cpu_s"] for r in results for m in r.values())
    load = os.getloadavg()[0]
    print(f"({wall:.0f} s wall, {cpu:.0f} s CPU in {args.jobs} process{'es' if args.jobs > 1 else ''}, "
          f"load average {load:.1f} on {os.cpu_count()} cores)")

    full = not args.only and not args.smoke and args.seeds == SEEDS
    out = RESULTS if full else HERE.parent / "artifacts" / "science.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines, ok = summary(verdicts, len(seeds))
    claim_line, claims_ok = claims.summary_line(verdicts, n_seeds=len(seeds), with_ok=True)
    lines, ok = [claim_line] + lines, ok and (claims_ok or not full)
    out.write_text(json.dumps({"seeds": seeds, "jobs": args.jobs, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
                               "load": load, "summary": lines, "criteria": [v.as_dict() for v in verdicts],
                               "results": results}, indent=1) + "\n")
    print(f"raw figures: {out.relative_to(HERE.parent)}")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    from benchmarks import science      # one copy of this module: the experiment modules import it too
    sys.exit(science.main())
