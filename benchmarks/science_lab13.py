"""The claims of Lab 13 (source/lab13/lab13.ipynb) as science experiments (see science.py), with the lab's
reference solution (its train_grpo, kl_in "loss" or "reward", through its grpo_iteration) from Lab 12's
world of each seed, judged exactly on the response tree (course_utils.referee).

grpo   GRPO's 2 x 2 at the lab's beta (GRPOConfig's), against pi*_RM of that beta:
       lands    with the KL in the score (GRPOConfig.kl_in = "reward", std scaling kept) it lands within a
                quarter of a nat of pi*_RM, as PPO does (beyond.optima.ppo_near_opt). Control: GRPO as written
                in Task 4, k3 in the loss (the mirror "Task 4's GRPO drifts" is this control, not a second fact).
       mean_only_lands   the same without the std scaling. Control: mean only, k3 in the loss.
       DPO's sentences are backed by beyond.dpo (the lab's own train_dpo, through course_staff.beyond.methods).

    run_grpo(seed) -> {figure: float, "inputs": {...}};  EXPERIMENTS for science.py

Seed 0 is the lab's own world (Lab 12's notebook world, which Lab 13 loads as data); a seed costs
four GRPO runs of 80 iterations and their exact judging, about 30 s of CPU.
"""

import dataclasses
import functools

from course_staff.beyond.methods import as_lab13, lab, make_world, one_thread
from course_utils.referee import Referee

from benchmarks.criteria import Criterion, Experiment, short

NEAR = 0.25                # "within a quarter of a nat": as PPO (beyond.optima.ppo_near_opt)


@functools.lru_cache(maxsize=1)
def world(seed):
    """Lab 12's world of the seed as Lab 13 sees it (course_staff.beyond.methods.as_lab13), and its referee."""
    w = as_lab13(make_world(seed))
    return w, Referee(w.sft, w.rm, w.rm_offset)


def run_grpo(seed):
    ns = lab("lab13")
    w, referee = world(seed)
    base = dataclasses.replace(ns["GRPOConfig"](), seed=seed, iters=short(ns["GRPOConfig"]().iters, least=10))
    beta = base.beta                                                        # the lab's: Lab 12's default
    train, reward = ns["train_grpo"], dataclasses.replace(base, kl_in="reward")
    runs = {   # figure: (config, inputs)
        "given": (base, {"where the KL goes": "k3 in the loss", "beta of the KL term": beta, "std scaling": True}),
        "reward": (reward, {"where the KL goes": "the score", "beta of the KL term": beta, "std scaling": True}),
        "mean_reward": (dataclasses.replace(reward, scale=False),
                        {"where the KL goes": "the score", "beta of the KL term": beta, "std scaling": False}),
        "mean_loss": (dataclasses.replace(base, scale=False),
                      {"where the KL goes": "k3 in the loss", "beta of the KL term": beta, "std scaling": False}),
    }
    out = {"inputs": {}}
    with one_thread():
        for name, (cfg, inputs) in runs.items():
            figures = referee.judge(train(w, cfg)[0], beta)["rm"]           # always against pi*_RM of the lab's beta
            out.update({f"{name}_kl_to_opt": figures["kl_to_opt"], f"{name}_gold": figures["gold"],
                        f"{name}_kl": figures["kl"]})
            out["inputs"][f"{name}_kl_to_opt"] = inputs
    return out


GRPO = Experiment("lab13.grpo", run_grpo, criteria=(
    # "lands within a quarter of a nat of pi*_RM"; with k3 in the loss (Task 4 as written) it does not
    Criterion("lands", "GRPO, KL in the score (std): KL(. || pi*_RM), the lab's beta", "reward_kl_to_opt", NEAR,
              above=False, mechanism="where the KL goes",
              controls=(("GRPO as in Task 4: k3 in the loss (std kept)", "given_kl_to_opt"),)),
    # "scaled or not": the mean-only cell lands too; with k3 in the loss, mean only, it does not
    Criterion("mean_only_lands", "GRPO, KL in the score, mean only: KL(. || pi*_RM), the lab's beta",
              "mean_reward_kl_to_opt", NEAR, above=False, mechanism="where the KL goes",
              controls=(("mean only, k3 in the loss", "mean_loss_kl_to_opt"),)),
))

EXPERIMENTS = [GRPO]
