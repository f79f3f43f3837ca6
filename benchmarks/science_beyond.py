"""The claims of notebooks/beyond_ppo.ipynb as science experiments (see science.py): DPO and GRPO from
Lab 12's world of each seed (course_staff.beyond.methods.make_world), judged exactly on the response tree.
DPO and GRPO are Lab 13's reference train_dpo and train_grpo (through course_staff.beyond.methods).

dpo    Methods are compared at matched KL, on the gold-vs-KL frontier of a PPO beta sweep, not at the
       same nominal beta (at beta 0.05 DPO moves about 0.7 nats from the SFT model, PPO about 10):
       DPO at beta 0.05 lies on PPO's frontier (|its gold - PPO's gold at DPO's KL| small). Control:
       DPO on the same rankings shuffled (no preference to learn), read on the frontier at its own KL.
       DPO overfits the rankings: its gold score falls by about 0.1 from the first epoch to the fourth
       (control: as many Adam steps in one pass over four times as many rankings, no pair seen twice),
       while the implicit reward's accuracy on held-out pairs stays put after the first epoch (control: the
       same pairs read from the start, the SFT model, where DPO's first epoch moves them by points).
grpo   What makes GRPO (Shao et al.: k3 in the loss) drift far from the optimum pi*_RM of its beta, by
       a 2 x 2 ablation: where the KL goes (k3 in the loss, or PPO's KL in the reward) x whether beta's
       term is on the score's scale (divided by the group's std with the score) or not. Each placement
       is a criterion whose control takes beta's term off the score's scale: with the KL in the reward
       GRPO lands near pi*_RM, with k3 in the loss it stays within a few nats; off the scale both drift.
optima The exact optima of the labeler and of the RM; PPO near pi*_RM (control: no PPO iteration, the
       SFT model where PPO starts).
budget GRPO's 80 iterations against PPO's 120 in CPU time: a figure of the measurement lane (MEASURED),
       printed with the machine that measured it, not a criterion.

    run_dpo(seed), run_grpo(seed), run_budget(seed) -> {measurement: float};  EXPERIMENTS for science.py

It joins science.py's table with "science_beyond" in science.MODULES (Criterion and Experiment are
criteria.py's). A seed costs about 200 s of CPU: DPO and the PPO sweep 110, GRPO 50, budget 40.
"""

import dataclasses
import functools
import math

from course_staff.beyond.experiment import Referee
from course_staff.beyond.methods import as_lab13, lab, make_world, one_thread, dpo_on, grpo_on, ppo_on
from course_staff.solutions import given_default
from course_utils.labeler import ranked_data
from course_utils.views.optimum import BETA_ZERO                # Lab 12's stand-in for beta = 0 (the RM's argmax)
from course_utils.world import K, spaced

from benchmarks.criteria import Criterion, Experiment, short

HACK_BETA = 0.05          # PPO hacks the RM here (Lab 12)
BETA = given_default("lab12", "RLHFConfig", "beta")       # Lab 12's default beta, read from its RLHFConfig
EPOCHS = given_default("lab13", "DPOConfig", "epochs")    # Lab 13's DPO epochs: the "fourth epoch" of the claims
SWEEP = (0.05, 0.06, 0.07, 0.08, 0.1, 0.2)    # PPO's frontier: KL from about 10 nats down to 0.2
WIDER = (0.03, 0.02, 0.01)     # smaller betas (larger KL), added in turn while a reading lies past the sweep
GRPO_CELLS = {(kl_in, scaled): f"grpo_{kl_in}_{'scaled' if scaled else 'unscaled'}"
              for kl_in in ("loss", "reward") for scaled in (False, True)}


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


def dpo_config(w, beta, **changes):
    """Lab 13's DPOConfig at beta, seeded by the world's seed."""
    return lab("lab13")["DPOConfig"](beta=beta, seed=w.seed, **changes)


def _dpo(w, referee, beta, after, **cfg):
    """One DPO run's history, with ``after(policy)`` at each evaluation in history["after"]."""
    return dpo_on(w, dpo_config(w, beta, **cfg), after=after)[1]


@functools.lru_cache(maxsize=8)
def ppo_policy(seed, beta):
    """Lab 12's PPO at beta from the seed's world (cached; shorter in a smoke run)."""
    return ppo_on(world(seed)[0], beta, iters=short(lab("lab12")["RLHFConfig"]().iters))[0]


def ppo_figures(seed, beta, judged_at=None):
    """Exact figures ({"gold", "kl", "kl_to_opt", ...}, against pi*_RM of ``judged_at``, by default beta)
    of Lab 12's PPO trained at beta."""
    return world(seed)[1].judge(ppo_policy(seed, beta), judged_at or beta)["rm"]


def frontier_gold(points, kl, sft_gold=None):
    """PPO's gold at this KL, linear in log KL between the two sweep points around it; below the sweep's
    smallest KL, linear in KL from the SFT model (KL 0, ``sft_gold``: PPO as beta grows without bound).

    points: [(kl, gold)] of the sweep. A KL outside that range is an error (no extrapolation, and no
    NaN that a criterion would read as a verdict): ``spanning_sweep`` makes the sweep reach it."""
    points = sorted(points)
    if sft_gold is not None and 0 <= kl < points[0][0]:
        return sft_gold + kl / points[0][0] * (points[0][1] - sft_gold)
    for (k0, g0), (k1, g1) in zip(points, points[1:]):
        if k0 <= kl <= k1:
            t = (math.log(kl) - math.log(k0)) / (math.log(k1) - math.log(k0))
            return g0 + t * (g1 - g0)
    low = 0 if sft_gold is not None else points[0][0]
    raise ValueError(f"KL {kl:.4f} is outside PPO's frontier, KL {low:.4f} to {points[-1][0]:.4f}: "
                     f"no gold to read there without extrapolating")


def spanning_sweep(seed, kls):
    """{beta: PPO's figures} of SWEEP, with betas from WIDER added in turn while one of ``kls`` (the KLs
    the frontier is read at) lies past the sweep's largest KL: the same rule in a full run and a smoke run."""
    sweep = {beta: ppo_figures(seed, beta) for beta in SWEEP}
    for beta in WIDER:
        if max(kls) <= max(f["kl"] for f in sweep.values()):
            break
        sweep[beta] = ppo_figures(seed, beta)
    return sweep


# ----------------------------------------------------------------------------- DPO
def shuffled(data, seed):
    """The same responses with every ranking shuffled: the labels carry no preference."""
    import random
    rng = random.Random(seed)
    return [dict(d, ranking=rng.sample(d["ranking"], len(d["ranking"]))) for d in data]


@_on_one_thread
def run_dpo(seed):
    w, referee = world(seed)
    sft_gold = _gold(referee, referee.ref, HACK_BETA)
    out = {"sft_gold": sft_gold, "inputs": {}}
    # DPO at beta 0.05 on the labeler's rankings and, the control, on the same rankings shuffled (no
    # preference left to learn): each compared with PPO's frontier at its own KL
    dpo = {name: referee.judge(dpo_on(dataclasses.replace(w, train_data=data),
                                      dpo_config(w, HACK_BETA, epochs=short(EPOCHS)))[0], HACK_BETA)["rm"]
           for name, data in (("labeler", w.train_data), ("shuffled", shuffled(w.train_data, seed)))}
    sweep = spanning_sweep(seed, [d["kl"] for d in dpo.values()])
    frontier = [(f["kl"], f["gold"]) for f in sweep.values()]
    out.update(ppo_gold_005=sweep[HACK_BETA]["gold"], ppo_kl_005=sweep[HACK_BETA]["kl"])
    for name, d in dpo.items():
        matched = frontier_gold(frontier, d["kl"], sft_gold)
        out.update({f"dpo_gold_{name}": d["gold"], f"dpo_kl_{name}": d["kl"], f"ppo_gold_at_kl_{name}": matched,
                    f"dpo_off_frontier_{name}": abs(d["gold"] - matched)})
        out["inputs"][f"dpo_off_frontier_{name}"] = {"rankings": name}
    out["dpo_above_ppo_same_beta"] = out["dpo_gold_labeler"] - sweep[HACK_BETA]["gold"]
    out.update({f"ppo_{k}_{beta:g}": f[k] for beta, f in sweep.items() for k in ("gold", "kl")})

    # the held-out pairs along one DPO run: from epoch 1 to the last, and (the control) from the start, the
    # SFT model itself (every margin 0, accuracy 0.5), to the last: the figure moves when DPO learns something
    # the held-out pairs can tell, and stays put while it fits the training pairs' noise
    after = lambda p: _gold(referee, p, BETA)  # noqa: E731
    epochs = short(EPOCHS, least=2)
    hist = _dpo(w, referee, BETA, after=after, epochs=epochs)
    gold, held = hist["after"], hist["held_acc"]
    held_start = lab("lab13")["implicit_reward_fit"](w.sft, w.sft, as_lab13(w).held_pairs, BETA)[0]
    out.update(dpo_gold_first=gold[0], dpo_gold_last=gold[-1], dpo_fall=gold[0] - gold[-1],
               held_start=held_start, held_first=held[0], held_last=held[-1], held_move=abs(held[-1] - held[0]),
               held_move_from_start=abs(held[-1] - held_start))

    # control: the same number of Adam steps, evaluated at the same steps, on 4x as many fresh rankings
    fresh = dataclasses.replace(w, train_data=ranked_data(w.sft, epochs * len(w.train_data), k=K,
                                                          seed=spaced(seed).rankings + 5))
    gold = _dpo(fresh, referee, BETA, after=after, epochs=1, eval_every=hist["step"][0])["after"]
    out["dpo_fall_fresh"] = gold[0] - gold[-1]
    out["about_0_1_fall"], out["about_0_1_fall_fresh"] = abs(out["dpo_fall"] - 0.1), abs(out["dpo_fall_fresh"] - 0.1)
    out["inputs"].update({"about_0_1_fall": {"pairs seen": f"{epochs} times"},
                          "about_0_1_fall_fresh": {"pairs seen": "once"},
                          "held_move": {"epochs compared": f"1 and {epochs}"},
                          "held_move_from_start": {"epochs compared": f"0 (the SFT model) and {epochs}"}})
    return out


# ----------------------------------------------------------------------------- GRPO
@_on_one_thread
def run_grpo(seed):
    w, referee = world(seed)
    out = {"ppo_kl_to_opt": ppo_figures(seed, BETA)["kl_to_opt"], "inputs": {}}
    GRPOConfig = lab("lab13")["GRPOConfig"]
    for (kl_in, scaled), name in GRPO_CELLS.items():
        cfg = GRPOConfig(beta=BETA, kl_in=kl_in, seed=seed, iters=short(GRPOConfig().iters, least=10))
        policy, _ = grpo_on(w, cfg, kl_scaled=scaled)
        figures = referee.judge(policy, BETA)["rm"]
        out.update({f"{name}_kl_to_opt": figures["kl_to_opt"], f"{name}_gold": figures["gold"], f"{name}_kl": figures["kl"]})
        out["inputs"][f"{name}_kl_to_opt"] = {"kl in": kl_in, "on the score's scale": scaled}
    return out


# ----------------------------------------------------------------------------- the optima
@_on_one_thread
def run_optima(seed):
    w, referee = world(seed)
    sft = _gold(referee, referee.ref, HACK_BETA)
    iters = short(lab("lab12")["RLHFConfig"]().iters)
    out = {"sft_gold": sft, "ppo_kl_to_opt": ppo_figures(seed, BETA)["kl_to_opt"],
           # the control: no PPO iteration at all (the SFT model), against the same pi*_RM. (PPO stopped after a
           # tenth of its iterations is already within a quarter of a nat: 0.15-0.2 on seed 0)
           "sft_kl_to_opt": referee.judge(referee.ref, BETA)["rm"]["kl_to_opt"]}
    for beta in (BETA_ZERO, HACK_BETA, BETA):
        for name in ("rm", "gold"):
            out[f"opt_{name}_gold_{beta:g}"] = _gold(referee, referee.optimum(name, beta).logp, beta)
        out[f"opt_rm_below_sft_{beta:g}"] = sft - out[f"opt_rm_gold_{beta:g}"]
    # Lab 12's Experiment 8: at beta 0 (computed at 0.001) and 0.05 the optimum hacks; the smaller fall decides
    out["opt_rm_below_sft_small"] = min(out[f"opt_rm_below_sft_{BETA_ZERO:g}"], out[f"opt_rm_below_sft_{HACK_BETA:g}"])
    out["inputs"] = {f"opt_gold_gold_{HACK_BETA:g}": {"reward": "labeler"}, f"opt_rm_gold_{HACK_BETA:g}": {"reward": "rm"},
                     "opt_rm_below_sft_small": {"beta": f"{BETA_ZERO:g}, {HACK_BETA:g}"},
                     f"opt_rm_below_sft_{BETA:g}": {"beta": f"{BETA:g}"},
                     "ppo_kl_to_opt": {"PPO iterations": iters}, "sft_kl_to_opt": {"PPO iterations": 0}}
    return out


@_on_one_thread
def run_budget(seed, reps=3, ppo_iters=None):
    """CPU time of GRPO against PPO (a figure of the measurement lane, not a criterion): whole runs (PPO's
    120 iterations, GRPO's 80) and GRPO for as many iterations as PPO. Measured in turn, ``reps`` times,
    so that all three see the same load; each cost is the fastest of its ``reps`` runs (a neighbour on
    the machine only ever adds time)."""
    ppo_iters = ppo_iters or lab("lab12")["RLHFConfig"]().iters
    w, _ = world(seed)
    GRPOConfig = lab("lab13")["GRPOConfig"]
    share = round(ppo_iters * GRPOConfig().iters / lab("lab12")["RLHFConfig"]().iters)
    cpu = {"ppo": [], "share": [], "same": []}
    for _ in range(reps):
        cpu["ppo"].append(ppo_on(w, BETA, iters=ppo_iters)[1]["cpu"])
        for key, iters in (("share", share), ("same", ppo_iters)):
            cpu[key].append(grpo_on(w, GRPOConfig(beta=BETA, iters=iters, seed=seed))[1]["cpu"])
    return {"cpu_ratio": min(cpu["share"]) / min(cpu["ppo"]), "cpu_ratio_same_iters": min(cpu["same"]) / min(cpu["ppo"])}


DPO = Experiment("beyond.dpo", run_dpo, criteria=(
    # "at DPO's own KL, on the frontier of PPO's beta sweep, PPO scores the same gold (within 0.1)"; the
    # control is DPO with the preferences removed, read on the same frontier at its own KL
    Criterion("on_frontier", f"|DPO's gold - PPO's gold at DPO's KL| (beta {HACK_BETA:g})", "dpo_off_frontier_labeler",
              0.1, above=False, mechanism="rankings",
              controls=(("DPO on the same rankings shuffled, at its own KL", "dpo_off_frontier_shuffled"),)),
    # "a fall of about 0.1 in the gold score": |fall - 0.1| <= 0.05 (0.1 to the nearest twentieth)
    Criterion("overfit", "|DPO's gold, epoch 1 - epoch 4, minus 0.1| (beta 0.1)", "about_0_1_fall", 0.05,
              above=False, mechanism="pairs seen",
              controls=(("as many steps on 4x fresh rankings, each pair seen once", "about_0_1_fall_fresh"),)),
    # "accuracy on held-out pairs moves by less than a point" after the first epoch; the control reads the same
    # pairs from the start (the SFT model, before DPO learned anything): there they move by more than a point
    Criterion("blind", "|held-out pair accuracy, epoch 4 - epoch 1|", "held_move", 0.01, above=False,
              mechanism="epochs compared",
              controls=(("the same pairs from the start (the SFT model) to epoch 4", "held_move_from_start"),)),
))

# "many nats" (the drift) is 3 or more; "near pi*_RM" is within a quarter of a nat, as PPO (optima.ppo_near_opt)
GRPO = Experiment("beyond.grpo", run_grpo, criteria=(
    Criterion("reward_scaled_lands", "KL in the reward, on the score's scale: KL(GRPO || pi*_RM)",
              "grpo_reward_scaled_kl_to_opt", 0.25, above=False, mechanism="on the score's scale",
              controls=(("KL in the reward, off the score's scale", "grpo_reward_unscaled_kl_to_opt"),)),
    Criterion("k3_scaled_stays", "k3 in the loss, on the score's scale: KL(GRPO || pi*_RM) below many nats",
              "grpo_loss_scaled_kl_to_opt", 3.0, above=False, mechanism="on the score's scale",
              controls=(("k3 in the loss, off the score's scale (as published)", "grpo_loss_unscaled_kl_to_opt"),)),
))

OPTIMA = Experiment("beyond.optima", run_optima, criteria=(
    # "the labeler's own optimum answers almost every prompt correctly (gold >= +0.95)"
    Criterion("reward_limits", f"gold of the labeler's optimum pi*_lab (beta {HACK_BETA:g})", f"opt_gold_gold_{HACK_BETA:g}",
              0.95, mechanism="reward",
              controls=(("the RM's optimum pi*_RM, same beta", f"opt_rm_gold_{HACK_BETA:g}"),), fmt="{:+.2f}"),
    # "far below the SFT model's gold": by at least a quarter of the gold scale (-1 to +1), 0.5
    Criterion("optimum_hacks", f"min over beta {BETA_ZERO:g}, {HACK_BETA:g} of SFT gold - gold of pi*_RM",
              "opt_rm_below_sft_small", 0.5, mechanism="beta",
              controls=((f"beta {BETA:g}", f"opt_rm_below_sft_{BETA:g}"),), fmt="{:+.2f}"),
    # "within a quarter of a nat"; "120 iterations of PPO found nearly the best policy": without them (the SFT
    # model, where PPO starts) the same comparison is far
    Criterion("ppo_near_opt", f"KL(PPO || pi*_RM of its beta {BETA:g})", "ppo_kl_to_opt", 0.25, above=False,
              mechanism="PPO iterations", controls=(("no PPO iteration (the SFT model, where PPO starts)", "sft_kl_to_opt"),)),
))

BUDGET = Experiment("beyond.budget", run_budget, criteria=())

EXPERIMENTS = [OPTIMA, DPO, GRPO]
MEASURED = [BUDGET]        # the measurement lane: CPU time, with its machine (science.measure)
