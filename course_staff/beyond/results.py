"""The cache of Beyond PPO's experiment (course_staff.beyond.experiment), and its table.

    res = results()              # read from course_staff/beyond/data/beyond_ppo_results.json when current,
                                 # otherwise computed again (the cache records the CPU seconds) and written there
    print(table(res))            # one row per beta and policy

    python -m course_staff.beyond.results --rebuild      # train everything again

The cache holds numbers only. Its fingerprint hashes everything the numbers depend on (the code of the
experiment, of the methods, of the toy world's modules and of the labs' reference cells that the
methods call, without comments and docstrings; the SFT checkpoint; torch's version):
``results()`` recomputes when any of them changed. The fingerprint is the same on every machine; the
numbers are not, in their last bits, so the cache also records the machine that made them.
"""

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import torch

from course_staff.beyond.experiment import BETAS, METHODS, build
from course_staff.fingerprint import code_digest
from course_staff.solutions import REPO, lab_cells
from course_utils.runtime import machine_record

CACHE_PATH = Path(__file__).with_name("data") / "beyond_ppo_results.json"
# what the numbers depend on: these files, and the cells of the labs that define these names
INPUT_FILES = ["course_staff/beyond/methods.py", "course_staff/beyond/experiment.py", "course_utils/tinylm.py",
               "course_utils/causal_pass.py", "course_utils/dynamo_on_demand.py", "course_utils/memory.py",
               "course_utils/labeler.py", "course_utils/reward_model.py", "course_utils/ppo_helpers.py",
               "course_utils/response_tree.py", "course_utils/tree_optimum.py", "course_utils/world.py",
               "course_utils/evaluation.py", "course_utils/referee.py", "course_staff/exact.py",
               "course_utils/lab13_world.py", "course_staff/edition/build_lab13_world.py", "course_utils/data/sft.pt"]
LAB_NAMES = {"lab12": ["RLHFConfig", "train_rlhf", "train_reward_model", "comparisons", "bt_loss",
                       "ranking_to_pairs", "kl_penalized_rewards", "gae_per_token", "ppo_rlhf_loss"],
             "lab11": ["kl_estimators"],
             "lab13": ["copy_model", "dpo_loss", "DPOConfig", "pair_logprobs", "implicit_reward_fit", "train_dpo",
                       "group_advantages", "grpo_loss", "GRPOConfig", "grpo_iteration", "train_grpo"]}


# ----------------------------------------------------------------------------- the cache
def _definition_cells(lab, names, root=REPO):
    """The source of the lab's definition cells that define any of ``names``."""
    pattern = re.compile(r"^(def|class)\s+(" + "|".join(map(re.escape, names)) + r")\b", re.M)
    return [src for _, src in lab_cells(lab, root) if pattern.search(src)]


def fingerprint(root=REPO):
    """sha256 of everything the cached numbers depend on (code compared by ``code_digest``)."""
    h = hashlib.sha256(f"torch {torch.__version__} betas {BETAS} methods {METHODS}".encode())
    for rel in INPUT_FILES:
        path = Path(root) / rel
        h.update(rel.encode() + (code_digest(path.read_text()).encode() if path.suffix == ".py" else path.read_bytes()))
    for lab, names in LAB_NAMES.items():
        for src in _definition_cells(lab, names, root):
            h.update(code_digest(src).encode())
    return h.hexdigest()


def load_cache(path=CACHE_PATH):
    """The cached results if they are current, else None."""
    path = Path(path)
    if not path.exists():
        return None
    res = json.loads(path.read_text())
    return res if res.get("fingerprint") == fingerprint() else None


def last_build(path):
    """What the cache at ``path`` took to build, as a clause ("" when there is none to read)."""
    try:
        return f"the last build took {json.loads(Path(path).read_text())['seconds']['cpu']:.0f} s of CPU; "
    except (OSError, ValueError, KeyError, TypeError):
        return ""


def results(path=CACHE_PATH, rebuild=False):
    """The results of ``build()``: from the cache when it is current, else computed and written."""
    res = None if rebuild else load_cache(path)
    if res is None:
        print("The cache of results is missing or out of date: training every method again "
              f"({last_build(path)}the numbers are written to the cache).", flush=True)
        res = build()
        res["fingerprint"] = fingerprint()
        res["made on"] = machine_record()      # the last bits of every number depend on it
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(res, indent=1) + "\n")
    return res


# ----------------------------------------------------------------------------- the table
def table(res):
    """One row per beta and policy: KL to both optima, the shortfall J* - J, gold, accuracy, KL to pi_ref."""
    head = (f"{'beta':>5} {'policy':<17} {'KL(pi||pi*_RM)':>14} {'J*-J (RM)':>10} {'KL(pi||pi*_gold)':>16} "
            f"{'J*-J (gold)':>11} {'gold':>6} {'acc':>5} {'KL(pi||ref)':>11}")
    lines = [head, "-" * len(head)]
    for beta in res["betas"]:
        run = res["runs"][repr(beta)]
        for name in ("optimum RM", "optimum labeler") + tuple(res["methods"]):
            r = run["optimum"]["rm" if name.endswith("RM") else "gold"] if name.startswith("optimum") else run[name]
            lines.append(f"{beta:>5g} {name:<17} {r['rm']['kl_to_opt']:>14.3f} {r['rm']['gap']:>10.4f} "
                         f"{r['gold']['kl_to_opt']:>16.3f} {r['gold']['gap']:>11.4f} {r['rm']['gold']:>+6.2f} "
                         f"{r['rm']['acc']:>5.2f} {r['rm']['kl']:>11.3f}")
    s = res["sft"]
    lines.append(f"SFT model: gold {s['gold']:+.2f}, accuracy {s['acc']:.2f}, malformed {s['malformed']:.2f}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rebuild", action="store_true", help="train again even if the cache is current")
    args = parser.parse_args(argv)
    res = results(rebuild=args.rebuild)
    print(table(res))
    print(f"built in {res['seconds']['wall']:.0f} s wall-clock, {res['seconds']['cpu']:.0f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
