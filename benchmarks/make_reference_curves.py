"""Rebuild course_utils/data/lab12_reference_curves.json: the reference runs of Lab 12's beta sweep.

    python -m benchmarks.make_reference_curves          # a few minutes on one core

The file holds numbers only (the PPO histories), never code: the Lab 12 notebook overlays them on a
student's own sweep. They are made with the instructor's solution (loaded from the source notebook
by ``course_staff.solutions.load_lab``) and the notebook's own protocol, a ``runs.RunCache``: the SFT
checkpoint, the notebook's world (``course_utils.world``: ``train_reward_model`` on its rankings, the
offset ``sft_offset``), then one
``train_rlhf`` run per beta of SWEEP_BETAS and per PPO seed (seed 0 is the notebook's own run).
"""

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch

from course_staff.solutions import REPO, load_lab  # noqa: E402

from course_utils.labeler import KAPPA  # noqa: E402
from course_utils.evaluation import METRICS  # noqa: E402
from course_utils.runtime import machine_record  # noqa: E402
from course_utils.runs import SWEEP_BETAS, RunCache  # noqa: E402
from course_utils.tinylm import load_sft  # noqa: E402
from course_utils.reference_curves import REFERENCE_PATH  # noqa: E402

SEEDS = [0, 1, 2]                        # PPO seeds; 0 is the seed of the notebook's runs
KEYS = list(METRICS) + ["beta"]


def reference_cache(lab):
    """A RunCache as the notebook makes it: the notebook's world (reward model, offset), train_rlhf."""
    cache = RunCache(load_sft())
    cache.fit_reward_model(lab["train_reward_model"])
    cache.use(lab["train_rlhf"])
    return cache


def reference_run(lab, cache, beta, seed, **changes):
    """One reference history, {key: [value per iteration]} rounded as the file stores it
    (``changes``: other RLHFConfig fields, e.g. ``iters`` to train only the first iterations)."""
    _, hist = cache.run(dataclasses.replace(lab["RLHFConfig"](), beta=beta, seed=seed, **changes))
    return {k: [round(v, 4) for v in hist[k]] for k in KEYS}


def reference_meta(lab, cache):
    """What the file records about how its runs were made (the drift test compares it)."""
    config = dataclasses.asdict(lab["RLHFConfig"]())
    return {"what": "Lab 12 reference PPO runs (instructor's solution), one history per PPO seed",
            "betas": list(SWEEP_BETAS), "seeds": SEEDS, "kappa": KAPPA, "rm_offset": round(cache.rm_offset, 6),
            "rm_weights": [round(w, 6) for w in cache.rm.w.tolist()],
            "config": {k: v for k, v in config.items() if k not in ("beta", "seed")},
            "torch": torch.__version__, "keys": KEYS, "made on": machine_record()}


PROVENANCE = ("made on",)       # meta keys that say where the file was made, not how


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REFERENCE_PATH)
    args = parser.parse_args()

    lab = load_lab("lab12", REPO)
    cache = reference_cache(lab)
    runs = {}
    for beta in SWEEP_BETAS:
        runs[repr(beta)] = []
        for seed in SEEDS:
            t0 = time.perf_counter()
            hist = reference_run(lab, cache, beta, seed)
            runs[repr(beta)].append(hist)
            print(f"beta {beta:<5g} seed {seed}: gold {sum(hist['gold'][-10:]) / 10:+.2f}  "
                  f"KL {sum(hist['kl'][-10:]) / 10:6.2f}  ({time.perf_counter() - t0:.1f} s)", flush=True)
    meta = reference_meta(lab, cache)
    args.out.write_text(json.dumps({"meta": meta, "runs": runs}, separators=(",", ":")) + "\n")
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
