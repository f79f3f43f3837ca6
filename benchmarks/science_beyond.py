"""The claims of notebooks/beyond_ppo.ipynb as science experiments (see science.py): DPO and GRPO from
Lab 12's world of each seed (course_staff.beyond.methods.make_world), judged exactly on the response tree.

dpo    Methods are compared at matched KL, on the gold-vs-KL frontier of a PPO beta sweep, not at the
       same nominal beta (at beta 0.05 DPO moves about 0.7 nats from the SFT model, PPO about 10):
       DPO at beta 0.05 lies on PPO's frontier (|its gold - PPO's gold at DPO's KL| small). Control:
       PPO at the same nominal beta (KL not matched), where PPO hacks the RM.
       DPO overfits the rankings: its gold score falls from the first epoch to the fourth, while the
       implicit reward's accuracy on held-out pairs stays put. Controls: as many Adam steps in one
       pass over four times as many rankings (no pair seen twice); a noise-free labeler, whose
       held-out pairs do see the fall.
grpo   What makes GRPO (Shao et al.: k3 in the loss) drift far from the optimum pi*_RM of its beta, by
       a 2 x 2 ablation, each cell over the seeds: where the KL goes (k3 in the loss, or PPO's KL in
       the reward) x whether beta's term is on the score's scale (divided by the group's std with the
       score) or not. With beta's term off the score's scale GRPO drifts whichever the placement;
       GRPO lands near pi*_RM only with the KL in the reward *and* on the score's scale.
budget GRPO's 80 iterations cost about the CPU time of PPO's 120 (within 20%). Control: GRPO for
       PPO's 120 iterations.

    run_dpo(seed), run_grpo(seed), run_budget(seed) -> {measurement: float};  EXPERIMENTS for science.py

It joins science.py's table with "science_beyond" in science.MODULES (Criterion and Experiment are
science.py's). A seed costs about 200 s of CPU: DPO and the PPO sweep 110, GRPO 50, budget 40.
"""

import dataclasses
import functools
import math
import statistics

from course_staff.beyond.experiment import Referee
from course_staff.beyond.methods import DPOConfig, GRPOConfig, lab, make_world, one_thread, train_dpo, train_grpo, train_ppo
from course_utils.labeler import ranked_data
from course_utils.world import K, spaced

from benchmarks.science import Criterion, Experiment

HACK_BETA = 0.05          # PPO hacks the RM here (Lab 12)
BETA = 0.1                # Lab 12's default beta
SWEEP = (0.05, 0.06, 0.07, 0.08, 0.1, 0.2)    # PPO's frontier: KL from about 10 nats down to 0.2
GRPO_CELLS = {(kl_in, scaled): f"grpo_{kl_in}_{'scaled' if scaled else 'unscaled'}"
              for kl_in in ("loss", "reward") for scaled in (False, True)}
ARGMAX_BETA = 0.001       # Lab 12's stand-in for beta = 0 (the RM's argmax)
NOISE_FREE_KAPPA = 30.0   # a labeler that (almost) never errs: sigmoid(30) = 1 - 1e-13


@functools.lru_cache(maxsize=1)
def world(seed):
    """The seed's world (Lab 12's SFT model, rankings, RM, offset) and its referee (exact figures)."""
    w = make_world(seed)
    return w, Referee(w)


def _on_one_thread(run_seed):
    @functools.wraps(run_seed)
    def run(seed):
        with one_thread():
            return run_seed(seed)
    return run


def _gold(referee, policy, beta):
    return referee.judge(policy, beta)["rm"]["gold"]


def _dpo(w, referee, beta, **cfg):
    """One DPO run's history, with the exact gold score at each evaluation in history["after"]."""
    return train_dpo(w, DPOConfig(beta=beta, seed=w.seed, **cfg), after=lambda p: _gold(referee, p, beta))[1]


@functools.lru_cache(maxsize=8)
def ppo_policy(seed, beta):
    """Lab 12's PPO at beta from the seed's world (cached)."""
    return train_ppo(world(seed)[0], beta)[0]


def ppo_figures(seed, beta, judged_at=None):
    """Exact figures ({"gold", "kl", "kl_to_opt", ...}, against pi*_RM of ``judged_at``, by default beta)
    of Lab 12's PPO trained at beta."""
    return world(seed)[1].judge(ppo_policy(seed, beta), judged_at or beta)["rm"]


def frontier_gold(points, kl):
    """PPO's gold at this KL, linear in log KL between the two sweep points around it.

    points: [(kl, gold)] of the sweep. NaN outside the sweep's range (no extrapolation)."""
    points = sorted(points)
    for (k0, g0), (k1, g1) in zip(points, points[1:]):
        if k0 <= kl <= k1:
            t = (math.log(kl) - math.log(k0)) / (math.log(k1) - math.log(k0))
            return g0 + t * (g1 - g0)
    return float("nan")


# ----------------------------------------------------------------------------- DPO
@_on_one_thread
def run_dpo(seed):
    w, referee = world(seed)
    sweep = {beta: ppo_figures(seed, beta) for beta in SWEEP}
    dpo = referee.judge(train_dpo(w, DPOConfig(beta=HACK_BETA, seed=w.seed))[0], HACK_BETA)["rm"]
    matched = frontier_gold([(f["kl"], f["gold"]) for f in sweep.values()], dpo["kl"])
    out = {"sft_gold": _gold(referee, referee.ref, HACK_BETA), "dpo_gold_005": dpo["gold"], "dpo_kl_005": dpo["kl"],
           "ppo_gold_005": sweep[HACK_BETA]["gold"], "ppo_kl_005": sweep[HACK_BETA]["kl"],
           "ppo_gold_at_dpo_kl": matched,
           "dpo_off_frontier": abs(dpo["gold"] - matched),
           "dpo_off_ppo_same_beta": abs(dpo["gold"] - sweep[HACK_BETA]["gold"])}
    out.update({f"ppo_{k}_{beta:g}": f[k] for beta, f in sweep.items() for k in ("gold", "kl")})

    hist = _dpo(w, referee, BETA)
    gold, held = hist["after"], hist["held_acc"]
    out.update(dpo_gold_first=gold[0], dpo_gold_last=gold[-1], dpo_fall=gold[0] - gold[-1],
               held_first=held[0], held_last=held[-1], held_move=abs(held[-1] - held[0]))

    # control: the same number of Adam steps, evaluated at the same steps, on 4x as many fresh rankings
    fresh = dataclasses.replace(w, train_data=ranked_data(w.sft, 4 * len(w.train_data), k=K, seed=spaced(seed).rankings + 5))
    gold = _dpo(fresh, referee, BETA, epochs=1, eval_every=hist["step"][0])["after"]
    out["dpo_fall_fresh"] = gold[0] - gold[-1]

    # control: a labeler that never errs, for the training and the held-out rankings
    sharp = dataclasses.replace(
        w, train_data=ranked_data(w.sft, len(w.train_data), k=K, seed=spaced(seed).rankings, kappa=NOISE_FREE_KAPPA),
        held_out=ranked_data(w.sft, len(w.held_out), k=K, seed=spaced(seed).held_out, kappa=NOISE_FREE_KAPPA))
    hist = _dpo(sharp, referee, BETA)
    out.update(dpo_fall_noise_free=hist["after"][0] - hist["after"][-1],
               held_move_noise_free=abs(hist["held_acc"][-1] - hist["held_acc"][0]))
    return out


# ----------------------------------------------------------------------------- GRPO
@_on_one_thread
def run_grpo(seed):
    w, referee = world(seed)
    out = {"ppo_kl_to_opt": ppo_figures(seed, BETA)["kl_to_opt"]}
    for (kl_in, scaled), name in GRPO_CELLS.items():
        policy, _ = train_grpo(w, GRPOConfig(beta=BETA, kl_in=kl_in, kl_scaled=scaled, seed=seed))
        figures = referee.judge(policy, BETA)["rm"]
        out.update({f"{name}_kl_to_opt": figures["kl_to_opt"], f"{name}_gold": figures["gold"], f"{name}_kl": figures["kl"]})
    # beta's term off the score's scale: the smaller drift of the two placements decides
    out["unscaled_kl_to_opt"] = min(out["grpo_loss_unscaled_kl_to_opt"], out["grpo_reward_unscaled_kl_to_opt"])
    return out


# ----------------------------------------------------------------------------- the optima
@_on_one_thread
def run_optima(seed):
    w, referee = world(seed)
    sft = _gold(referee, referee.ref, HACK_BETA)
    out = {"sft_gold": sft, "ppo_kl_to_opt": ppo_figures(seed, BETA)["kl_to_opt"],
           "ppo_other_beta_kl_to_opt": ppo_figures(seed, HACK_BETA, judged_at=BETA)["kl_to_opt"],
           "sft_kl_to_opt": referee.judge(referee.ref, BETA)["rm"]["kl_to_opt"]}
    for beta in (ARGMAX_BETA, HACK_BETA, BETA):
        for name in ("rm", "gold"):
            out[f"opt_{name}_gold_{beta:g}"] = _gold(referee, referee.optimum(name, beta).logp, beta)
        out[f"opt_rm_below_sft_{beta:g}"] = sft - out[f"opt_rm_gold_{beta:g}"]
    # Lab 12's Experiment 8: at beta 0 (computed at 0.001) and 0.05 the optimum hacks; the smaller fall decides
    out["opt_rm_below_sft_small"] = min(out[f"opt_rm_below_sft_{ARGMAX_BETA:g}"], out[f"opt_rm_below_sft_{HACK_BETA:g}"])
    return out


@_on_one_thread
def run_budget(seed, reps=3, ppo_iters=None):
    """CPU time of GRPO against PPO: whole runs (PPO's 120 iterations, GRPO's 80) and, as the
    control, GRPO for as many iterations as PPO. Measured in turn, ``reps`` times, so that all three
    see the same load; each cost is the fastest of its ``reps`` runs (a neighbour on the machine only
    ever adds time). Whole runs, because a GRPO iteration's cost changes along a run: over the first
    30 PPO iterations only, seed 4's GRPO did 30 iterations in about the time of 20."""
    ppo_iters = ppo_iters or lab("lab12")["RLHFConfig"]().iters
    w, _ = world(seed)
    share = round(ppo_iters * GRPOConfig().iters / lab("lab12")["RLHFConfig"]().iters)
    cpu = {"ppo": [], "share": [], "same": []}
    for _ in range(reps):
        cpu["ppo"].append(train_ppo(w, BETA, iters=ppo_iters)[1]["cpu"])
        for key, iters in (("share", share), ("same", ppo_iters)):
            cpu[key].append(train_grpo(w, GRPOConfig(beta=BETA, iters=iters, seed=seed))[1]["cpu"])
    share, same = min(cpu["share"]) / min(cpu["ppo"]), min(cpu["same"]) / min(cpu["ppo"])
    return {"cpu_ratio": share, "budget_mismatch": abs(share - 1), "cpu_ratio_same_iters": same,
            "budget_mismatch_same_iters": abs(same - 1)}


DPO = Experiment("beyond.dpo", run_dpo, criteria=(
    # measured on seed 0: 0.005 (DPO 0.78 at KL 0.67; PPO's sweep 0.77 there); threshold 0.1
    Criterion("on_frontier", f"|DPO's gold - PPO's gold at DPO's KL| (beta {HACK_BETA:g})", "dpo_off_frontier", 0.1,
              above=False, controls=((f"PPO at the same nominal beta {HACK_BETA:g} (KL not matched)",
                                      "dpo_off_ppo_same_beta"),)),
    Criterion("overfit", "DPO's gold, epoch 1 - epoch 4 (beta 0.1)", "dpo_fall", 0.05,
              controls=(("as many steps on 4x fresh rankings", "dpo_fall_fresh"),)),
    # measured: 0.002-0.006 ("less than a point"); threshold 0.01, a point
    Criterion("blind", "|held-out pair accuracy, epoch 4 - epoch 1|", "held_move", 0.01, above=False,
              controls=(("noise-free labeler", "held_move_noise_free"),)),
))

GRPO = Experiment("beyond.grpo", run_grpo, criteria=(
    # measured on seed 0: k3 in the loss 17 nats, KL in the reward 24 (unscaled); scaled 0.78 and 0.02.
    # threshold 3 nats: a fifth of the unscaled band's bottom, four times the scaled cells' top
    Criterion("unscaled_drifts", "beta's term off the score's scale: min over placements of KL(GRPO || pi*_RM)",
              "unscaled_kl_to_opt", 3.0,
              controls=(("on the score's scale, k3 in the loss", "grpo_loss_scaled_kl_to_opt"),
                        ("on the score's scale, KL in the reward", "grpo_reward_scaled_kl_to_opt"))),
    # measured: 0.02-0.05 over 5 seeds (the scaled KL in the reward); threshold 0.2
    Criterion("reward_scaled_lands", "KL in the reward, on the score's scale: KL(GRPO || pi*_RM)",
              "grpo_reward_scaled_kl_to_opt", 0.2, above=False,
              controls=(("KL in the reward, off the score's scale", "grpo_reward_unscaled_kl_to_opt"),
                        ("k3 in the loss, on the score's scale", "grpo_loss_scaled_kl_to_opt"))),
))

OPTIMA = Experiment("beyond.optima", run_optima, criteria=(
    # exact: the labeler's optimum 1.00 on seed 0, the RM's -0.62; threshold 0.95
    Criterion("reward_limits", f"gold of the labeler's optimum pi*_lab (beta {HACK_BETA:g})", f"opt_gold_gold_{HACK_BETA:g}",
              0.95, controls=(("the RM's optimum pi*_RM, same beta", f"opt_rm_gold_{HACK_BETA:g}"),), fmt="{:+.2f}"),
    # exact: SFT +0.52, pi*_RM -0.62 on seed 0 (a fall of 1.15); threshold 0.5
    Criterion("optimum_hacks", f"min over beta {ARGMAX_BETA:g}, {HACK_BETA:g} of SFT gold - gold of pi*_RM",
              "opt_rm_below_sft_small", 0.5,
              controls=((f"beta {BETA:g}", f"opt_rm_below_sft_{BETA:g}"),), fmt="{:+.2f}"),
    # measured on seed 0: 0.11 on this machine, 0.03 in the cache (machines differ in the last bits, and
    # PPO's sampling amplifies them); threshold 0.25
    Criterion("ppo_near_opt", f"KL(PPO || pi*_RM of its beta {BETA:g})", "ppo_kl_to_opt", 0.25, above=False,
              controls=((f"PPO trained at beta {HACK_BETA:g}, against the same pi*_RM", "ppo_other_beta_kl_to_opt"),)),
))

BUDGET = Experiment("beyond.budget", run_budget, criteria=(
    # whole runs, fastest of 3, 5 seeds: 0.05-0.15 (the claim's "within 20%"); control 0.25-0.62
    Criterion("budget", "|CPU(GRPO, 80 it) / CPU(PPO, 120 it) - 1|", "budget_mismatch", 0.2, above=False,
              controls=(("GRPO for PPO's 120 iterations", "budget_mismatch_same_iters"),)),
))

EXPERIMENTS = [OPTIMA, DPO, GRPO, BUDGET]
