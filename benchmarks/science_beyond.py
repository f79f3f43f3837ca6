"""The claims of notebooks/beyond_ppo.ipynb as science experiments (see science.py): DPO and GRPO from
Lab 12's world of each seed (course_staff.beyond.methods.make_world), judged exactly on the response tree.

dpo    DPO sees no reward model, so it cannot hack one: at beta 0.05, where PPO hacks the RM, DPO's
       gold score beats both PPO's and the SFT model's. Control: the same rankings reversed.
       DPO overfits the rankings: its gold score falls from the first epoch to the fourth, while the
       implicit reward's accuracy on held-out pairs stays put. Controls: as many Adam steps in one
       pass over four times as many rankings (no pair seen twice); a noise-free labeler, whose
       held-out pairs do see the fall.
grpo   Shao et al.'s GRPO (k3 in the loss) drifts far from the optimum pi*_RM of its own beta, where
       PPO gets within hundredths of a nat; with the KL in the reward instead (as PPO has it) GRPO
       gets as close as PPO, without a critic. Each variant is the other's control.
budget GRPO's 80 iterations cost about the CPU time of PPO's 120 (within 20%). Control: GRPO for
       PPO's 120 iterations.

    run_dpo(seed), run_grpo(seed), run_budget(seed) -> {measurement: float};  EXPERIMENTS for science.py

It joins science.py's table with "science_beyond" in science.MODULES (Criterion and Experiment are
science.py's). A seed costs about 90 s of CPU: DPO 50, GRPO 25, budget 15.
"""

import dataclasses
import functools
import statistics

from course_staff.beyond.experiment import Referee
from course_staff.beyond.methods import DPOConfig, GRPOConfig, lab, make_world, one_thread, train_dpo, train_grpo, train_ppo
from course_utils.labeler import ranked_data
from course_utils.world import K, spaced

from science import Criterion, Experiment

HACK_BETA = 0.05          # PPO hacks the RM here (Lab 12)
BETA = 0.1                # Lab 12's default beta
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


def reversed_rankings(data):
    """The same responses, every ranking reversed: the labeler's preferences turned upside down."""
    return [dict(d, ranking=d["ranking"][::-1]) for d in data]


def _dpo(w, referee, beta, **cfg):
    """One DPO run's history, with the exact gold score at each evaluation in history["after"]."""
    return train_dpo(w, DPOConfig(beta=beta, seed=w.seed, **cfg), after=lambda p: _gold(referee, p, beta))[1]


# ----------------------------------------------------------------------------- DPO
@_on_one_thread
def run_dpo(seed):
    w, referee = world(seed)
    out = {"sft_gold": _gold(referee, referee.ref, HACK_BETA),
           "ppo_gold_005": _gold(referee, train_ppo(w, HACK_BETA)[0], HACK_BETA)}
    for name, data in (("", w.train_data), ("_reversed", reversed_rankings(w.train_data))):
        out[f"dpo_gold_005{name}"] = _dpo(dataclasses.replace(w, train_data=data), referee, HACK_BETA)["after"][-1]
        out[f"dpo_lead_005{name}"] = out[f"dpo_gold_005{name}"] - max(out["sft_gold"], out["ppo_gold_005"])

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
    policy, _ = train_ppo(w, BETA)
    out = {"ppo_kl_to_opt": referee.judge(policy, BETA)["rm"]["kl_to_opt"]}
    for name, kl_in in (("k3", "loss"), ("reward", "reward")):
        policy, _ = train_grpo(w, GRPOConfig(beta=BETA, kl_in=kl_in, seed=seed))
        figures = referee.judge(policy, BETA)["rm"]
        out.update({f"grpo_{name}_kl_to_opt": figures["kl_to_opt"], f"grpo_{name}_gold": figures["gold"]})
    return out


@_on_one_thread
def run_budget(seed, reps=3, ppo_iters=30):
    """CPU time of GRPO against PPO, per ``ppo_iters`` PPO iterations: GRPO for its share of them
    (80/120) and, as the control, for as many. Measured in turn, ``reps`` times (medians), so that
    both see the same load: a whole run against a whole run is at the mercy of the neighbours."""
    w, _ = world(seed)
    share = round(ppo_iters * GRPOConfig().iters / lab("lab12")["RLHFConfig"]().iters)
    ratios = {"share": [], "same": []}
    for _ in range(reps):
        ppo = train_ppo(w, BETA, iters=ppo_iters)[1]["cpu"]
        for key, iters in (("share", share), ("same", ppo_iters)):
            ratios[key].append(train_grpo(w, GRPOConfig(beta=BETA, iters=iters, seed=seed))[1]["cpu"] / ppo)
    share, same = statistics.median(ratios["share"]), statistics.median(ratios["same"])
    return {"cpu_ratio": share, "budget_mismatch": abs(share - 1), "cpu_ratio_same_iters": same,
            "budget_mismatch_same_iters": abs(same - 1)}


DPO = Experiment("beyond.dpo", run_dpo, criteria=(
    Criterion("no_hack", "DPO's gold - max(SFT's, PPO's) at beta 0.05 (PPO hacks)", "dpo_lead_005", 0.1,
              controls=(("rankings reversed", "dpo_lead_005_reversed"),)),
    Criterion("overfit", "DPO's gold, epoch 1 - epoch 4 (beta 0.1)", "dpo_fall", 0.05,
              controls=(("as many steps on 4x fresh rankings", "dpo_fall_fresh"),)),
    Criterion("blind", "|held-out pair accuracy, epoch 4 - epoch 1|", "held_move", 0.02, above=False,
              controls=(("noise-free labeler", "held_move_noise_free"),)),
))

GRPO = Experiment("beyond.grpo", run_grpo, criteria=(
    Criterion("k3_drift", "KL(GRPO || pi*_RM), k3 in the loss (beta 0.1)", "grpo_k3_kl_to_opt", 1.0,
              controls=(("KL in the reward", "grpo_reward_kl_to_opt"),)),
    Criterion("reward_kl", "KL(GRPO || pi*_RM), KL in the reward (beta 0.1)", "grpo_reward_kl_to_opt", 0.1,
              above=False, controls=(("k3 in the loss (Shao et al.)", "grpo_k3_kl_to_opt"),)),
))

BUDGET = Experiment("beyond.budget", run_budget, criteria=(
    Criterion("budget", "|CPU(GRPO, 80 it) / CPU(PPO, 120 it) - 1|", "budget_mismatch", 0.2, above=False,
              controls=(("GRPO for PPO's 120 iterations", "budget_mismatch_same_iters"),)),
))

EXPERIMENTS = [DPO, GRPO, BUDGET]
