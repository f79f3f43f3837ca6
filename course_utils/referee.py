"""Exact figures of trained policies on Lab 12's response tree, against two optima of the same beta.

    referee = Referee(sft, rm, rm_offset)           # the tree of all 100 prompts, the SFT model's log-probs
    referee.judge(policy, beta)       # {"rm": figures, "gold": figures} (below); kept for these weights
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

import ctypes
import ctypes.util
import hashlib

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

    A policy (a TinyLM) is run on the tree each time its log-probs are asked for (about a second): its
    tree tensors (20 MB) are the caller's to keep or drop. Its figures at a beta are kept, keyed by its
    weights as they are then (a policy trained in place is judged afresh), so judging it again at that
    beta (a slider's frame) is free and a kernel holds a few floats per judged policy. After a policy is
    judged from its own pass, the memory of the pass's temporaries goes back to the system.
    """

    def __init__(self, sft, rm, rm_offset, tree=None):
        self.tree = tree or ResponseTree.build()
        self.sft = sft
        self.ref = self.tree.logprobs(sft)
        self.rewards = {"rm": self.tree.rm_rewards(rm, rm_offset), "gold": gold_rewards(self.tree)}
        self._optima, self._tilted, self._judged = {}, {}, {}
        release_freed_memory()                          # the temporaries of the tree's features and rewards

    def optimum(self, name, beta):
        """The exact optimum ("rm" or "gold") at beta (tree_optimum.Optimum), solved once."""
        if (name, beta) not in self._optima:
            self._optima[name, beta] = exact_optimum(self.tree, self.ref, self.rewards[name], beta)
        return self._optima[name, beta]

    def logp(self, policy):
        """The policy's next-token log-probs on the tree (a TinyLM, or tree tensors already)."""
        if isinstance(policy, list):
            return policy
        return self.ref if policy is self.sft else self.tree.logprobs(policy)

    def judge(self, policy, beta):
        """{"rm": figures, "gold": figures} of a policy at beta, each against that optimum (module docstring).
        policy: a TinyLM (its figures kept for its current weights) or tree tensors (judged, nothing kept)."""
        if isinstance(policy, list):
            return self._judge(policy, beta)
        key = (weights_digest(policy), beta)
        if key not in self._judged:
            self._judged[key] = self._judge(self.logp(policy), beta)
            release_freed_memory()
        return self._judged[key]

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


def weights_digest(model):
    """A digest of a model's weights as they are now (bytes of every parameter and buffer, in order)."""
    h = hashlib.blake2b(digest_size=16)
    for t in (*model.parameters(), *model.buffers()):
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.digest()


def release_freed_memory():
    """Give the heap's freed pages back to the system (glibc's malloc_trim; nothing elsewhere): glibc keeps
    the freed temporaries of the tree's float64 tensors (up to 20 MB each) resident, and a kernel that
    judges policy after policy would only grow."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _glibc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


_LIBC = _glibc()

__all__ = ["OPTIMA", "FIGURES", "gold_rewards", "Referee", "weights_digest", "release_freed_memory"]
