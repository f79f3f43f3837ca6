"""Exact figures of trained policies on Lab 12's response tree, against two optima of the same beta.

    referee = Referee(sft, rm, rm_offset)           # the tree of all 100 prompts, the SFT model's log-probs
    referee.judge(policy, beta)       # {"rm": figures, "gold": figures} (below); each policy is run once
    referee.curve("gold", betas)      # [{"beta", "kl", "gold", ...}] of pi*_gold over betas (ms each)
    referee.lengths(policy)           # (4,) P(the response has L = 1..4 tokens), averaged over the prompts

Two optima, both pi* = pi_ref exp(r / beta) / Z over every response, with pi_ref the SFT model:

    "rm"    r = rm(digit_counts(y)) - rm_offset: the reward PPO and GRPO maximize (with their KL term)
    "gold"  r = KAPPA * gold(y): the labeler's own Bradley-Terry reward, P(w beats l) =
            sigmoid(KAPPA (gold_w - gold_l)): a verifiable reward (the labeler's score is a check of
            the answer); with infinitely many of the labeler's pairs, DPO's loss is least there.

The figures of a policy against an optimum: gold, acc, malformed, digits (E[digits]), kl =
KL(pi || pi_ref), reward (E[r]), kl_to_opt = KL(pi || pi*), gap = J* - J(pi) = beta KL(pi || pi*).
Nothing here trains or computes a loss: it reads policies that the lab's own functions trained.
"""

import torch

from course_utils.labeler import KAPPA
from course_utils.response_tree import ResponseTree, response_probs
from course_utils.tree_optimum import TiltedOptimum, exact_optimum, policy_stats

OPTIMA = ("rm", "gold")
FIGURES = ("gold", "acc", "malformed", "digits", "kl", "reward")


def gold_rewards(tree):
    """The labeler's Bradley-Terry reward KAPPA * gold(y): tree tensors (P, S_d, 13)."""
    return [KAPPA * f[..., 0] for f in tree.features]


class Referee:
    """Exact figures of policies on the response tree of all 100 prompts, against both optima.

    A policy (a TinyLM) is run on the tree once (about a second); its log-probs are kept as long as
    the referee keeps the policy, so judging it again, at another beta, costs milliseconds.
    """

    def __init__(self, sft, rm, rm_offset, tree=None):
        self.tree = tree or ResponseTree.build()
        self.sft = sft
        self.ref = self.tree.logprobs(sft)
        self.rewards = {"rm": self.tree.rm_rewards(rm, rm_offset), "gold": gold_rewards(self.tree)}
        self._optima, self._tilted, self._logp, self._judged = {}, {}, {}, {}

    def optimum(self, name, beta):
        """The exact optimum ("rm" or "gold") at beta (tree_optimum.Optimum), solved once."""
        if (name, beta) not in self._optima:
            self._optima[name, beta] = exact_optimum(self.tree, self.ref, self.rewards[name], beta)
        return self._optima[name, beta]

    def logp(self, policy):
        """The policy's next-token log-probs on the tree (a TinyLM, or tree tensors already)."""
        if isinstance(policy, list):
            return policy
        if policy is self.sft:
            return self.ref
        key = id(policy)
        if key not in self._logp:
            self._logp[key] = (policy, self.tree.logprobs(policy))        # the policy kept: its id stays its own
        return self._logp[key][1]

    def judge(self, policy, beta):
        """{"rm": figures, "gold": figures} of a policy at beta, each against that optimum (module docstring).
        Kept with the policy's log-probs: judging it again at the same beta (a slider's frame) is free."""
        logp = self.logp(policy)
        key = (id(logp), beta)
        if key not in self._judged:
            self._judged[key] = (logp, self._judge(logp, beta))       # logp kept: its id stays its own
        return self._judged[key][1]

    def _judge(self, logp, beta):
        out = {}
        for name in OPTIMA:
            opt = self.optimum(name, beta)
            s = policy_stats(self.tree, logp, self.ref, self.rewards[name], beta, optimum=opt)
            out[name] = {**{k: getattr(s, k) for k in FIGURES}, "kl_to_opt": s.kl_to_opt,
                         "gap": opt.objective - s.objective}
        return out

    def curve(self, name, betas):
        """The optimum ``name`` over ``betas`` (sequence-level, a few ms a beta): [{"beta", "kl", "gold",
        "acc", "malformed", "digits", "reward"}], KL to the SFT model in nats per response."""
        if name not in self._tilted:
            self._tilted[name] = TiltedOptimum(self.tree, self.ref, self.rewards[name])
        return [{"beta": b, **self._tilted[name].stats(b)} for b in betas]

    def lengths(self, policy):
        """P(a response has L tokens), L = 1..4 (<eos> counted; a 4-token response may have none),
        averaged over the prompts: a (4,) float64 tensor summing to 1."""
        return torch.stack([p.flatten(1).sum(1) for p in response_probs(self.logp(policy))], dim=1).mean(0)


__all__ = ["OPTIMA", "FIGURES", "gold_rewards", "Referee"]
