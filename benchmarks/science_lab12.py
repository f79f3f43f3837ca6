"""Lab 12's lessons as science experiments (see science.py), with the notebook's own functions.

``world(seed)`` is the set-up every experiment of a seed shares (and other modules may reuse): Lab
12's world (``course_utils.world``: the SFT model, ranked data and as many held out, the notebook's
``train_reward_model``, the RM offset) drawn with this run's seeds (``science_seeds``), and a
held-out evaluation of N_EVAL SFT samples ("start"). ``ppo(seed, **changes)`` is one run of the notebook's ``train_rlhf`` with
``RLHFConfig(seed=seed, **changes)`` (120 iterations x 64 prompts), summarised by the mean of its
last 10 iterations ("end"); runs are cached, so experiments that share a run train it once.

reward_model   what the fit learns from the rankings: every digit weight positive (the sign), the gold
               order as well as counting digits does and no better (a linear digit-count RM can do no
               better than counting on this labeler), accuracy near the noise ceiling. Control: the same
               fit on shuffled rankings (the preferences removed, the responses kept).
kl_penalty     beta = 0 hacks the proxy (RM up, gold down), the default beta does not; at the default
               beta gold improves on the SFT model, which PPO on an RM fit to shuffled rankings does not;
               the default beta's KL is small, beta = 0's is not.
hack           at beta = 0, step by step: gold first rises (control: the fitted RM less its digit-count
               component, which no longer says "an answer beats a blank"; and the untrained SFT model,
               the statistic's noise floor); the policy writes four copies of a heavily weighted digit
               (control: the RM's weights reversed in order); every answer ends malformed; the KL levels
               off near -log pi_ref of the collapsed response.
controller     the notebook's run (from the default beta, 120 iterations) hovers around the target KL,
               and the controller started from two betas an order of magnitude apart (0.03, 0.3) reaches
               it over FAR_ITERS iterations; the control is train_rlhf with the controller's update sign
               flipped (one line of its source), from the same starts.
ptx            PPO-ptx keeps the SFT model's accuracy *and* gains RM score at a beta (0.05) where plain
               PPO (ptx off) loses the accuracy.
health         Experiment 9's health signals: run B (learning rate HEALTH_LR) against run A (the default
               learning rate, the control of every criterion): the clip fraction over half at the first
               iteration and above a few percent to the end, the KL several nats after one update, the
               value loss an order of magnitude higher over the first iterations (against a second
               default-rate run with another seed, so that the ratio is not 1 by definition), the final
               policy's exact entropy lower.

Thresholds sit at the measured band over 5 seeds plus a stated margin (see each criterion).
"""

import dataclasses
import functools
import math
import random

import torch

from course_staff.solutions import lab_cells, load_lab
from course_utils.evaluation import METRICS, RESPONSE_METRICS, gold_order_agreement, response_metrics
from course_utils.reward_model import DigitRM, digit_counts
from course_utils.response_tree import ResponseTree
from course_utils.tinylm import TOKENS, encode_prompts, make_batch, sample, sequence_logprobs
from course_utils.views.lab12 import exact_entropy, last_third
from course_utils.world import N_OFFSET, Seeds, make_world

from benchmarks.science import Criterion, Experiment

N_EVAL = N_OFFSET         # SFT samples for the "start" figures, as many as for the RM offset
LAST = 10                 # "end" = mean of the last LAST iterations
TARGET = 0.5              # the controller's target KL (Lab 12's Experiment 3)
STARTS = (0.03, 0.3)      # its starting betas, an order of magnitude apart, below and above the one it finds
FAR_ITERS = 240           # from those starts: at most 2% a step, beta needs 50-65 iterations from 0.3 to 0.08-0.11
CONTROLLER_LINE = "beta = beta * (1 + 0.1 * e)"        # the controller's update in the given train_rlhf
PTX_BETA = 0.05           # the beta at which PPO-ptx and plain PPO are compared (Lab 12's Experiment 4)
PTX_COEF = 1.0
EARLY = 40                # "first": the gold score's peak over the first EARLY iterations (5-iteration average)
N_SHARE = 256             # samples of a final policy for its digit shares


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


def ppo(seed, rm="fit", controller="as given", **changes):
    """The end figures of one train_rlhf run with RLHFConfig(seed=seed, **changes) (cached), plus
    ``kl_last_third`` (mean KL over the last third of the iterations), ``beta_end``, ``early_gold_peak``,
    ``digit_shares`` (10,) of the final policy, and the run's ``history`` and final ``policy`` themselves.

    rm: "fit" (the seed's reward model) or a control of CONTROL_RMS (each scored minus the fit's
    offset, the seed's one r_offset);
    controller: "as given" or "sign flipped" (train_rlhf with the controller's update reversed)."""
    return _ppo(seed, rm, controller, tuple(sorted(changes.items())))


def flipped_source():
    """(the source of Lab 12's given train_rlhf cell, the same with the controller's update reversed)."""
    source = [src for _, src in lab_cells("lab12") if "def train_rlhf" in src][0]
    assert source.count(CONTROLLER_LINE) == 1, f"train_rlhf's controller update is no longer {CONTROLLER_LINE!r}"
    return source, source.replace(CONTROLLER_LINE, CONTROLLER_LINE.replace("(1 + ", "(1 - "))


def flipped_train_rlhf():
    """Lab 12's train_rlhf with one line changed: the controller moves beta the wrong way,
    beta * (1 - 0.1 e), so it lowers beta while the KL is above target and raises it below."""
    ns = dict(lab())
    exec(flipped_source()[1], ns)
    return ns["train_rlhf"]


@functools.lru_cache(maxsize=32)
def _ppo(seed, rm, controller, changes):
    w = world(seed)
    cfg = lab()["RLHFConfig"](seed=seed, **dict(changes))
    train = lab()["train_rlhf"] if controller == "as given" else flipped_train_rlhf()
    policy, hist = train(w.sft, reward_model(seed, rm), w.rm_offset, cfg)
    third = len(hist["kl"]) // 3
    end = {k: sum(hist[k][-LAST:]) / LAST for k in METRICS}
    return dict(end, kl_last_third=sum(hist["kl"][-third:]) / third, beta_start=cfg.beta, beta_end=hist["beta"][-1],
                early_gold_peak=early_peak(hist["gold"]), digit_shares=digit_shares(policy, seed),
                history=hist, policy=policy)


def early_peak(gold):
    """The peak of the 5-iteration moving average of per-iteration gold over the first EARLY iterations."""
    return max(sum(gold[i:i + 5]) / 5 for i in range(EARLY - 4))


@torch.no_grad()
def untrained_early_peak(sft, seed, batch=64):
    """early_peak of the SFT model itself, sampled EARLY times on batches of fresh prompts as train_rlhf
    samples them: what the peak reaches by sampling noise alone, with no training."""
    rng, gen = random.Random(5000 + seed), torch.Generator().manual_seed(5000 + seed)
    gold = [response_metrics(sample(sft, make_batch(batch, rng)[0], generator=gen))["gold"].mean().item()
            for _ in range(EARLY)]
    return early_peak(gold)


def weight_level(rm, shares):
    """Where the digits a policy writes sit among ``rm``'s weights: the mean over its digits (``shares``,
    (10,)) of (w_d - lightest) / (heaviest - lightest): 1 if it writes only the heaviest digit, 0 if
    only the lightest."""
    w = rm.w.detach()
    return sum(s * ((w[d] - w.min()) / (w.max() - w.min())).item() for d, s in enumerate(shares))


@torch.no_grad()
def digit_shares(policy, seed, n=N_SHARE):
    """(10,) the share of each digit among the digits of n samples of ``policy`` (fresh prompts)."""
    prompts, _ = make_batch(n, random.Random(4000 + seed))
    counts = digit_counts(sample(policy, prompts, generator=torch.Generator().manual_seed(4000 + seed))).sum(0)
    return (counts / counts.sum().clamp(min=1)).tolist()


@torch.no_grad()
def collapse_kl(sft, digit):
    """-log pi_ref(four copies of ``digit``, no <eos> | x), averaged over the 100 prompts: the KL of a
    policy that answers every prompt with that response, the most a PPO run can reach by collapsing
    onto it (KL(delta_y || pi_ref) = -log pi_ref(y))."""
    prompts = [f"{a}+{b}=" for a in range(10) for b in range(10)]
    ids, prompt_len = encode_prompts(prompts)
    tokens = torch.full((len(prompts), 4), TOKENS.index(str(digit)), dtype=ids.dtype)
    out = {"ids": torch.cat([ids, tokens], 1), "prompt_len": prompt_len, "mask": torch.ones(len(prompts), 4)}
    return -sequence_logprobs(sft, out).sum(1).mean().item()


def default_beta():
    return lab()["RLHFConfig"]().beta


# ----------------------------------------------------------------------------- reward model
def shuffled(data, seed):
    """The same responses with every ranking shuffled: the labels carry no preference."""
    rng = random.Random(seed)
    return [dict(d, ranking=rng.sample(d["ranking"], len(d["ranking"]))) for d in data]


@functools.lru_cache(maxsize=1)
def shuffled_rm(seed):
    """The notebook's train_reward_model on the seed's rankings shuffled (cached)."""
    return lab()["train_reward_model"](shuffled(world(seed).train, seed), seed=seed)


def rm_with_weights(w):
    """A DigitRM with digit weights ``w`` (10,)."""
    rm = DigitRM()
    with torch.no_grad():
        rm.w.copy_(w)
    return rm


@functools.lru_cache(maxsize=1)
def reversed_rm(seed):
    """The seed's fitted RM with its digit weights reversed in order: the same ten values, the heaviest
    given to the lightest digit, the second heaviest to the second lightest, and so on. Every weight
    stays positive and the count component is unchanged; only which digits are heavy changes."""
    w = world(seed).rm.w.detach()
    order = w.argsort(descending=True)
    out = w.clone()
    out[order] = w[order.flip(0)]
    return rm_with_weights(out)


@functools.lru_cache(maxsize=1)
def uncounted_rm(seed):
    """The seed's fitted RM with its digit-count component removed: each weight minus their mean. The
    digits' relative weights are kept; "more digits score more", the part of the fit that agrees with
    the labeler that an answer beats a blank, is gone (a one-digit answer of average weight scores what
    a blank scores)."""
    w = world(seed).rm.w.detach()
    return rm_with_weights(w - w.mean())


CONTROL_RMS = {"shuffled": shuffled_rm, "reversed": reversed_rm, "uncounted": uncounted_rm}   # seed -> DigitRM


def reward_model(seed, name):
    """The RM a run trains on: "fit" (the seed's) or a control of CONTROL_RMS."""
    return world(seed).rm if name == "fit" else CONTROL_RMS[name](seed)


def counting_rm():
    """A DigitRM that only counts digits: every weight 1 (the sign assumed, nothing learned)."""
    rm = DigitRM()
    with torch.no_grad():
        rm.w.fill_(1.0)
    return rm


def run_reward_model(seed):
    w = world(seed)
    out = {}
    for name, rm in {"fit": w.rm, "shuffled": shuffled_rm(seed), "counting": counting_rm()}.items():
        acc, ceiling = lab()["rm_accuracy"](rm, w.held_out)
        out[f"gap_{name}"] = ceiling - acc
        out[f"agreement_{name}"], _ = gold_order_agreement(rm, *lab()["comparisons"](w.held_out))
        out[f"min_weight_{name}"] = rm.w.min().item()
    for name in ("fit", "shuffled"):            # ordering pairs like counting: the larger difference decides
        out[f"as_counting_{name}"] = max(abs(out[f"agreement_{name}"] - out["agreement_counting"]),
                                         abs(out[f"gap_{name}"] - out["gap_counting"]))
    out["accuracy_fit"], out["ceiling"] = lab()["rm_accuracy"](w.rm, w.held_out)
    out["accuracy_counting"] = out["ceiling"] - out["gap_counting"]
    out.update({f"w{d}": x for d, x in enumerate(w.rm.w.tolist())})
    out["heaviest_digit"] = float(w.rm.w.argmax())
    return out


SHUFFLED = ("fit on shuffled rankings", "{}_shuffled")
REWARD_MODEL = Experiment("lab12.reward_model", run_reward_model, smoke=True, criteria=(
    # measured: 0.24-0.28 (the fit's lightest digit); threshold 0.1, the band's bottom minus 0.14
    Criterion("sign", "the fit's smallest digit weight (every digit positive)", "min_weight_fit", 0.1,
              controls=((SHUFFLED[0], "min_weight_shuffled"),)),
    # measured: agreement the fit 0.876-0.896, counting 0.883-0.897; accuracy 0.542-0.547 and 0.543-0.546;
    # each difference <= 0.008; threshold 0.02
    Criterion("as_counting", "max |fit - counting digits| of held-out accuracy, gold-order agreement",
              "as_counting_fit", 0.02, above=False, controls=((SHUFFLED[0], "as_counting_shuffled"),)),
    # measured: 0.876-0.896 ("about nine pairs in ten"); threshold 0.85, the band's bottom minus 0.026
    Criterion("gold_order", "agreement with the noise-free gold order", "agreement_fit", 0.85,
              controls=((SHUFFLED[0], "agreement_shuffled"),)),
    # measured: 0.005-0.011 ("about a point"); threshold 0.02, the band's top plus 0.009
    Criterion("ceiling", "noise ceiling - RM held-out accuracy", "gap_fit", 0.02, above=False,
              controls=((SHUFFLED[0], "gap_shuffled"),)),
))


# ----------------------------------------------------------------------------- KL penalty
def run_kl_penalty(seed):
    start = world(seed).start
    out = {f"start_{k}": start[k] for k in METRICS}
    for name, end in (("beta0", ppo(seed, beta=0.0)), ("default", ppo(seed, beta=default_beta())),
                      ("beta_ptx", ppo(seed, beta=PTX_BETA))):
        out.update({f"{name}_{k}": end[k] for k in METRICS})
        # the hack: the proxy and the labeler disagree; both moves count, the smaller decides
        out[f"{name}_hack"] = min(end["rm"] - start["rm"], start["gold"] - end["gold"])
    return out


KL_PENALTY = Experiment("lab12.kl_penalty", run_kl_penalty, smoke=True, criteria=(
    # measured: beta 0 +1.19..+1.54, the default beta -0.36..-0.27; threshold +0.6, half the band's bottom
    Criterion("hack", "beta = 0: min(RM rise, gold fall)", "beta0_hack", 0.6,
              controls=(("the default beta (0.1)", "default_hack"),), fmt="{:+.2f}"),
    # measured: 0.38..0.54 ("about half a nat"); threshold 0.8, the band's top plus half of it
    Criterion("small_kl", "default beta: final KL (nats)", "default_kl", 0.8, above=False,
              controls=(("beta = 0", "beta0_kl"), (f"beta = {PTX_BETA:g}", "beta_ptx_kl")), fmt="{:.2f}"),
))


# ----------------------------------------------------------------------------- the hack, step by step
def run_hack(seed):
    w = world(seed)
    start, beta0, default = w.start, ppo(seed, beta=0.0), ppo(seed, beta=default_beta())
    uncounted0, reversed0 = ppo(seed, rm="uncounted", beta=0.0), ppo(seed, rm="reversed", beta=0.0)
    spammed = max(range(10), key=lambda d: beta0["digit_shares"][d])          # the policy's commonest digit
    bound = collapse_kl(w.sft, spammed)
    return {"start_gold": start["gold"], "collapse_kl": bound, "spammed_digit": float(spammed),
            "spammed_share": beta0["digit_shares"][spammed], "heaviest_digit": float(w.rm.w.argmax()),
            "rise": beta0["early_gold_peak"] - start["gold"], "rise_uncounted": uncounted0["early_gold_peak"] - start["gold"],
            "rise_untrained": untrained_early_peak(w.sft, seed) - start["gold"],
            # both levels on the fitted RM's weights: the reversed RM's policy is judged by what the fit calls heavy
            "weight_level": weight_level(w.rm, beta0["digit_shares"]),
            "weight_level_reversed": weight_level(w.rm, reversed0["digit_shares"]),
            "malformed": beta0["malformed"], "malformed_default": default["malformed"],
            "plateau": abs(math.log(beta0["kl"] / bound)), "plateau_default": abs(math.log(default["kl"] / bound))}


HACK = Experiment("lab12.hack", run_hack, criteria=(
    # measured: +0.20..+0.29; the count-free RM's -0.34..+0.06; the untrained SFT model's +0.05..+0.13 over 20
    # draws (a peak over 36 windows of 64-sample batches is biased up by noise): threshold +0.16, above that
    # noise floor and 0.04 below the band's bottom
    Criterion("rises_first", f"beta = 0: peak gold in the first {EARLY} iterations - SFT gold", "rise", 0.16,
              controls=(("the fitted RM less its digit-count component (w - mean w), beta = 0", "rise_uncounted"),
                        ("no training (the SFT model sampled as in training: the noise floor)", "rise_untrained")),
              fmt="{:+.2f}"),
    # measured: 0.74 (seed 1: four 2s, the third heaviest of its RM's digits) .. 1.00; the reversed RM's 0.02;
    # threshold 0.5, the band's bottom minus about a third of it
    Criterion("spams_heavy", "beta = 0: final digits' weight in the RM (lightest digit 0, heaviest 1)",
              "weight_level", 0.5,
              controls=(("the RM's weights reversed in order (the heaviest given to the lightest digit), beta = 0",
                         "weight_level_reversed"),), fmt="{:.2f}"),
    Criterion("all_malformed", "beta = 0: final malformed share", "malformed", 0.95,
              controls=(("the default beta (0.1)", "malformed_default"),), fmt="{:.2f}"),
    # measured: 0.00..0.24 (the final KL against -log pi_ref of four copies of the digit the policy writes most);
    # threshold log 1.5 = 0.41
    Criterion("kl_plateau", "beta = 0: |log(final KL / -log pi_ref(4 x the policy's commonest digit))|", "plateau",
              math.log(1.5), above=False, controls=(("the default beta (0.1)", "plateau_default"),), fmt="{:.2f}"),
))


# ----------------------------------------------------------------------------- within the KL budget
def run_improves(seed):
    start = world(seed).start
    out = {}
    for name, end in (("default", ppo(seed, beta=default_beta())), ("shuffled_rm", ppo(seed, rm="shuffled", beta=default_beta()))):
        out[f"{name}_gold_change"] = end["gold"] - start["gold"]
        out[f"{name}_malformed_drop"] = start["malformed"] - end["malformed"]
    return out


IMPROVES = Experiment("lab12.improves", run_improves, criteria=(
    # measured: +0.27..+0.36; threshold +0.15, about half the band's bottom
    Criterion("improves", "default beta: final gold - SFT gold", "default_gold_change", 0.15,
              controls=(("the RM fit on shuffled rankings, same beta", "shuffled_rm_gold_change"),), fmt="{:+.2f}"),
    # measured: 0.19..0.21 (SFT 0.20-0.22 malformed, the end 0.003-0.02); threshold 0.1
    Criterion("fewer_malformed", "default beta: SFT malformed share - final", "default_malformed_drop", 0.1,
              controls=(("the RM fit on shuffled rankings, same beta", "shuffled_rm_malformed_drop"),), fmt="{:+.2f}"),
))


# ----------------------------------------------------------------------------- controller
def run_controller(seed):
    """Relative errors |KL - target| / target over the last third: the notebook's run (from the default
    beta, the lab's 120 iterations) and, over FAR_ITERS, the worst of the two far starts; as given and
    with the update's sign flipped."""
    out = {}
    for controller, name in (("as given", "given"), ("sign flipped", "flipped")):
        runs = {"notebook": [(default_beta(), {})], "far": [(b, {"iters": FAR_ITERS}) for b in STARTS]}
        for which, starts in runs.items():
            errors = []
            for beta, more in starts:
                run = ppo(seed, controller=controller, beta=beta, target_kl=TARGET, **more)
                key = f"{name}_{which}_from_{beta:g}"
                out[f"{key}_kl"], out[f"{key}_beta_end"] = run["kl_last_third"], run["beta_end"]
                errors.append(abs(run["kl_last_third"] - TARGET) / TARGET)
            out[f"{name}_{which}_error"] = max(errors)
    return out


FLIPPED = "the controller's sign flipped (beta * (1 - 0.1 e)), same start(s)"
CONTROLLER = Experiment("lab12.controller", run_controller, criteria=(
    # measured: 0.06..0.21 (KL 0.53..0.60; the flipped controller's 0.84..0.89); threshold 0.3, the band's top + 0.09
    Criterion("hovers", f"the notebook's run (from the default beta, 120 iterations): |KL - {TARGET:g}| / {TARGET:g}, "
              "last third", "given_notebook_error", 0.3, above=False,
              controls=((FLIPPED, "flipped_notebook_error"),), fmt="{:.2f}"),
    # measured: 0.03..0.11 (beta ends at 0.08..0.11 from both starts; the flipped controller's 80..101, its KL
    # the collapse's tens of nats from 0.03 and near 0 from 0.3); threshold 0.2, the band's top + 0.09.
    # Over the lab's 120 iterations the start at 0.3 is still on its way on seed 3 (0.33..0.48, by machine).
    Criterion("reaches", f"from beta {STARTS[0]:g} and {STARTS[1]:g}, {FAR_ITERS} iterations: max |KL - t| / t, "
              "last third", "given_far_error", 0.2, above=False,
              controls=((FLIPPED, "flipped_far_error"),), fmt="{:.2f}"),
))


# ----------------------------------------------------------------------------- PPO-ptx
ACC_KEPT, RM_GAIN = 0.8, 0.1     # PPO-ptx keeps >= 80% of the SFT model's accuracy and gains >= 0.1 RM score


def run_ptx(seed):
    start = world(seed).start
    out = {"start_acc": start["acc"], "start_rm": start["rm"]}
    for name, run in (("ptx", ppo(seed, beta=PTX_BETA, ptx_coef=PTX_COEF)), ("plain", ppo(seed, beta=PTX_BETA))):
        out.update({f"{name}_acc": run["acc"], f"{name}_gold": run["gold"], f"{name}_rm": run["rm"],
                    f"{name}_kept": run["acc"] / start["acc"], f"{name}_rm_gain": run["rm"] - start["rm"]})
        # both at once: the smaller margin decides (>= 0: accuracy kept and RM score gained)
        out[f"{name}_margin"] = min(out[f"{name}_kept"] - ACC_KEPT, out[f"{name}_rm_gain"] - RM_GAIN)
    return out


PTX = Experiment("lab12.ptx", run_ptx, criteria=(
    # measured: accuracy kept 0.96-1.09 of SFT's; RM gain +0.23 on seed 0
    Criterion("keeps_and_gains", f"beta {PTX_BETA:g}, ptx {PTX_COEF:g}: min(accuracy / SFT's - {ACC_KEPT:g}, "
              f"RM gain - {RM_GAIN:g})", "ptx_margin", 0.0,
              controls=((f"ptx off (ptx_coef = 0) at beta {PTX_BETA:g}", "plain_margin"),), fmt="{:+.2f}"),
))


# ----------------------------------------------------------------------------- health signals
HEALTH_LR = 1e-2          # run B's learning rate (Lab 12's Experiment 9; run A: RLHFConfig's default)
FIRST = 10                # "the first iterations": the value loss's mean over the first FIRST
RESEED = 100              # the value-loss ratio's control: a default-rate run with PPO seed seed + RESEED


@functools.lru_cache(maxsize=1)
def response_tree():
    return ResponseTree.build()


def first_value_loss(seed, ppo_seed):
    """Mean value loss over a run of FIRST iterations at the default configuration, on the world of
    ``seed`` with PPO's own draws from ``ppo_seed`` (the same figures as the first FIRST iterations of
    a longer run: train_rlhf has no schedule)."""
    w = world(seed)
    hist = lab()["train_rlhf"](w.sft, w.rm, w.rm_offset, lab()["RLHFConfig"](iters=FIRST, seed=ppo_seed))[1]
    return sum(hist["value_loss"]) / FIRST


def run_health(seed):
    """Experiment 9's figures of run A (the default learning rate) and run B (HEALTH_LR), per seed."""
    runs = {"A": ppo(seed, beta=default_beta()), "B": ppo(seed, beta=default_beta(), lr=HEALTH_LR)}
    out = {"sft_entropy": exact_entropy(response_tree(), world(seed).sft)}
    for name, run in runs.items():
        hist = run["history"]
        out.update({f"{name}_clip_first": hist["clip_frac"][0],
                    f"{name}_clip_last_third": last_third(hist, "clip_frac"),
                    # the KL of the rollout after the first update (iteration 0's is that of the SFT model: 0)
                    f"{name}_kl_after_one": hist["kl"][1], f"{name}_kl_last_third": last_third(hist, "kl"),
                    f"{name}_value_loss_first": sum(hist["value_loss"][:FIRST]) / FIRST,
                    f"{name}_entropy": exact_entropy(response_tree(), run["policy"])})
    reseeded = first_value_loss(seed, seed + RESEED)
    out["A2_value_loss_first"] = reseeded
    out["value_loss_ratio"] = out["B_value_loss_first"] / out["A_value_loss_first"]
    out["value_loss_ratio_reseeded"] = reseeded / out["A_value_loss_first"]
    return out


RUN_A = "run A: the default learning rate (3e-4)"
HEALTH = Experiment("lab12.health", run_health, smoke=True, criteria=(
    # measured (here and under ATEN_CPU_CAPABILITY=default): run A 0.028..0.035 ("a few percent": 3%), run B
    # 0.067..0.184; threshold 0.05, A's band top + 0.015
    Criterion("clip_normal", "run A: clip fraction, last third (a few percent)", "A_clip_last_third", 0.05,
              above=False, controls=((f"run B: learning rate {HEALTH_LR:g}", "B_clip_last_third"),), fmt="{:.3f}"),
    # measured: 0.56..0.66; run A's 0.10..0.16; threshold 0.5, the band's bottom - 0.06
    Criterion("clip_first", "run B: clip fraction at the first iteration", "B_clip_first", 0.5,
              controls=((RUN_A, "A_clip_first"),), fmt="{:.2f}"),
    # measured: 5.9..11.3 nats; run A's 0.01..0.09; threshold 3, half the band's bottom
    Criterion("kl_jump", "run B: KL to the SFT model after one update (nats)", "B_kl_after_one", 3.0,
              controls=((RUN_A, "A_kl_after_one"),), fmt="{:.2f}"),
    # measured: 12.8..27.5 (the reseeded default-rate run 0.9..1.1); threshold 10 ("an order of magnitude"),
    # the band's bottom - 2.8
    Criterion("value_loss", f"value loss over the first {FIRST} iterations / run A's", "value_loss_ratio", 10.0,
              controls=((f"{RUN_A}, PPO seed + {RESEED}", "value_loss_ratio_reseeded"),), fmt="{:.1f}"),
    # measured: run B 0.09..0.38 nats, run A 0.47..0.60 (the SFT model 0.78); threshold 0.42, between the bands
    Criterion("sharper", "run B: exact entropy of the final policy (nats)", "B_entropy", 0.42, above=False,
              controls=((RUN_A, "A_entropy"),), fmt="{:.2f}"),
))

EXPERIMENTS = [REWARD_MODEL, KL_PENALTY, HACK, IMPROVES, CONTROLLER, PTX, HEALTH]
