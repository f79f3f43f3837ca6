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
benchmarks/results/science.json (a full run) or artifacts/science.json (a partial one), with their
provenance as bench.json has it (command, commit, date, machine, load, threads) and the digests of the
files the run read (benchmarks/provenance.py: science_files, derived from the code), so that a later
change to any of them names the table as stale (a warning of `make test`, never a failure).

A run made elsewhere (a clone of another commit, a machine of its own) is written into the results
with the provenance of the tree that ran it, and a run under ATEN_CPU_CAPABILITY=default of the same
code beside it:

    python -m benchmarks.science --from-raw /tmp/sciN.json --ran-in /tmp/sciN [--beside /tmp/sciD.json]
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

from benchmarks import claims  # the ledger of the notebooks' sentences (it imports nothing of this module)
from benchmarks import criteria
from benchmarks import provenance  # the record of a run (it imports nothing of this module)
from benchmarks.criteria import Criterion, Experiment  # noqa: F401  -- re-exported for the experiment modules' readers

MODULES = ("benchmarks.science_lab11", "benchmarks.science_lab12", "benchmarks.science_lab13",
           "benchmarks.science_beyond")   # each defines EXPERIMENTS (and may define MEASURED)
SEEDS = 5
RESULTS = provenance.RESULTS / "science.json"
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


def measure(seeds, jobs):
    """The measurement lane: figures of time and cost (science_*.MEASURED), with the machine they were
    measured on. They back no criterion and decide nothing."""
    exps = experiments(attr="MEASURED")
    if not exps:
        return {}
    results = run(seeds, [e.name for e in exps], jobs, attr="MEASURED")
    return {"machine": provenance.machine(), "figures": {e.name: [r[e.name] for r in results] for e in exps}}


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
    lines += [""] + _summary_lines(data["summary"], _raw_machine(data)["machine"])
    beside = data.get(DEFAULT_LABEL)
    if beside:
        lines += ["", f"The same code under {DEFAULT_KERNELS} (torch's kernels without AVX):"]
        lines += [""] + _summary_lines(beside["summary"], _raw_machine(beside)["machine"])
    if "commit" in data:
        lines += ["", f"Made by `{data['command']}` at commit {data['commit']}, {data['date']}"
                      + (f"; {data['converted']}" if data.get("converted") else "") + "."]
        for v in data.get("verified", []):                          # benchmarks/science_verify.py
            claims_then = f" The ledger then: `{v['claims']}`." if v.get("claims") else ""   # it may have grown
            lines += ["", f"Verified at commit {v['commit']}, {v['date']} (`make science-verify`): {v['how']}."
                      + claims_then]
    else:
        lines += ["", "(This run records no command, commit, date or machine: it was written before science.json "
                      "recorded its provenance.)"]
    return "\n".join(lines)


def _summary_lines(summary, machine):
    """A run's closing lines as the README quotes them, then the machine that ran it (if recorded)."""
    return [f"`{line}`  " for line in summary] + ([f"({machine})"] if machine else [])


# ----------------------------------------------------------------------------- provenance
DEFAULT_KERNELS = "ATEN_CPU_CAPABILITY=default"      # what an older CPU runs: torch's kernels without AVX
DEFAULT_LABEL = "default kernels"                   # the key of such a run beside the native one


def provenance_record(ledger_tests, root=provenance.REPO):
    """What a results file records of the code a run ran: its commit, and the digests of every file it
    reads (provenance.science_files) of the tree at ``root`` (the clone that ran it)."""
    return {"commit": provenance.commit(root), "ledger_tests": list(ledger_tests),
            "fingerprint": provenance.fingerprint(RESULTS.name, root, ledger_tests),
            "inputs": provenance.inputs(RESULTS.name, root, ledger_tests)}


def machine_record():
    """The machine of a run made here (bench.json's fields)."""
    import torch
    return {"machine": provenance.machine(), "cpu_flags": provenance.cpu_flags(),
            "capability": provenance.capability(), "threads": torch.get_num_threads()}


def _raw_machine(raw):
    """The machine record of a raw output of an earlier writer (its "machine": cpu, cores, torch_threads,
    kernels, load). The CPU flags are read here only when this machine has the same CPU model."""
    m = raw.get("machine")
    if not isinstance(m, dict):                  # a record of this writer, or none
        return {k: raw.get(k) for k in ("machine", "cpu_flags", "capability", "threads")}
    here = provenance.cpu_model()
    flags = provenance.cpu_flags() if here and here == m.get("cpu") else None
    vector = "?" if flags is None else "AVX-512" if flags["avx512"] else "AVX2 only" if flags["avx2"] else "no AVX2"
    threads = m.get("torch_threads")
    return {"machine": f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores; torch {threads} thread"
                       f"{'s' if threads != 1 else ''}; CPU flags: {vector}, torch kernels {m.get('kernels', '?')}",
            "cpu_flags": flags, "capability": m.get("kernels"), "threads": threads}


def _raw_command(raw):
    """The command of a raw output that does not record it, rebuilt from what it does record."""
    if raw.get("command"):
        return raw["command"]
    parts = ["python -m benchmarks.science", f"--jobs {raw.get('jobs', 1)}"]
    parts += [f"--seeds {len(raw['seeds'])}"] if len(raw.get("seeds", [])) != SEEDS else []
    parts += [f"--short {raw['short']}"] if raw.get("short", 1) != 1 else []
    parts += ["--no-measure"] if not raw.get("measured") else []
    return " ".join(parts) + " (rebuilt from the raw file)"


def _raw_date(path, raw):
    if raw.get("date"):
        return raw["date"]
    from datetime import datetime, timezone
    when = datetime.fromtimestamp(Path(path).stat().st_mtime, timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M UTC") + " (when the raw file was written)"


def from_raw(raw_path, ran_in, beside=None, beside_ran_in=None, out=RESULTS):
    """Write ``out`` (results/science.json) from the raw output of a run made in the clone ``ran_in``
    (``python -m benchmarks.science --out raw.json`` there), with the provenance of that clone: its
    commit (as it is: another commit than this clone's is named so) and the digests of the files the
    run read there. ``beside``: the raw output of the same code under ATEN_CPU_CAPABILITY=default (made in
    ``beside_ran_in``, default ``ran_in``), recorded beside it. Returns the record written."""
    raw = json.loads(Path(raw_path).read_text())
    ledger = raw.get("ledger_tests") or raw.get("tests_passed", [])       # an earlier writer: the tests that passed
    record = {"command": _raw_command(raw), "date": _raw_date(raw_path, raw), **_raw_machine(raw),
              "load": raw["load"] if isinstance(raw.get("load"), list) else [None, raw.get("load")],
              **provenance_record(ledger, ran_in)}
    record["converted"] = (f"written into benchmarks/results by --from-raw at commit {provenance.commit()} "
                           f"on {provenance.today()}")
    record.update({k: v for k, v in raw.items() if k not in record and k != "machine"})
    if isinstance(raw.get("machine"), dict):
        record["machine as the run recorded it"] = raw["machine"]
    if beside:
        other = json.loads(Path(beside).read_text())
        other_ledger = other.get("ledger_tests") or other.get("tests_passed", [])
        where = beside_ran_in or ran_in
        theirs = provenance.inputs(RESULTS.name, where, ledger)
        if theirs != record["inputs"]:
            differ = sorted(f for f in set(theirs) | set(record["inputs"]) if theirs.get(f) != record["inputs"].get(f))
            raise SystemExit(f"{beside} ran other code than {raw_path} (files that differ: {', '.join(differ)})")
        kernels = _raw_machine(other)
        if str(kernels["capability"]).upper() != "DEFAULT":
            raise SystemExit(f"{beside} ran with torch kernels {kernels['capability']}, not under {DEFAULT_KERNELS}")
        record[DEFAULT_LABEL] = {
            "command": _raw_command(other), "commit": provenance.commit(where), "date": _raw_date(beside, other),
            **kernels, "load": other.get("load"), "wall_s": other.get("wall_s"), "summary": other["summary"],
            "tests_passed": sorted(other.get("tests_passed", [])), "ledger_tests": other_ledger,
            "criteria": [{k: c[k] for k in ("experiment", "name", "values", "met", "controls", "controls_fail")}
                         for c in other["criteria"]]}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(record, indent=1) + "\n")
    return record


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
    parser.add_argument("--from-raw", type=Path, metavar="RAW", help="run nothing: write results/science.json (or "
                        "--out) from the raw output RAW of a run made in the clone --ran-in, with that clone's provenance")
    parser.add_argument("--ran-in", type=Path, metavar="CLONE", help="the clone whose code made --from-raw's file")
    parser.add_argument("--beside", type=Path, metavar="RAW", help=f"the raw output of the same code under "
                        f"{DEFAULT_KERNELS}, recorded beside the run (a clone: --beside-ran-in, default --ran-in)")
    parser.add_argument("--beside-ran-in", type=Path, metavar="CLONE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
        return 0
    if args.from_raw:
        if not args.ran_in:
            parser.error("--from-raw needs --ran-in: the clone whose code ran it (its commit and files are recorded)")
        record = from_raw(args.from_raw, args.ran_in, args.beside, args.beside_ran_in, args.out or RESULTS)
        print(f"wrote {args.out or RESULTS}: a run at commit {record['commit']} ({record['date']})")
        print("\n".join(record["summary"]))
        if DEFAULT_LABEL in record:
            print(f"beside it, under {DEFAULT_KERNELS}:\n" + "\n".join(record[DEFAULT_LABEL]["summary"]))
        provenance.render_documents()
        return 0

    names = criteria_by_name()
    print(claims.summary_line(claims.backed(names=names)))   # before the run: quotes found, every backing named
    exps = experiments(args.only)
    seeds = list(range(args.seeds))
    ledger = claims.cited_tests()
    command = " ".join(["python -m benchmarks.science", *(argv if argv is not None else sys.argv[1:])])
    record = {"command": command, "date": provenance.today(), **machine_record(),
              **provenance_record(ledger)}                   # the code as it is when the run starts
    load_start = os.getloadavg()[0]
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
    tests = claims.run_tests(ledger)                        # the ledger's tests, run now
    states = claims.backed(names=names, met=met_on_every_seed(verdicts), tests_passed=tests)
    for c, ok in states if full else ():
        if not ok and not claims.states_a_figure(c):
            print(f"not backed: {c.where}: {c.quote[:90]!r} ({', '.join(c.backed_by)})")
    lines, ok = summary(verdicts, len(seeds))
    claim_line = claims.summary_line(states)
    lines, ok = [claim_line] + lines, ok and (claims.all_backed(states) or not full)
    out = args.out or (RESULTS if full else provenance.REPO / "artifacts" / "science.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.beside:
        print(f"warning: --beside is for --from-raw (a finished run); {args.beside} is not recorded")
    record.update({"load": [load_start, os.getloadavg()[0]], "seeds": seeds, "jobs": args.jobs, "short": args.short,
                   "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "summary": lines,
                   "criteria": [v.as_dict() for v in verdicts], "measured": measured,
                   "tests_passed": sorted(tests), "results": results})
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"raw figures: {out}")
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
