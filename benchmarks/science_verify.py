"""Verify that the committed science table still holds for the code as it is, without rerunning it.

    python -m benchmarks.science_verify            # or: make science-verify   (one seed, two processes, ~5 min)

benchmarks/results/science.json is named stale once any file it read changes (benchmarks/provenance.py),
including a change that moves no number (a refactor, a view, a comment in code). Rerunning all five seeds
in both settings costs ~40 minutes of a quiet machine. Instead, this reruns seed 0 of every experiment,
full length, in two processes at once: natively and under ATEN_CPU_CAPABILITY=default, and compares every
figure with the table's own for that seed, bit for bit (natively: every figure of every experiment; under
the default kernels: every criterion's and control's figure the table recorded beside it). Only when both
are identical, on a machine with the kernels the table was made with, is the table re-stamped: the digests
of the files it read become the current tree's, and a "verified" entry records the commit, date, machine
and the number of figures compared. Otherwise nothing is written and the figures that moved are named
(then the table needs `make science`).

Seed 0 identical in every experiment means the code computes what it computed when the table was made, on
every path seed 0 takes; that is the evidence, not a proof for the other four seeds, and the record says so.
The claims ledger is judged again with the current quotes (benchmarks/claims.py): from the table's verdicts
for its criteria, and from its tests run now, as `make science` runs them (the ledger may cite a new test, or
a test file may have changed; they are exact and take seconds), and the tests that passed are recorded.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import claims, provenance, science

SEED = 0


def rerun(seed, out, default_kernels=False):
    """Start seed ``seed`` of every experiment (full length) in a process of its own, writing its figures
    to ``out``; under ATEN_CPU_CAPABILITY=default if ``default_kernels``. Returns the Popen."""
    env = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    if default_kernels:
        env["ATEN_CPU_CAPABILITY"] = "default"
    code = (f"import json, sys; from benchmarks import science; "
            f"json.dump(science.run([{seed}])[0], open(sys.argv[1], 'w'))")
    return subprocess.Popen([sys.executable, "-c", code, str(out)], cwd=provenance.REPO, env=env)


def same(a, b):
    """Equal bit for bit as JSON keeps them (nan equals nan: a figure that was nan is nan again)."""
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return both_nan or a == b


def native_differences(record, figures, seed=SEED):
    """["experiment.figure: recorded -> now"] of every native figure of ``seed`` that differs (CPU
    seconds aside), experiments missing or new included."""
    then = record["results"][record["seeds"].index(seed)]
    out = []
    for exp in sorted(set(then) | set(figures)):
        a, b = then.get(exp, {}), figures.get(exp, {})
        for key in sorted((set(a) | set(b)) - {"cpu_s"}):
            if not same(a.get(key), b.get(key)):
                out.append(f"{exp}.{key}: {a.get(key, '(none)')!r} -> {b.get(key, '(none)')!r}")
    return out


def default_differences(record, figures, seed=SEED):
    """The same for the run under default kernels recorded beside the table: each criterion's figure
    and each control's figure at ``seed``."""
    beside = record[science.DEFAULT_LABEL]
    i = beside.get("seeds", record["seeds"]).index(seed)
    by_name = science.criteria_by_name()
    out = []
    for c in beside["criteria"]:
        name = f"{c['experiment']}.{c['name']}"
        crit = by_name.get(name)
        if crit is None:
            out.append(f"{name}: no longer a criterion")
            continue
        keys = {"value": crit.key, **{label: key for label, key in crit.controls}}
        recorded = {"value": c["values"][i], **{label: v["values"][i] for label, v in c["controls"].items()}}
        for label in sorted(set(keys) | set(recorded)):
            now = figures.get(c["experiment"], {}).get(keys[label]) if label in keys else None
            if not same(now, recorded.get(label)):
                out.append(f"{name} ({label}): {recorded.get(label)!r} -> {now!r}")
    return out


def claims_now(record, tests_passed):
    """The claims ledger judged again with the current quotes, from the table's verdicts and the ledger's
    tests that passed now (``tests_passed``): (summary line, every claim backed)."""
    met = {f"{c['experiment']}.{c['name']}" for c in record["criteria"] if all(c["met"]) and c["controls_fail"]}
    states = claims.backed(names=science.criteria_by_name(), met=met, tests_passed=tests_passed)
    return claims.summary_line(states), claims.all_backed(states)


def verify(path=science.RESULTS, seed=SEED):
    """Rerun ``seed`` in both settings and compare (see the module's docstring). Returns (ok, lines)."""
    record = json.loads(Path(path).read_text())
    if str(record.get("capability")).upper() != str(provenance.capability()).upper():
        return False, [f"the table was made with torch kernels {record.get('capability')}, this machine runs "
                       f"{provenance.capability()}: its figures cannot be compared here bit for bit"]
    stamp = science.provenance_record(claims.cited_tests())          # the code as it is when the reruns start
    with tempfile.TemporaryDirectory() as tmp:
        outs = {kind: Path(tmp) / f"{kind}.json" for kind in ("native", "default")}
        procs = {kind: rerun(seed, out, kind == "default") for kind, out in outs.items()}
        if any(p.wait() for p in procs.values()):
            return False, ["a rerun failed (its error is above)"]
        native, default = (json.loads(outs[k].read_text()) for k in ("native", "default"))
    differ = native_differences(record, native, seed) + [
        f"(default kernels) {line}" for line in default_differences(record, default, seed)]
    n = sum(len([k for k in v if k != "cpu_s"]) for v in native.values())
    if differ:
        return False, [f"{len(differ)} figures of seed {seed} moved since the table was made:"] + differ[:20]
    tests = claims.run_tests(claims.cited_tests())                # the ledger's tests, run now
    line, backed = claims_now(record, tests)
    if not backed:
        return False, [f"seed {seed} identical, but the claims as they read now are not all backed: {line}"]
    if science.provenance_record(claims.cited_tests()) != stamp:
        return False, ["the code changed while seed 0 reran: run it again on a tree that stays as it is"]
    record.setdefault("verified", []).append({
        "commit": stamp["commit"], "date": provenance.today(), "machine": provenance.machine(),
        "how": f"seed {seed} of every experiment rerun in full, natively and under {science.DEFAULT_KERNELS}: "
               f"{n} native figures and every recorded default-kernel figure identical bit for bit "
               "(evidence for the other seeds, not a proof)", "claims": line})
    record.update({k: stamp[k] for k in ("ledger_tests", "fingerprint", "inputs")}, tests_passed=sorted(tests))
    Path(path).write_text(json.dumps(record, indent=1) + "\n")
    return True, [f"seed {seed}: {n} native figures and the default kernels' figures identical; {line}",
                  f"re-stamped {path} at commit {stamp['commit']} (figures made at {record['commit']})"]


def main(argv=None):
    parser = argparse.ArgumentParser(description="rerun one seed of the science and re-stamp the table if identical")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    ok, lines = verify(seed=args.seed)
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
