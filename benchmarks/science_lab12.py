"""Lab 12's lessons as science experiments (see science.py), with the notebook's own functions.

``world(seed)`` is the set-up every experiment of a seed shares (and other modules may reuse): Lab
12's world (``course_utils.world``: the SFT model, ranked data and as many held out, the notebook's
``train_reward_model``, the RM offset) drawn with this run's seeds (``science_seeds``), and a
held-out evaluation of N_EVAL SFT samples ("start"). ``ppo(seed, **changes)`` is one run of the notebook's ``train_rlhf`` with
``RLHFConfig(seed=seed, **changes)`` (120 iterations x 64 prompts), summarised by the mean of its
last 10 iterations ("end"); runs are cached, so experiments that share a run train it once.

reward_model   what the fit learns from the rankings: every digit weight positive (the sign), the gold
               order right on about nine pairs in ten, accuracy within about a point of the noise
               ceiling (control of the three: the same fit on shuffled rankings, the preferences
               removed); and no better than counting digits (control: a linear model that also sees
               whether the answer is right, fit the same way on the same rankings).
kl_penalty     beta = 0 hacks the proxy (RM up, gold down), the default beta does not; the default beta's
               KL is about half a nat, beta = 0's and 0.05's are not.
hack           at beta = 0, step by step: gold first rises above what sampling noise gives the untrained
               model (control: the fitted RM less its digit-count component, which no longer says "an
               answer beats a blank"); the policy writes a heavily weighted digit (control: the RM's
               weights reversed in order); every answer ends malformed; the KL levels off near -log
               pi_ref of the collapsed response, over the whole last third, in the mean over PPO_SEEDS PPO
               seeds (control: the default beta, at the same PPO seeds).
improves       at the default beta gold improves on the SFT model and malformed answers drop, which PPO on
               an RM fit to shuffled rankings does not.
controller     the notebook's run (from the default beta, 120 iterations) hovers around the target KL,
               and the controller started from two betas an order of magnitude apart (0.03, 0.3) reaches
               it over FAR_ITERS iterations; the control is train_rlhf with the controller's update sign
               flipped (one line of its source), from the same starts.
ptx            PPO-ptx keeps the SFT model's accuracy *and* gains RM score at a beta (0.05) where plain
               PPO (ptx off) loses the accuracy.
health         Experiment 9's health signals: run B (learning rate HEALTH_LR) against run A (the default
               learning rate): the clip fraction over half at the first iteration and a few percent in
               run A over the last third (a mean over PPO_SEEDS PPO seeds, run B's at the same seeds),
               the KL several nats after one update, the value loss more than ten times run A's
               over the first iterations (against A2, a second default-rate run with another PPO seed, so
               that a ratio to run A is not 1 by definition), and the final policy's exact entropy lower
               than run A's, each entropy a mean over the same PPO_SEEDS PPO seeds (against run A's mean
               over as many other PPO seeds).
critic         Question 7's figures (Experiment 10): the learned critic's error at lambda = 0 (about 0.04
               RMS; control: a critic fitted on a tenth of the batches) and the best lambda near 0.9
               (control: the exact V^pi in place of the critic, where it is 0), both best lambdas read
               from RMS-error curves averaged over the default runs of PPO_SEEDS PPO seeds.

Each threshold follows from the words of the sentence it backs (see each criterion's comment); each
control changes the one input its criterion names as its mechanism (criteria.py).
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
from course_utils.evaluation import last_third
from course_utils.response_tree import exact_entropy
from course_utils.runs import RUN_B
from course_utils.world import N_OFFSET, Seeds, make_world

from benchmarks import criteria
from benchmarks.criteria import Criterion, Experiment, short

N_EVAL = N_OFFSET         # SFT samples for the "start" figures, as many as for the RM offset
LAST = 10                 # "end" = mean of the last LAST iterations
TARGET = 0.5              # the controller's target KL (Lab 12's Experiment 3)
STARTS = (0.03, 0.3)      # its starting betas, an order of magnitude apart, below and above the one it finds
# the controller moves beta by at most 2% an iteration (its error clipped to 0.2, times 0.1): from 0.3 down to
# the 0.08-0.11 it settles at takes at least 50-65 iterations. FAR_ITERS is four times that, so the last third
# (which "hovers" reads) starts after twice the fastest approach
FAR_ITERS = 240
CONTROLLER_LINE = "beta = beta * (1 + 0.1 * e)"        # the controller's update in the given train_rlhf
PTX_BETA = 0.05           # the beta at which PPO-ptx and plain PPO are compared (Lab 12's Experiment 4)
PTX_COEF = 1.0
EARLY = 40                # "first": the gold score's peak over the first EARLY iterations (5-iteration average)
N_SHARE = 256             # samples of a final policy for its digit shares
# A figure of one PPO run varies from one PPO seed to the next (its steps are chaotic) by as much as some
# criteria's margins: those criteria read a mean over PPO_SEEDS runs with PPO seeds seed + RESEED * j
# (``ppo_seeds``; j = 0 is the world's own seed, the run every other criterion reads), the criterion and its
# control at the same PPO seeds, so that the control still differs only in its mechanism
PPO_SEEDS = 5
RESEED = 100


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


def ppo(seed, rm="fit", controller="as given", ppo_seed=None, **changes):
    """The end figures of one train_rlhf run with RLHFConfig(seed=seed, **changes) (cached), plus
    ``kl_last_third`` (mean KL over the last third of the iterations), ``beta_end``, ``early_gold_peak``,
    ``digit_shares`` (10,) of the final policy, and the run's ``history`` and final ``policy`` themselves.

    rm: "fit" (the seed's reward model) or a control of CONTROL_RMS (each scored minus the fit's
    offset, the seed's one r_offset);
    controller: "as given" or "sign flipped" (train_rlhf with the controller's update reversed);
    ppo_seed: PPO's own seed (RLHFConfig.seed), by default the world's.
    In a smoke run (criteria.SHORT > 1) every run is that many times shorter."""
    changes["iters"] = short(changes.get("iters", lab()["RLHFConfig"]().iters), least=3 * LAST)
    changes["seed"] = seed if ppo_seed is None else ppo_seed
    return _ppo(seed, rm, controller, tuple(sorted(changes.items())))


def ppo_seeds(seed, first=0):
    """PPO_SEEDS PPO seeds, seed + RESEED * j for j = first, first + 1, ... (j = 0: the world's own seed)."""
    return tuple(seed + RESEED * j for j in range(first, first + PPO_SEEDS))


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


@functools.lru_cache(maxsize=64)     # a seed's runs, every experiment's (32), each trained once
def _ppo(seed, rm, controller, changes):
    w = world(seed)
    cfg = lab()["RLHFConfig"](**dict(changes))
    train = lab()["train_rlhf"] if controller == "as given" else flipped_train_rlhf()
    policy, hist = train(w.sft, reward_model(seed, rm), w.rm_offset, cfg)
    third = len(hist["kl"]) // 3
    end = {k: sum(hist[k][-LAST:]) / LAST for k in METRICS}
    return dict(end, kl_last_third=sum(hist["kl"][-third:]) / third, beta_start=cfg.beta, beta_end=hist["beta"][-1],
                early_gold_peak=early_peak(hist["gold"]), digit_shares=digit_shares(policy, seed),
                history=hist, policy=policy)


def early_peak(gold):
    """The peak of the 5-iteration moving average of per-iteration gold over the first EARLY iterations."""
    return max(sum(gold[i:i + 5]) / 5 for i in range(min(short(EARLY, least=5), len(gold)) - 4))


@torch.no_grad()
def untrained_early_peak(sft, seed, batch=64):
    """early_peak of the SFT model itself, sampled EARLY times on batches of fresh prompts as train_rlhf
    samples them: what the peak reaches by sampling noise alone, with no training."""
    rng, gen = random.Random(5000 + seed), torch.Generator().manual_seed(5000 + seed)
    gold = [response_metrics(sample(sft, make_batch(batch, rng)[0], generator=gen))["gold"].mean().item()
            for _ in range(short(EARLY, least=5))]
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


def comparisons_seeing_right(data):
    """The lab's comparisons of ``data`` with one more feature after the ten digit counts: 1 if the
    response is the right answer (gold +1), else 0. Returns (features_w, features_l (N, 11), gold_w, gold_l)."""
    cw, cl, gw, gl = lab()["comparisons"](data)
    return torch.cat([cw, (gw == 1).float()[:, None]], 1), torch.cat([cl, (gl == 1).float()[:, None]], 1), gw, gl


def fit_seeing_right(data, seed, steps=300, lr=0.05, l2=1e-3):
    """A linear RM on the digit counts *and* whether the answer is right, fit to ``data``'s rankings with
    the lab's bt_loss and train_reward_model's recipe (full-batch Adam, same steps, rate and L2).
    Returns a function (N, 11) -> (N,) scores."""
    torch.manual_seed(seed)
    fw, fl, _, _ = comparisons_seeing_right(data)
    w = torch.zeros(fw.shape[1], requires_grad=True)
    opt = torch.optim.Adam([w], lr=lr)
    for _ in range(steps):
        loss = lab()["bt_loss"](fw @ w, fl @ w) + l2 * (w ** 2).sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    w = w.detach()
    return lambda features: features @ w


def run_reward_model(seed):
    w = world(seed)
    out = {}
    for name, rm in {"fit": w.rm, "shuffled": shuffled_rm(seed), "counting": counting_rm()}.items():
        acc, ceiling = lab()["rm_accuracy"](rm, w.held_out)
        out[f"gap_{name}"] = ceiling - acc
        out[f"agreement_{name}"], _ = gold_order_agreement(rm, *lab()["comparisons"](w.held_out))
        out[f"min_weight_{name}"] = rm.w.min().item()
    # the control of "no better than counting": a linear model that also sees whether the answer is right
    seeing = fit_seeing_right(w.train, seed)
    fw, fl, gw, gl = comparisons_seeing_right(w.held_out)
    rw, rl = seeing(fw), seeing(fl)
    out["gap_seeing_right"] = ceiling - ((rw > rl).float() + 0.5 * (rw == rl).float()).mean().item()
    out["agreement_seeing_right"], _ = gold_order_agreement(seeing, fw, fl, gw, gl)
    for name in ("fit", "seeing_right"):        # ordering pairs like counting: the larger difference decides
        out[f"as_counting_{name}"] = max(abs(out[f"agreement_{name}"] - out["agreement_counting"]),
                                         abs(out[f"gap_{name}"] - out["gap_counting"]))
    out["about_nine_in_ten_fit"] = abs(out["agreement_fit"] - 0.9)
    out["about_nine_in_ten_shuffled"] = abs(out["agreement_shuffled"] - 0.9)
    out["accuracy_fit"], out["ceiling"] = lab()["rm_accuracy"](w.rm, w.held_out)
    out["accuracy_counting"] = out["ceiling"] - out["gap_counting"]
    out.update({f"w{d}": x for d, x in enumerate(w.rm.w.tolist())})
    out["heaviest_digit"] = float(w.rm.w.argmax())
    fit = {"rankings": "the labeler's", "features": "digit counts"}
    inputs = {"fit": fit, "shuffled": dict(fit, rankings="shuffled"),
              "seeing_right": dict(fit, features="digit counts and right answer")}
    out["inputs"] = {f"{fig}_{name}": spec for name, spec in inputs.items()
                     for fig in ("gap", "agreement", "min_weight", "as_counting", "about_nine_in_ten")}
    return out


SHUFFLED = "fit on shuffled rankings"
REWARD_MODEL = Experiment("lab12.reward_model", run_reward_model, smoke=True, criteria=(
    # "every digit has a positive weight": the smallest weight above 0
    Criterion("sign", "the fit's smallest digit weight (every digit positive)", "min_weight_fit", 0.0,
              mechanism="rankings", controls=((SHUFFLED, "min_weight_shuffled"),)),
    # "scores the same here, within about a point on both figures": a difference that rounds to at most one
    # point (0.015); the control sees more than digit counts, so it can do better than counting
    Criterion("as_counting", "max |fit - counting digits| of held-out accuracy, gold-order agreement",
              "as_counting_fit", 0.015, above=False, mechanism="features",
              controls=(("a linear model that also sees whether the answer is right", "as_counting_seeing_right"),)),
    # "right on about nine pairs out of ten": 0.9 to the nearest half pair in ten, |agreement - 0.9| <= 0.05
    Criterion("gold_order", "|agreement with the noise-free gold order - 0.9|", "about_nine_in_ten_fit", 0.05,
              above=False, mechanism="rankings", controls=((SHUFFLED, "about_nine_in_ten_shuffled"),)),
    # "within about a point of the best possible": a gap that rounds to at most one point (0.015)
    Criterion("ceiling", "noise ceiling - RM held-out accuracy", "gap_fit", 0.015, above=False,
              mechanism="rankings", controls=((SHUFFLED, "gap_shuffled"),)),
))


# ----------------------------------------------------------------------------- KL penalty
# The end figures are means over LAST iterations of 64 samples (640), the start figures over N_EVAL samples of
# scores in [-1, 1] (RM scores within about that): a difference of the two has a standard error of at most 0.05.
# "Up", "down", "improves", "drops" are read as a move of at least MOVE, twice that.
MOVE = 0.1


def run_kl_penalty(seed):
    start = world(seed).start
    out = {f"start_{k}": start[k] for k in METRICS}
    runs = {"beta0": 0.0, "default": default_beta(), "beta_ptx": PTX_BETA}
    for name, beta in runs.items():
        end = ppo(seed, beta=beta)
        out.update({f"{name}_{k}": end[k] for k in METRICS})
        # the hack: the proxy and the labeler disagree; both moves count, the smaller decides
        out[f"{name}_hack"] = min(end["rm"] - start["rm"], start["gold"] - end["gold"])
        out[f"{name}_half_nat"] = abs(math.log2(end["kl"] / 0.5))
    out["inputs"] = {f"{name}_{fig}": {"beta": beta} for name, beta in runs.items() for fig in ("hack", "half_nat")}
    return out


KL_PENALTY = Experiment("lab12.kl_penalty", run_kl_penalty, smoke=True, criteria=(
    # "RM score up, gold score down": both moves at least MOVE
    Criterion("hack", "beta = 0: min(RM rise, gold fall)", "beta0_hack", MOVE, mechanism="beta",
              controls=(("the default beta (0.1)", "default_hack"),), fmt="{:+.2f}"),
    # "settles at about half a nat": within a factor of 2 of 0.5 (0.25 to 1 nat), against "many nats" (beta
    # 0.05) and "tens of nats" (beta 0)
    Criterion("small_kl", "default beta: |log2(final KL / 0.5 nat)|", "default_half_nat", 1.0, above=False,
              mechanism="beta", controls=(("beta = 0", "beta0_half_nat"), (f"beta = {PTX_BETA:g}", "beta_ptx_half_nat")),
              fmt="{:.2f}"),
))


# ----------------------------------------------------------------------------- the hack, step by step
def kl_windows(hist):
    """The mean KL over the first LAST and the last LAST iterations of the run's last third."""
    kl = hist["kl"]
    third = kl[-(len(kl) // 3):]
    return sum(third[:LAST]) / LAST, sum(third[-LAST:]) / LAST


def spammed_digit(run):
    """The digit a run's final policy writes most."""
    return max(range(10), key=lambda d: run["digit_shares"][d])


def plateau_ratios(seed, beta):
    """(2,) the KL windows (kl_windows) of the runs at ``beta``, each over the KL of collapsing onto the digit
    that the beta = 0 run of its PPO seed writes most (collapse_kl), averaged over the PPO seeds (ppo_seeds)."""
    ratios = []
    for p in ppo_seeds(seed):
        bound = collapse_kl(world(seed).sft, spammed_digit(ppo(seed, beta=0.0, ppo_seed=p)))
        ratios.append([k / bound for k in kl_windows(ppo(seed, beta=beta, ppo_seed=p)["history"])])
    return [sum(window) / len(ratios) for window in zip(*ratios)]


def run_hack(seed):
    w = world(seed)
    start, beta0, default = w.start, ppo(seed, beta=0.0), ppo(seed, beta=default_beta())
    uncounted0, reversed0 = ppo(seed, rm="uncounted", beta=0.0), ppo(seed, rm="reversed", beta=0.0)
    spammed = spammed_digit(beta0)
    bound = collapse_kl(w.sft, spammed)
    floor = untrained_early_peak(w.sft, seed)
    # the plateau: both windows of the last third (30 iterations apart) within a factor of the bound, read from
    # the mean over PPO_SEEDS PPO seeds (one run's windows vary by about the margin from one PPO seed to the next)
    ratios = {beta: plateau_ratios(seed, beta) for beta in (0.0, default_beta())}
    plateau = {beta: max(abs(math.log(r)) for r in windows) for beta, windows in ratios.items()}
    out = {"start_gold": start["gold"], "collapse_kl": bound, "spammed_digit": float(spammed),
           "spammed_share": beta0["digit_shares"][spammed], "heaviest_digit": float(w.rm.w.argmax()),
           "untrained_peak": floor - start["gold"],
           # the rise, above what the same statistic gives the untrained model (sampling noise alone)
           "rise": beta0["early_gold_peak"] - floor, "rise_uncounted": uncounted0["early_gold_peak"] - floor,
           # both levels on the fitted RM's weights: the reversed RM's policy is judged by what the fit calls heavy
           "weight_level": weight_level(w.rm, beta0["digit_shares"]),
           "weight_level_reversed": weight_level(w.rm, reversed0["digit_shares"]),
           "malformed": beta0["malformed"], "malformed_default": default["malformed"],
           "plateau": plateau[0.0], "plateau_default": plateau[default_beta()]}
    out.update({f"kl_window_{i}_over_bound": r for i, r in enumerate(ratios[0.0])})
    beta0_in, default_in = {"beta": 0.0, "rm": "fit"}, {"beta": default_beta(), "rm": "fit"}
    out["inputs"] = {"rise": beta0_in, "rise_uncounted": dict(beta0_in, rm="uncounted"),
                     "weight_level": beta0_in, "weight_level_reversed": dict(beta0_in, rm="reversed"),
                     "malformed": beta0_in, "malformed_default": default_in,
                     "plateau": {**beta0_in, "seeds ppo": ppo_seeds(seed)},
                     "plateau_default": {**default_in, "seeds ppo": ppo_seeds(seed)}}
    return out


HACK = Experiment("lab12.hack", run_hack, criteria=(
    # "gold first rises": its early peak above the peak that sampling noise alone gives the untrained SFT
    # model (the same statistic over as many batches); the control's RM has no count component
    Criterion("rises_first", f"beta = 0: peak gold in the first {EARLY} iterations - the untrained model's",
              "rise", 0.0, mechanism="rm",
              controls=(("the fitted RM less its digit-count component (w - mean w), beta = 0", "rise_uncounted"),),
              fmt="{:+.2f}"),
    # "four copies of one heavily weighted digit": the digits written sit in the upper half of the RM's weights
    Criterion("spams_heavy", "beta = 0: final digits' weight in the RM (lightest digit 0, heaviest 1)",
              "weight_level", 0.5, mechanism="rm",
              controls=(("the RM's weights reversed in order (the heaviest given to the lightest digit), beta = 0",
                         "weight_level_reversed"),), fmt="{:.2f}"),
    # "every answer malformed": all but one in twenty of the last iterations' answers
    Criterion("all_malformed", "beta = 0: final malformed share", "malformed", 0.95, mechanism="beta",
              controls=(("the default beta (0.1)", "malformed_default"),), fmt="{:.2f}"),
    # "levels off near -log pi_ref(dddd | x) (within a factor of 1.5)": the KL of the first and of the last 10
    # iterations of the last third both within a factor of 1.5 of it, in the mean run (each run's KL over its
    # own dddd's bound, averaged over the PPO seeds, the control's at the same PPO seeds against the same bounds)
    Criterion("kl_plateau", "beta = 0: max over two windows of the last third of |log(KL / -log pi_ref(dddd))| "
              f"(KL / bound: means over {PPO_SEEDS} PPO seeds)", "plateau", math.log(1.5), above=False,
              mechanism="beta",
              controls=(("the default beta (0.1)", "plateau_default"),), fmt="{:.2f}"),
))


# ----------------------------------------------------------------------------- within the KL budget
def run_improves(seed):
    start = world(seed).start
    out = {"inputs": {}}
    for name in ("fit", "shuffled"):
        end = ppo(seed, rm=name, beta=default_beta())
        out[f"{name}_gold_change"] = end["gold"] - start["gold"]
        out[f"{name}_malformed_drop"] = start["malformed"] - end["malformed"]
        out["inputs"].update({f"{name}_{fig}": {"rm": name} for fig in ("gold_change", "malformed_drop")})
    return out


IMPROVES = Experiment("lab12.improves", run_improves, criteria=(
    # "the gold score improves over the SFT model": by at least MOVE
    Criterion("improves", "default beta: final gold - SFT gold", "fit_gold_change", MOVE, mechanism="rm",
              controls=(("the RM fit on shuffled rankings, same beta", "shuffled_gold_change"),), fmt="{:+.2f}"),
    # "the malformed fraction drops": by at least MOVE
    Criterion("fewer_malformed", "default beta: SFT malformed share - final", "fit_malformed_drop", MOVE,
              mechanism="rm", controls=(("the RM fit on shuffled rankings, same beta", "shuffled_malformed_drop"),),
              fmt="{:+.2f}"),
))


# ----------------------------------------------------------------------------- controller
def run_controller(seed):
    """Relative errors |KL - target| / target over the last third: the notebook's run (from the default
    beta, the lab's 120 iterations) and, over FAR_ITERS, the worst of the two far starts; as given and
    with the update's sign flipped."""
    out = {"inputs": {}}
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
            out["inputs"][f"{name}_{which}_error"] = {"controller": controller, "starts": which}
    return out


FLIPPED = "the controller's sign flipped (beta * (1 - 0.1 e)), same start(s)"
CONTROLLER = Experiment("lab12.controller", run_controller, criteria=(
    # "hovers around its target": within a third of it (0.33 to 0.67 nat for a target of 0.5)
    Criterion("hovers", f"the notebook's run (from the default beta, 120 iterations): |KL - {TARGET:g}| / {TARGET:g}, "
              "last third", "given_notebook_error", 1 / 3, above=False, mechanism="controller",
              controls=((FLIPPED, "flipped_notebook_error"),), fmt="{:.2f}"),
    # "lets you set that budget as a KL instead of a beta": from starts an order of magnitude apart, the same
    # "around the target" as hovers (within a third); FAR_ITERS from the controller's largest step (above)
    Criterion("reaches", f"from beta {STARTS[0]:g} and {STARTS[1]:g}, {FAR_ITERS} iterations: max |KL - t| / t, "
              "last third", "given_far_error", 1 / 3, above=False, mechanism="controller",
              controls=((FLIPPED, "flipped_far_error"),), fmt="{:.2f}"),
))


# ----------------------------------------------------------------------------- PPO-ptx
# "keeps the SFT model's accuracy": at least 90% of it (loses less than a tenth); "still raises the RM score":
# by at least MOVE
ACC_KEPT = 0.9


def run_ptx(seed):
    start = world(seed).start
    out = {"start_acc": start["acc"], "start_rm": start["rm"], "inputs": {}}
    for name, coef in (("ptx", PTX_COEF), ("plain", 0.0)):
        run = ppo(seed, beta=PTX_BETA, ptx_coef=coef) if coef else ppo(seed, beta=PTX_BETA)
        out.update({f"{name}_acc": run["acc"], f"{name}_gold": run["gold"], f"{name}_rm": run["rm"],
                    f"{name}_kept": run["acc"] / start["acc"], f"{name}_rm_gain": run["rm"] - start["rm"]})
        # both at once: the smaller margin decides (>= 0: accuracy kept and RM score gained)
        out[f"{name}_margin"] = min(out[f"{name}_kept"] - ACC_KEPT, out[f"{name}_rm_gain"] - MOVE)
        out["inputs"][f"{name}_margin"] = {"ptx_coef": coef}
    # "yet it ends below plain PPO at beta = 0.1": the ptx run's gold minus plain PPO's at the default beta;
    # the control gives the plain run the ptx run's beta (there the supervised term is ahead)
    out["ptx_minus_default"] = out["ptx_gold"] - ppo(seed)["gold"]
    out["ptx_minus_plain_same_beta"] = out["ptx_gold"] - out["plain_gold"]
    out["inputs"].update({"ptx_minus_default": {"plain run's beta": default_beta()},
                          "ptx_minus_plain_same_beta": {"plain run's beta": PTX_BETA}})
    return out


PTX = Experiment("lab12.ptx", run_ptx, criteria=(
    Criterion("keeps_and_gains", f"beta {PTX_BETA:g}, ptx {PTX_COEF:g}: min(accuracy / SFT's - {ACC_KEPT:g}, "
              f"RM gain - {MOVE:g})", "ptx_margin", 0.0, mechanism="ptx_coef",
              controls=((f"ptx off (ptx_coef = 0) at beta {PTX_BETA:g}", "plain_margin"),), fmt="{:+.2f}"),
    # "ends below": lower at the two decimals the sentence prints its gold scores with (a tie is not below)
    Criterion("below_default", f"ptx's gold at beta {PTX_BETA:g} - plain PPO's at the default beta", "ptx_minus_default",
              -0.01, above=False, mechanism="plain run's beta",
              controls=((f"plain PPO at the ptx run's beta {PTX_BETA:g}", "ptx_minus_plain_same_beta"),),
              fmt="{:+.2f}"),
))


# ----------------------------------------------------------------------------- health signals
HEALTH_LR = RUN_B["lr"]   # run B's learning rate (Lab 12's Experiment 9; run A: RLHFConfig's default)
FIRST = 10                # "the first iterations": the value loss's mean over the first FIRST
LOWER = 0.05              # "a lower entropy ... collapsed further": lower by at least 0.05 nat (a tenth of run A's)
# A final policy's entropy varies from one PPO seed to the next (run B's by a tenth of a nat, its steps being
# chaotic; run A's by a few hundredths), more than a single pair of runs can tell apart from LOWER; run B's clip
# fraction over the last third varies by about its margin (seed 0: 0.13 to 0.22): both are means over the
# PPO seeds (ppo_seeds), run A's and run B's at the same seeds, the entropy's reseeded control over as many
# other seeds (the next PPO_SEEDS j). The reseeded control of the value loss is run A at PPO seed seed + RESEED


@functools.lru_cache(maxsize=1)
def response_tree():
    return ResponseTree.build()


def run_health(seed):
    """Experiment 9's figures of run A (the default learning rate) and run B (HEALTH_LR), per seed, and of
    A2, run A with another PPO seed (so that a ratio to run A is not 1 by definition). The entropies: each a
    mean over PPO_SEEDS PPO seeds (``ppo_seeds``), the control's over other seeds; and so is each run's clip
    fraction over the last third (runs A and B at the same PPO seeds)."""
    runs = {"A": ppo(seed, beta=default_beta()), "B": ppo(seed, beta=default_beta(), lr=HEALTH_LR),
            "A2": ppo(seed, beta=default_beta(), ppo_seed=seed + RESEED)}
    out = {"sft_entropy": exact_entropy(response_tree(), world(seed).sft)}
    for name, run in runs.items():
        hist = run["history"]
        out.update({f"{name}_clip_first": hist["clip_frac"][0],
                    f"{name}_clip_last_third": last_third(hist, "clip_frac"),
                    # the KL of the rollout after the first update (iteration 0's is that of the SFT model: 0)
                    f"{name}_kl_after_one": hist["kl"][1], f"{name}_kl_last_third": last_third(hist, "kl"),
                    f"{name}_value_loss_first": sum(hist["value_loss"][:FIRST]) / FIRST})
    first, other = ppo_seeds(seed), ppo_seeds(seed, PPO_SEEDS)
    out.update({"A_entropy": mean_over(seed, first, final_entropy),
                "B_entropy": mean_over(seed, first, final_entropy, lr=HEALTH_LR),
                "A2_entropy": mean_over(seed, other, final_entropy),
                "A_mean_clip_last_third": mean_over(seed, first, clip_last_third),
                "B_mean_clip_last_third": mean_over(seed, first, clip_last_third, lr=HEALTH_LR)})
    for name in ("B", "A2"):
        out[f"{name}_value_loss_ratio"] = out[f"{name}_value_loss_first"] / out["A_value_loss_first"]
        out[f"{name}_entropy_below_A"] = out["A_entropy"] - out[f"{name}_entropy"]
    a, b, a2 = {"lr": default_lr(), "seed ppo": seed}, {"lr": HEALTH_LR, "seed ppo": seed}, {"lr": default_lr(), "seed ppo": seed + RESEED}
    out["inputs"] = {**{f"{name}_{fig}": spec for name, spec in (("A", a), ("B", b))
                        for fig in ("clip_first", "clip_last_third", "kl_after_one")},
                     **{f"{name}_value_loss_ratio": spec for name, spec in (("B", b), ("A2", a2))},
                     "A_mean_clip_last_third": {"lr": default_lr(), "seeds ppo": first},
                     "B_mean_clip_last_third": {"lr": HEALTH_LR, "seeds ppo": first},
                     "B_entropy_below_A": {"lr": HEALTH_LR, "seeds ppo": first},
                     "A2_entropy_below_A": {"lr": default_lr(), "seeds ppo": other}}
    return out


def mean_over(seed, seeds, figure, **changes):
    """The mean of ``figure(run)`` over runs at the default beta (and ``changes``), one per PPO seed of ``seeds``."""
    return sum(figure(ppo(seed, beta=default_beta(), ppo_seed=p, **changes)) for p in seeds) / len(seeds)


def final_entropy(run):
    """The exact entropy of the run's final policy (nats)."""
    return exact_entropy(response_tree(), run["policy"])


def clip_last_third(run):
    """The run's clip fraction, mean over the last third of its iterations."""
    return last_third(run["history"], "clip_frac")


def default_lr():
    return lab()["RLHFConfig"]().lr


RUN_A = "run A: the default learning rate (3e-4)"
RESEEDED = f"{RUN_A}, PPO seed + {RESEED}"
HEALTH = Experiment("lab12.health", run_health, smoke=True, criteria=(
    # "a few percent in run A": at most 5%; "still above 5% at the end" in run B, its control
    Criterion("clip_normal", f"run A: clip fraction, last third (a few percent; means over {PPO_SEEDS} PPO seeds)",
              "A_mean_clip_last_third", 0.05, above=False, mechanism="lr",
              controls=((f"run B: learning rate {HEALTH_LR:g}", "B_mean_clip_last_third"),),
              fmt="{:.3f}"),
    # "in run B more than half at the first iteration"
    Criterion("clip_first", "run B: clip fraction at the first iteration", "B_clip_first", 0.5, mechanism="lr",
              controls=((RUN_A, "A_clip_first"),), fmt="{:.2f}"),
    # "jumps to several nats after a single update": three or more
    Criterion("kl_jump", "run B: KL to the SFT model after one update (nats)", "B_kl_after_one", 3.0, mechanism="lr",
              controls=((RUN_A, "A_kl_after_one"),), fmt="{:.2f}"),
    # "more than ten times run A's over the first ten iterations"
    Criterion("value_loss", f"value loss over the first {FIRST} iterations / run A's", "B_value_loss_ratio", 10.0,
              mechanism="lr", controls=((RESEEDED, "A2_value_loss_ratio"),), fmt="{:.1f}"),
    Criterion("sharper", f"run A's exact entropy of the final policy - run B's (nats; means over {PPO_SEEDS} PPO seeds)",
              "B_entropy_below_A", LOWER, mechanism="lr",
              controls=((f"{RUN_A}, {PPO_SEEDS} other PPO seeds", "A2_entropy_below_A"),), fmt="{:+.2f}"),
))

# ----------------------------------------------------------------------------- the critic and GAE (Question 7)
CRITIC_FIT = 20           # batches the critic is fitted on (the notebook's CriticView default)


def critic_curves(seed, ppo_seed, fit_iters):
    """CriticView's RMS-error curves over LAMBDAS ({"critic", "exact", "share"}) on the default run of PPO seed
    ``ppo_seed``, its critic fitted on ``fit_iters`` batches (the fit and the evaluation rollouts seeded by it)."""
    from types import SimpleNamespace
    from course_utils.views.critic import CriticView
    w = world(seed)
    runs = SimpleNamespace(reward=lambda: (w.rm, w.rm_offset), sft=w.sft,
                           run=lambda c: (ppo(seed, beta=c.beta, ppo_seed=ppo_seed)["policy"], None))
    fns = (lab()["kl_penalized_rewards"], lab()["gae_per_token"], lab()["ppo_rlhf_loss"])
    return CriticView(runs, lab()["RLHFConfig"](), *fns, fit_iters=fit_iters, seed=ppo_seed).prepare().curves


def run_critic(seed):
    """Experiment 10's figures on the default run of the seed: the learned critic's error at lambda = 0
    (RMS of GAE(0)'s returns with the critic against those with V^pi), with a critic fitted on the
    notebook's CRITIC_FIT batches and on a tenth of them; and the lambda where the RMS error of the returns
    against Q^pi is smallest, with the learned critic and with the exact V^pi in place of it, each curve a
    mean over the default runs of PPO_SEEDS PPO seeds (ppo_seeds) before its smallest is taken."""
    from course_utils.views.critic import LAMBDAS
    fits = {"fit": short(CRITIC_FIT, least=2), "tenth": max(1, short(CRITIC_FIT, least=2) // 10)}
    curves = [critic_curves(seed, p, fits["fit"]) for p in ppo_seeds(seed)]      # curves[0]: the world's PPO seed
    out, inputs = {}, {}
    for name, share in (("fit", curves[0]["share"]), ("tenth", critic_curves(seed, seed, fits["tenth"])["share"])):
        out[f"bias_{name}"] = share[0]
        out[f"bias_vs_0_04_{name}"] = abs(math.log(share[0] / 0.04))
        inputs[f"bias_vs_0_04_{name}"] = {"critic fitted on": fits[name], "values": "critic"}
    # one run's curve is nearly flat near its smallest (seed 0: within 0.002 RMS from 0.85 to 1), so which lambda
    # is smallest moves with the PPO seed (seed 0: 1.0 or 0.95): the curves are averaged over the PPO seeds first
    for values in ("critic", "exact"):
        mean = sum(c[values] for c in curves) / len(curves)
        out[f"best_lambda_{values}"] = LAMBDAS[min(range(len(LAMBDAS)), key=lambda i: mean[i])]
        out[f"near_0_9_{values}"] = abs(out[f"best_lambda_{values}"] - 0.9)
        inputs[f"near_0_9_{values}"] = {"critic fitted on": fits["fit"], "values": values, "seeds ppo": ppo_seeds(seed)}
    out["inputs"] = inputs
    return out


CRITIC = Experiment("lab12.critic", run_critic, criteria=(
    # Question 7's model answer: "a bias (about 0.04 RMS here, the dashed line)": within a factor of 1.5
    Criterion("bias", "|log(RMS of the critic's part of GAE(0)'s returns / 0.04)|", "bias_vs_0_04_fit", math.log(1.5),
              above=False, mechanism="critic fitted on",
              controls=(("a critic fitted on a tenth of the batches", "bias_vs_0_04_tenth"),), fmt="{:.2f}"),
    # "The total is smallest at a large lambda, between 0.8 and 1 here" (the rubric: 0.8 to 1): within 0.1 of 0.9;
    # "a better critic ... moves the best lambda towards 0": with V^pi itself it is 0
    Criterion("best_lambda", "|the lambda of the smallest RMS error of the returns - 0.9| (RMS errors: means over "
              f"{PPO_SEEDS} PPO seeds)", "near_0_9_critic", 0.1, above=False, mechanism="values",
              controls=(("the exact V^pi in place of the critic", "near_0_9_exact"),), fmt="{:.2f}"),
))

EXPERIMENTS = [REWARD_MODEL, KL_PENALTY, HACK, IMPROVES, CONTROLLER, PTX, HEALTH, CRITIC]
