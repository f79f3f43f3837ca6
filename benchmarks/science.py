"""Lab 12's experiments over 5 seeds, with the reference solution, checked against the course's criteria.

    python benchmarks/science.py            # or: make science      (about a minute with 2 processes)

For each seed: ranked data (2000 prompts x 4 responses, and 2000 held-out prompts), the reward model
(held-out accuracy against the noise ceiling), then four PPO runs of 120 iterations x 64 prompts with
the notebook's own ``train_rlhf``: beta = 0, the default beta (RLHFConfig's), the adaptive KL
controller, and plain PPO against PPO-ptx at the notebook's ptx beta (0.05). "start" is a held-out evaluation of SFT samples (2000
prompts), "end" the mean of the last 10 iterations.

Criteria (each seed must meet all; the script fails unless at least 4 of 5 seeds do):
    rm       held-out accuracy within 0.02 of the ceiling
    hack     beta = 0: RM rises, gold falls by at least 0.3, digits per response rise
    kl       default beta: final gold >= the SFT model's gold, final KL < 2
    ctl      adaptive controller: mean KL over the last third within 30% of the target
    ptx      PPO-ptx: final accuracy above plain PPO's at the same beta (0.05, as in the notebook)
"""

import argparse
import dataclasses
import multiprocessing as mp
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from course_staff.solutions import REPO, load_lab  # noqa: E402

from course_utils.labeler import RESPONSE_METRICS, ranked_data, response_metrics  # noqa: E402
from course_utils.reward_model import digit_counts, sft_offset  # noqa: E402
from course_utils.runs import METRICS  # noqa: E402
from course_utils.tinylm import load_sft, make_batch, sample  # noqa: E402

SEEDS = range(5)
N_PROMPTS = 2000          # ranked prompts for training, and as many held out
N_EVAL = 2000             # SFT samples for the RM offset, and as many for the "start" figures
TARGET_KL = 0.5           # the adaptive controller's target
PTX_COEF = 1.0            # weight of the supervised loss in PPO-ptx
PTX_BETA = 0.05           # the beta at which ptx and plain PPO are compared (Lab 12's Experiment 4)
LAST = 10                 # "end" = mean of the last LAST iterations
NEEDED = 4                # seeds that must meet every criterion

_LAB = {}


def lab(root):
    if "ns" not in _LAB:
        _LAB["ns"] = load_lab("lab12", root)
    return _LAB["ns"]


@torch.no_grad()
def evaluate(model, rm, rm_offset, seed, n=N_EVAL):
    """Sampled (temperature 1) figures of ``model`` on n fresh prompts: the METRICS, KL excluded (0)."""
    prompts, _ = make_batch(n, random.Random(seed))
    out = sample(model, prompts, generator=torch.Generator().manual_seed(seed))
    metrics = response_metrics(out)
    return {"rm": (rm(digit_counts(out)) - rm_offset).mean().item(), "kl": 0.0,
            **{name: metrics[name].mean().item() for name in RESPONSE_METRICS}}


def end_of(hist, last=LAST):
    return {k: sum(hist[k][-last:]) / last for k in METRICS}


def run_seed(seed, root=REPO):
    """Every figure of one seed (a dict), from the notebook's functions."""
    ns = lab(root)
    t0 = time.perf_counter()
    sft = load_sft()
    train = ranked_data(sft, N_PROMPTS, k=4, seed=seed)
    held_out = ranked_data(sft, N_PROMPTS, k=4, seed=1000 + seed)
    rm = ns["train_reward_model"](train, seed=seed)
    acc, ceiling = ns["rm_accuracy"](rm, held_out)
    rm_offset = sft_offset(rm, sft, n=N_EVAL, seed=2000 + seed)
    start = evaluate(sft, rm, rm_offset, 3000 + seed)
    base = ns["RLHFConfig"](seed=seed)
    configs = {"beta=0": dataclasses.replace(base, beta=0.0),
               f"beta={base.beta:g}": base,
               f"target {TARGET_KL:g}": dataclasses.replace(base, target_kl=TARGET_KL),
               f"beta={PTX_BETA:g}": dataclasses.replace(base, beta=PTX_BETA),
               f"+ptx {PTX_COEF:g}": dataclasses.replace(base, beta=PTX_BETA, ptx_coef=PTX_COEF)}
    runs = {}
    for name, cfg in configs.items():
        _, hist = ns["train_rlhf"](sft, rm, rm_offset, cfg)
        third = len(hist["kl"]) // 3
        runs[name] = {"end": end_of(hist), "kl_last_third": sum(hist["kl"][-third:]) / third,
                      "beta_end": hist["beta"][-1]}
    return {"seed": seed, "rm_acc": acc, "ceiling": ceiling, "w": rm.w.detach().tolist(), "start": start,
            "runs": runs, "default": f"beta={base.beta:g}", "seconds": time.perf_counter() - t0}


def criteria(r):
    """{criterion: (met, the figures behind it)} for one seed's results."""
    s, runs = r["start"], r["runs"]
    b0, bd = runs["beta=0"]["end"], runs[r["default"]]["end"]
    ctl = runs[f"target {TARGET_KL:g}"]["kl_last_third"]
    ptx, plain = runs[f"+ptx {PTX_COEF:g}"]["end"], runs[f"beta={PTX_BETA:g}"]["end"]
    return {
        "rm": (r["ceiling"] - r["rm_acc"] <= 0.02, f"gap {r['ceiling'] - r['rm_acc']:.3f}"),
        "hack": (b0["rm"] > s["rm"] and b0["gold"] <= s["gold"] - 0.3 and b0["digits"] > s["digits"],
                 f"gold {b0['gold'] - s['gold']:+.2f}"),
        "kl": (bd["gold"] >= s["gold"] and bd["kl"] < 2, f"gold {bd['gold'] - s['gold']:+.2f}, KL {bd['kl']:.2f}"),
        "ctl": (abs(ctl - TARGET_KL) <= 0.3 * TARGET_KL, f"KL {ctl:.2f} vs {TARGET_KL:g}"),
        "ptx": (ptx["acc"] > plain["acc"], f"acc {ptx['acc']:.2f} vs {plain['acc']:.2f}"),
    }


def table(results):
    """One table: a row per seed and run (start = held-out SFT samples, end = last 10 iterations)."""
    head = (f"{'seed':>4} {'RM acc/ceil':>12} {'run':>11} | {'RM':^14} {'gold':^14} {'KL':>6} "
            f"{'acc':^12} {'malformed':^12} {'digits':^12} | criteria")
    lines = [head, "-" * len(head)]
    for r in results:
        s = r["start"]
        crit = criteria(r)
        notes = {"beta=0": ["hack"], r["default"]: ["kl"], f"target {TARGET_KL:g}": ["ctl"],
                 f"beta={PTX_BETA:g}": [], f"+ptx {PTX_COEF:g}": ["ptx"]}
        for i, (name, run) in enumerate(r["runs"].items()):
            e = run["end"]
            acc_ceil = f"{r['rm_acc']:.3f}/{r['ceiling']:.3f}"
            left = f"{r['seed']:>4} {acc_ceil:>12}" if i == 0 else " " * 17
            names = (["rm"] if i == 0 else []) + notes[name]
            marks = "; ".join(f"{n} {'ok' if crit[n][0] else 'MISS'} ({crit[n][1]})" for n in names)
            kl = f"{e['kl']:6.2f}" if "target" not in name else f"{run['kl_last_third']:6.2f}"
            lines.append(
                f"{left} {name:>11} | {s['rm']:+.2f} -> {e['rm']:+.2f} {s['gold']:+.2f} -> {e['gold']:+.2f} "
                f"{kl} {s['acc']:.2f} -> {e['acc']:.2f} {s['malformed']:.2f} -> {e['malformed']:.2f} "
                f"{s['digits']:.2f} -> {e['digits']:.2f} |" + (f" {marks}" if marks else ""))
    lines.append(f"start: held-out SFT samples ({N_EVAL} prompts); end: mean of the last {LAST} iterations; "
                 f"the controller's KL is the mean over the last third")
    return "\n".join(lines)


def _worker(args):
    seed, root = args
    return run_seed(seed, root)


def main(argv=None):
    parser = argparse.ArgumentParser(description="Lab 12's experiments over 5 seeds, checked against criteria")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--seeds", type=int, default=len(SEEDS), help="number of seeds (default 5)")
    parser.add_argument("--root", default=str(REPO), help="course root holding source/lab12/lab12.ipynb")
    args = parser.parse_args(argv)
    lab(args.root)                                    # fail early (and before forking) if the notebook is broken
    t0 = time.perf_counter()
    tasks = [(seed, args.root) for seed in range(args.seeds)]
    if args.jobs > 1:
        with mp.get_context("fork").Pool(args.jobs) as pool:
            results = pool.map(_worker, tasks)
    else:
        results = [_worker(t) for t in tasks]
    print(table(results))
    met = [r["seed"] for r in results if all(ok for ok, _ in criteria(r).values())]
    print(f"({time.perf_counter() - t0:.0f} s, {args.jobs} process{'es' if args.jobs > 1 else ''})")
    print(f"science: {len(met)}/{len(results)} seeds meet every criterion")
    return 0 if len(met) >= min(NEEDED, len(results)) else 1


if __name__ == "__main__":
    sys.exit(main())
