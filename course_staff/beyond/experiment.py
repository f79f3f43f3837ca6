"""The experiment of Beyond PPO: every method at every beta, held against the exact optima of Lab 12's
response tree (course_utils.response_tree), all figures exact (no sampling).

    res = build(seed=0)          # a dict of numbers (what course_staff.beyond.results caches)

Two optima at each beta, both pi* = pi_ref exp(r / beta) / Z over every response of the tree:
    "rm"    r = rm(digit_counts(y)) - rm_offset: the reward PPO and GRPO maximize (with their KL penalty)
    "gold"  r = KAPPA * gold(y): the labeler's own Bradley-Terry reward (P(w beats l) =
            sigmoid(KAPPA (gold_w - gold_l)); up to a per-prompt constant, which changes no optimum).
            With infinitely many of its pairs, DPO's loss is minimized exactly there (Rafailov et al. 2023).
A policy's figures against an optimum (``Referee.judge``): KL(pi || pi*), the shortfall
J* - J(pi) = beta KL(pi || pi*), and E[r], gold, accuracy, malformed share, digits, KL(pi || pi_ref).
"""

import torch

from course_staff.beyond.methods import Clock, as_lab13, lab, make_world, one_thread, dpo_on, grpo_on, ppo_on
from course_utils.evaluation import METRICS, RESPONSE_METRICS, noise_ceiling, pair_accuracy
from course_staff.exact import top_responses
from course_utils.labeler import KAPPA, gold_score
from course_utils import referee as exact
from course_utils.referee import OPTIMA, gold_rewards
from course_utils.tree_optimum import policy_stats
from course_utils.reward_model import digit_counts
from course_utils.runtime import progress

BETAS = (0.05, 0.1, 0.2, 0.5)
METHODS = ("PPO", "DPO", "GRPO", "GRPO, KL in reward")
GRPO_VARIANTS = {"GRPO": "loss", "GRPO, KL in reward": "reward"}     # method -> GRPOConfig.kl_in
SHOWN_PROMPT = "7+5="                     # the prompt whose most likely responses are kept
CURVE_KEYS = tuple(k for k in METRICS if k != "digits")   # per-iteration sampled figures kept for PPO/GRPO


class Referee(exact.Referee):
    """course_utils.referee's Referee of a world, with the top responses and worst prompts the notebook prints."""

    def __init__(self, world, tree=None):
        super().__init__(world.sft, world.rm, world.rm_offset, tree)

    def top(self, policy, prompt=SHOWN_PROMPT, k=5):
        """The k most likely responses to one prompt: [[text, probability], ...]."""
        return [[text, round(p, 4)] for text, p, _ in top_responses(self.tree, self.logp(policy), prompt, k)]

    def worst_prompts(self, policy, n=3, k=3):
        """The n prompts whose accuracy the policy lowered most below the reference's:
        [{"prompt", "acc_ref", "acc", "top": its k most likely responses}, ...]."""
        logp = self.logp(policy)
        acc = policy_stats(self.tree, logp, self.ref, self.rewards["rm"], 1.0).per_prompt["acc"]
        acc_ref = policy_stats(self.tree, self.ref, self.ref, self.rewards["rm"], 1.0).per_prompt["acc"]
        return [{"prompt": self.tree.prompts[i], "acc_ref": float(acc_ref[i]), "acc": float(acc[i]),
                 "top": self.top(logp, self.tree.prompts[i], k)} for i in (acc - acc_ref).argsort()[:n].tolist()]


# ----------------------------------------------------------------------------- runs
def _entry(referee, policy, beta, hist):
    logp = referee.logp(policy)
    return {**referee.judge(logp, beta), "top": referee.top(logp), "worst": referee.worst_prompts(logp),
            "wall": hist["wall"], "cpu": hist["cpu"]}


def run_method(world, referee, method, beta):
    """Train one method at beta from the world; its exact figures, top responses, seconds and curves."""
    if method == "PPO":
        policy, hist = ppo_on(world, beta)
        return {**_entry(referee, policy, beta, hist), "curve": {k: hist[k] for k in CURVE_KEYS}}
    if method == "DPO":
        cfg = lab("lab13")["DPOConfig"](beta=beta, seed=world.seed)
        policy, hist = dpo_on(world, cfg, after=lambda p: referee.judge(p, beta))
        epochs = [{"step": s, "train_acc": ta, "held_acc": ha, "gold": j["rm"]["gold"], "acc": j["rm"]["acc"],
                   "kl": j["rm"]["kl"], "kl_to_rm": j["rm"]["kl_to_opt"], "kl_to_gold": j["gold"]["kl_to_opt"]}
                  for s, ta, ha, j in zip(hist["step"], hist["train_acc"], hist["held_acc"], hist["after"])]
        return {**_entry(referee, policy, beta, hist), "epochs": epochs, "pairs": hist["pairs"]}
    if method not in GRPO_VARIANTS:
        raise ValueError(f"unknown method {method!r}; one of {METHODS}")
    cfg = lab("lab13")["GRPOConfig"](beta=beta, kl_in=GRPO_VARIANTS[method], seed=world.seed)
    policy, hist = grpo_on(world, cfg)
    return {**_entry(referee, policy, beta, hist), "curve": {k: hist[k] for k in CURVE_KEYS + ("cpu_at",)}}


def rm_fit(world):
    """The reward model's accuracy on the held-out pairs DPO is scored on (identical pairs left out),
    and the noise ceiling of those pairs."""
    pairs = as_lab13(world).held_pairs
    win, lose = pairs["chosen"], pairs["rejected"]
    with torch.no_grad():
        margins = world.rm(digit_counts(win)) - world.rm(digit_counts(lose))
    p = torch.sigmoid(KAPPA * (gold_score(win) - gold_score(lose)))
    return {"held_acc": pair_accuracy(margins), "ceiling": noise_ceiling(p),
            "w": world.rm.w.detach().tolist(), "offset": world.rm_offset}


def build(seed=0, betas=BETAS, which=METHODS):
    """Every method at every beta from one world, on one thread (the numbers depend on the thread
    count). Returns the results dict the cache holds."""
    with one_thread():
        clock = Clock()
        world = make_world(seed)
        referee = Referee(world)
        sft = referee.judge(referee.ref, betas[0])["gold"]
        res = {"seed": seed, "betas": list(betas), "methods": list(which), "kappa": KAPPA, "prompt": SHOWN_PROMPT,
               "rm": rm_fit(world),
               "sft": {k: sft[k] for k in RESPONSE_METRICS}, "sft_top": referee.top(referee.ref),
               "runs": {}}
        for beta in progress(betas, desc="betas", leave=True):
            optima = {o: referee.optimum(o, beta).logp for o in OPTIMA}
            run = {"optimum": {o: {**referee.judge(logp, beta), "top": referee.top(logp)} for o, logp in optima.items()}}
            for m in which:
                run[m] = run_method(world, referee, m, beta)
            res["runs"][repr(beta)] = run
        res["seconds"] = clock.read()
        return res


__all__ = ["BETAS", "METHODS", "GRPO_VARIANTS", "OPTIMA", "SHOWN_PROMPT", "gold_rewards", "Referee", "run_method",
           "rm_fit", "build"]
