"""Lab 12's lessons as science experiments (see science.py), with the notebook's own functions.

``world(seed)`` is the set-up every experiment of a seed shares (and other modules may reuse): Lab
12's world (``course_utils.world``: the SFT model, ranked data and as many held out, the notebook's
``train_reward_model``, the RM offset) drawn with this run's seeds (``science_seeds``), and a
held-out evaluation of N_EVAL SFT samples ("start"). ``ppo(seed, **changes)`` is one run of the notebook's ``train_rlhf`` with
``RLHFConfig(seed=seed, **changes)`` (120 iterations x 64 prompts), summarised by the mean of its
last 10 iterations ("end"); runs are cached, so experiments that share a run train it once.

reward_model   what fitting adds: agreement with the noise-free gold order, accuracy near the noise
               ceiling. Controls: the initial weights (all 0) and a fit on shuffled rankings.
               (A model that only counts digits, every weight 1, does as well on both: recorded as
               ``*_counting``; what the fit adds beyond it are the per-digit weights.)
kl_penalty     beta = 0 hacks the proxy (RM up, gold down); the default beta keeps gold, at a small KL.
controller     the adaptive controller reaches targets that the fixed starting beta misses, from
               below (0.25) and from above (1.0), moving beta the right way.
ptx            PPO-ptx keeps the SFT model's accuracy at a beta (0.05) where plain PPO loses it.
"""

import dataclasses
import functools
import random

import torch

from course_staff.solutions import load_lab
from course_utils.evaluation import METRICS, RESPONSE_METRICS, gold_order_agreement, response_metrics
from course_utils.reward_model import DigitRM, digit_counts
from course_utils.tinylm import make_batch, sample
from course_utils.world import N_OFFSET, Seeds, make_world

from science import Criterion, Experiment

N_EVAL = N_OFFSET         # SFT samples for the "start" figures, as many as for the RM offset
LAST = 10                 # "end" = mean of the last LAST iterations
TARGETS = (0.25, 1.0)     # controller targets below and above the KL that beta 0.1 settles at (0.34-0.56)
PTX_BETA = 0.05           # the beta at which PPO-ptx and plain PPO are compared (Lab 12's Experiment 4)
PTX_COEF = 1.0


@functools.lru_cache(maxsize=1)
def lab():
    return load_lab("lab12")


# ----------------------------------------------------------------------------- the shared set-up
@dataclasses.dataclass
class World:
    sft: object
    train: list
    held_out: list
    rm: object
    rm_offset: float
    start: dict


@torch.no_grad()
def evaluate(model, rm, rm_offset, seed, n=N_EVAL):
    """Figures of ``model``'s samples (temperature 1) on n fresh prompts: METRICS, KL 0."""
    prompts, _ = make_batch(n, random.Random(seed))
    out = sample(model, prompts, generator=torch.Generator().manual_seed(seed))
    metrics = response_metrics(out)
    return {"rm": (rm(digit_counts(out)) - rm_offset).mean().item(), "kl": 0.0,
            **{name: metrics[name].mean().item() for name in RESPONSE_METRICS}}


@functools.lru_cache(maxsize=1)
def world(seed):
    """The seed's SFT model, ranked data, fitted RM, RM offset and start figures (cached)."""
    w = make_world(lab()["train_reward_model"], seed, seeds=science_seeds)
    return World(w.sft, w.train_data, w.held_out, w.rm, w.rm_offset, evaluate(w.sft, w.rm, w.rm_offset, 3000 + seed))


def science_seeds(s):
    """This run's seed convention for Lab 12's world (its committed numbers were drawn with it)."""
    return Seeds(rankings=s, held_out=1000 + s, reward_model=s, offset=2000 + s)


def ppo(seed, **changes):
    """The end figures of one train_rlhf run with RLHFConfig(seed=seed, **changes) (cached), plus
    ``kl_last_third`` (mean KL over the last third of the iterations) and ``beta_end``."""
    return _ppo(seed, tuple(sorted(changes.items())))


@functools.lru_cache(maxsize=16)
def _ppo(seed, changes):
    w = world(seed)
    cfg = lab()["RLHFConfig"](seed=seed, **dict(changes))
    _, hist = lab()["train_rlhf"](w.sft, w.rm, w.rm_offset, cfg)
    third = len(hist["kl"]) // 3
    end = {k: sum(hist[k][-LAST:]) / LAST for k in METRICS}
    return dict(end, kl_last_third=sum(hist["kl"][-third:]) / third, beta_start=cfg.beta, beta_end=hist["beta"][-1])


def default_beta():
    return lab()["RLHFConfig"]().beta


# ----------------------------------------------------------------------------- reward model
def shuffled(data, seed):
    """The same responses with every ranking shuffled: the labels carry no preference."""
    rng = random.Random(seed)
    return [dict(d, ranking=rng.sample(d["ranking"], len(d["ranking"]))) for d in data]


def run_reward_model(seed):
    w = world(seed)
    counting = DigitRM()
    with torch.no_grad():
        counting.w.fill_(1.0)
    models = {"fit": w.rm, "init": DigitRM(), "shuffled": lab()["train_reward_model"](shuffled(w.train, seed), seed=seed),
              "counting": counting}
    out = {}
    for name, rm in models.items():
        acc, ceiling = lab()["rm_accuracy"](rm, w.held_out)
        out[f"gap_{name}"] = ceiling - acc
        out[f"agreement_{name}"], _ = gold_order_agreement(rm, *lab()["comparisons"](w.held_out))
    out["accuracy_fit"], out["ceiling"] = lab()["rm_accuracy"](w.rm, w.held_out)
    out.update({f"w{d}": x for d, x in enumerate(w.rm.w.tolist())})
    return out


REWARD_MODEL = Experiment("lab12.reward_model", run_reward_model, smoke=True, criteria=(
    Criterion("gold_order", "agreement with the noise-free gold order", "agreement_fit", 0.8,
              controls=(("initial weights (all 0)", "agreement_init"),
                        ("fit on shuffled rankings", "agreement_shuffled"))),
    Criterion("ceiling", "noise ceiling - RM held-out accuracy", "gap_fit", 0.02, above=False,
              controls=(("initial weights (all 0)", "gap_init"), ("fit on shuffled rankings", "gap_shuffled"))),
))


# ----------------------------------------------------------------------------- KL penalty
def run_kl_penalty(seed):
    start = world(seed).start
    out = {f"start_{k}": start[k] for k in METRICS}
    for name, beta in (("beta0", 0.0), ("default", default_beta())):
        end = ppo(seed, beta=beta)
        out.update({f"{name}_{k}": end[k] for k in METRICS})
        # the hack: the proxy and the labeler disagree; both moves count, the smaller decides
        out[f"{name}_hack"] = min(end["rm"] - start["rm"], start["gold"] - end["gold"])
        out[f"{name}_gold_change"] = end["gold"] - start["gold"]
    return out


KL_PENALTY = Experiment("lab12.kl_penalty", run_kl_penalty, smoke=True, criteria=(
    Criterion("hack", "beta = 0: min(RM rise, gold fall)", "beta0_hack", 0.3,
              controls=(("the default beta (0.1)", "default_hack"),), fmt="{:+.2f}"),
    Criterion("keeps_gold", "default beta: final gold - SFT gold", "default_gold_change", 0.0,
              controls=(("beta = 0", "beta0_gold_change"),), fmt="{:+.2f}"),
    Criterion("small_kl", "default beta: final KL (nats)", "default_kl", 2.0, above=False,
              controls=(("beta = 0", "beta0_kl"),), fmt="{:.2f}"),
))


# ----------------------------------------------------------------------------- controller
def run_controller(seed):
    fixed = ppo(seed, beta=default_beta())
    out = {"fixed_kl": fixed["kl_last_third"]}
    errors, fixed_errors, moves, fixed_moves = [], [], [], []
    for target in TARGETS:
        run = ppo(seed, target_kl=target)
        out[f"kl_target_{target:g}"], out[f"beta_end_target_{target:g}"] = run["kl_last_third"], run["beta_end"]
        errors.append(abs(run["kl_last_third"] - target) / target)
        fixed_errors.append(abs(fixed["kl_last_third"] - target) / target)
        # the starting beta's KL above the target -> beta must rise, below -> fall
        up = fixed["kl_last_third"] > target
        for r, into in ((run, moves), (fixed, fixed_moves)):
            factor = r["beta_end"] / r["beta_start"]
            into.append(factor if up else 1 / factor)          # > 1: beta moved toward the target
    out.update(error=max(errors), error_fixed=max(fixed_errors), move=min(moves), move_fixed=min(fixed_moves))
    return out


CONTROLLER = Experiment("lab12.controller", run_controller, criteria=(
    Criterion("reaches", "max over targets of |KL - t| / t (last third)", "error", 0.3, above=False,
              controls=(("fixed beta 0.1 (controller off)", "error_fixed"),), fmt="{:.2f}"),
    # the claim is the direction; 10% (the net of five of the controller's largest steps, 2% each)
    # keeps a rounding-sized move from counting
    Criterion("moves", "min over targets of beta's move toward it (x)", "move", 1.1,
              controls=(("fixed beta 0.1 (controller off)", "move_fixed"),), fmt="{:.2f}"),
))


# ----------------------------------------------------------------------------- PPO-ptx
def run_ptx(seed):
    start = world(seed).start
    ptx, plain = ppo(seed, beta=PTX_BETA, ptx_coef=PTX_COEF), ppo(seed, beta=PTX_BETA)
    return {"start_acc": start["acc"], "ptx_acc": ptx["acc"], "plain_acc": plain["acc"],
            "ptx_kept": ptx["acc"] / start["acc"], "plain_kept": plain["acc"] / start["acc"],
            "ptx_gold": ptx["gold"], "plain_gold": plain["gold"]}


PTX = Experiment("lab12.ptx", run_ptx, criteria=(
    Criterion("keeps_accuracy", f"beta {PTX_BETA:g}, ptx {PTX_COEF:g}: final accuracy / SFT's", "ptx_kept", 0.8,
              controls=((f"ptx_coef = 0 at beta {PTX_BETA:g}", "plain_kept"),), fmt="{:.2f}"),
))

EXPERIMENTS = [REWARD_MODEL, KL_PENALTY, CONTROLLER, PTX]
