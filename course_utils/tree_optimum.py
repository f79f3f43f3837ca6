"""The exact KL-regularized optimum of Lab 12's toy, solved on the response tree (course_utils.response_tree).

The objective J(pi) = E_pi[r] - beta KL(pi || pi_ref) has the optimum
pi*(y|x) = pi_ref(y|x) exp(r(x,y) / beta) / Z(x). Token by token it is built from soft values,
computed backwards from the leaves:

    V(s) = beta * log sum_a pi_ref(a|s) exp(Q(s,a) / beta),   Q(s,a) = r(s,a) if (s,a) is complete,
                                                                        V(s * 12 + a) otherwise
    pi*(a|s) = pi_ref(a|s) exp((Q(s,a) - V(s)) / beta),       log Z(x) = V(root) / beta,  J* = V(root)

Everything is done in log space in float64, so beta may go down to 1e-3. Usage:

    tree = ResponseTree.build()
    ref_logp, rewards = tree.logprobs(sft), tree.rm_rewards(rm, rm_offset)
    opt = exact_optimum(tree, ref_logp, rewards, beta=0.1)
    opt.objective, opt.stats.gold, opt.stats.kl        # J*, E_pi*[gold], KL(pi* || pi_ref)
    policy_stats(tree, tree.logprobs(ppo_policy), ref_logp, rewards, 0.1, optimum=opt)

    tilted = TiltedOptimum(tree, ref_logp, rewards)    # the same optimum, sequence by sequence:
    tilted.stats(0.1)                                  # a new beta costs a few ms (a slider)
    tilted.stats_many(betas)                           # a curve over many betas, in one product

Rewards, and so E[r] and J, have the offset subtracted (as train_rlhf scores); the RM's raw score
is E[r] + rm_offset. A new beta re-runs only the backward pass (tens of ms), or TiltedOptimum's
softmax over reward levels (a few ms).
"""

from dataclasses import dataclass, field
import math

import torch

from course_utils.response_tree import (DEPTHS, FEATURES, N_CONT, complete_only, expectation, kl_divergence,
                                        complete_path_logprobs, n_states, response_probs)
from course_utils.tinylm import MAX_NEW


@dataclass
class Stats:
    """Exact expectations of one policy, averaged over the tree's prompts (uniform, as make_batch).

    reward     E[r] with r = rm(digit_counts(y)) - rm_offset: the RM score WITH the offset
               subtracted, the quantity train_rlhf logs as hist["rm"]
    kl         KL(pi || pi_ref), nats per response (train_rlhf's hist["kl"] estimates it)
    objective  J(pi) = reward - beta * kl
    gold       E[gold_score];  acc  P(exact answer);  malformed  P(gold < 0);  digits  E[#digits]
    kl_to_opt  KL(pi || pi*) when the optimum was given, else None; equals (J* - J(pi)) / beta
    per_prompt the same quantities per prompt, (P,) tensors
    """
    beta: float
    reward: float
    kl: float
    objective: float
    gold: float
    acc: float
    malformed: float
    digits: float
    kl_to_opt: float = None
    per_prompt: dict = field(default_factory=dict, repr=False)


@dataclass
class Optimum:
    """The exact optimum pi* of J at one beta.

    logp       tree tensors (P, S_d, 13): log pi*(a | s), usable wherever a policy's logp is
    values     tree tensors (P, S_d): soft values V(s)
    log_z      (P,) log Z(x);  objective  J* = mean over prompts of beta * log Z(x)
    stats      policy_stats of pi* itself (its objective equals J*)
    """
    beta: float
    logp: list
    values: list
    log_z: torch.Tensor
    objective: float
    stats: Stats


def soft_values(ref_logp, rewards, beta):
    """The backward pass: (values, logp) of the optimum, tree tensors (P, S_d) and (P, S_d, 13)."""
    if not beta > 0:
        raise ValueError(f"beta must be > 0 (beta -> 0 is the argmax of the reward), got {beta}")
    values, logp = [None] * MAX_NEW, [None] * MAX_NEW
    for d in reversed(DEPTHS):
        q = rewards[d]
        if d + 1 < MAX_NEW:                                   # continuing actions lead to V(child)
            child = values[d + 1].view(q.shape[0], n_states(d), N_CONT)
            q = torch.cat([child, q[..., N_CONT:]], dim=-1)
        z = ref_logp[d] + q / beta                             # (P, S_d, 13)
        lse = torch.logsumexp(z, dim=-1)                       # (P, S_d)
        values[d] = beta * lse
        logp[d] = z - lse[..., None]
    return values, logp


def exact_optimum(tree, ref_logp, rewards, beta):
    """pi* = pi_ref exp(r / beta) / Z on every prompt of ``tree``, with its statistics.

    Args:
        tree: a ResponseTree of P prompts; ref_logp: tree.logprobs(reference model);
        rewards: tree tensors, e.g. tree.rm_rewards(rm, rm_offset); beta: float > 0.
    Returns:
        an Optimum (log_z (P,), objective J*, logp of pi*, stats of pi*).
    """
    values, logp = soft_values(ref_logp, rewards, beta)
    log_z = values[0][:, 0] / beta
    stats = policy_stats(tree, logp, ref_logp, rewards, beta)
    return Optimum(beta, logp, values, log_z, float(values[0][:, 0].mean()), stats)


def policy_stats(tree, logp, ref_logp, rewards, beta, optimum=None):
    """Exact E[r], KL(pi || pi_ref), J, gold, accuracy (and KL(pi || pi*)) of a policy.

    Args:
        logp: tree.logprobs(policy) (or an Optimum's logp); the rest as in exact_optimum;
        optimum: an Optimum at the same beta, to also get KL(pi || pi*).
    """
    probs = response_probs(logp)
    feats = sum(p.flatten(1)[:, None].bmm(f.flatten(1, 2))[:, 0] for p, f in zip(probs, tree.features))  # (P, 4)
    pp = {"reward": expectation(probs, rewards), "kl": kl_divergence(logp, ref_logp),
          **{name: feats[:, k] for k, name in enumerate(FEATURES)}}
    pp["objective"] = pp["reward"] - beta * pp["kl"]
    if optimum is not None:
        pp["kl_to_opt"] = kl_divergence(logp, optimum.logp)
    means = {k: float(v.mean()) for k, v in pp.items()}
    return Stats(beta=beta, per_prompt=pp, **means)


class TiltedOptimum:
    """The optimum in its sequence-level form, pi*(y|x) = pi_ref(y|x) exp(r(y) / beta) / Z(x), over
    each prompt's complete responses: the same pi* as ``exact_optimum``, made cheap to re-solve.

    Responses with the same reward are tilted alike, so each prompt's responses are grouped by reward
    level (a reward model that reads digit counts gives about a thousand levels for 22621 responses):
    a new beta is a softmax over the levels, and the labeler's features enter as their pi_ref-weighted
    mean within each level. float64 throughout.

    Attributes:
        seq_ref   (P, N) log pi_ref(y | x) of every complete response (order of ``complete_only``)
        seq_rewards (P, N) r(y)
    """

    columns = ("reward",) + FEATURES

    def __init__(self, tree, ref_logp, rewards, chunk=10):
        self.seq_ref = complete_path_logprobs(ref_logp)                               # (P, N)
        P = self.seq_ref.shape[0]
        if all(torch.equal(r, r[:1].expand_as(r)) for r in rewards):  # one reward per response (an RM): sort N, not P N
            self.seq_rewards = complete_only([r[:1] for r in rewards]).expand(P, -1)  # (P, N), one row
            levels, which = torch.unique(self.seq_rewards[0], return_inverse=True)
            which = which.expand(P, -1)
        else:
            self.seq_rewards = complete_only(rewards)                                 # (P, N)
            levels, which = torch.unique(self.seq_rewards, return_inverse=True)       # (G,), (P, N)
        G = len(levels)
        mass = self.seq_ref.new_zeros(P, G)                                           # pi_ref(level)
        weighted = self.seq_ref.new_zeros(len(FEATURES), P, G)                        # sum of pi_ref * features
        features_of = tree.complete_features()                                        # rows -> (c, N, 4)
        for start in range(0, P, chunk):              # a few prompts at a time: no (P, N, 4) temporaries
            rows = slice(start, start + chunk)
            ref = self.seq_ref[rows].exp()                                            # (c, N)
            feats = features_of(rows)                                                 # (c, N, 4)
            mass[rows].scatter_add_(1, which[rows], ref)
            for k in range(len(FEATURES)):            # a column at a time: a third faster than one (c, N, 4) scatter
                weighted[k, rows].scatter_add_(1, which[rows], ref * feats[..., k])
        weighted = weighted.permute(1, 2, 0)                                          # (P, G, 4)
        self.levels = levels                                                          # (G,)
        self.log_mass = mass.log()                                                    # (P, G), -inf if empty
        means = weighted / mass.clamp_min(1e-300)[..., None]                          # E_ref[f | level]
        self.level_values = torch.cat([levels.expand(P, G)[..., None], means], dim=-1)   # (P, G, 5)
        # pi_ref(level) and pi_ref(level) * each column: what stats_many sums with one tilt per beta
        self.moments = torch.cat([mass[..., None], mass[..., None] * levels[:, None], weighted], dim=-1)  # (P, G, 6)

    def log_z(self, beta):
        """log Z(x) = log sum_y pi_ref(y|x) exp(r(y) / beta): (P,)."""
        return torch.logsumexp(self.log_mass + self.levels / beta, dim=1)

    def stats(self, beta):
        """Exact E[r], KL(pi* || pi_ref), gold, acc, malformed, digits of the optimum at ``beta``,
        averaged over the prompts (floats). beta = inf gives pi_ref itself."""
        z = self.log_mass + (0.0 if math.isinf(beta) else self.levels / beta)        # (P, G)
        log_z = torch.logsumexp(z, dim=1, keepdim=True)
        w = (z - log_z).exp()                                                         # pi*(level)
        per_prompt = (w[..., None] * self.level_values).sum(1)                        # (P, 5)
        out = dict(zip(self.columns, per_prompt.mean(0).tolist()))
        kl = 0.0 if math.isinf(beta) else float((per_prompt[:, 0] / beta - log_z[:, 0]).mean())
        out["kl"] = max(kl, 0.0)                               # KL(pi* || pi_ref) = E[r] / beta - log Z
        return out

    def stats_many(self, betas):
        """``stats`` at each of ``betas`` at once: {column: (B,) float64 array}, the columns of ``stats``.

        pi*(level) is pi_ref(level) exp(r / beta) / Z; with exp(r / beta) shifted by the largest level's
        (one shift per beta, shared by the prompts), the tilt is a (B, G) matrix and every expectation of
        every prompt one product with ``moments``: the same numbers as ``stats`` to ~1e-15, without a
        softmax over (P, G) per beta. A prompt whose pi_ref puts next to nothing where the tilt is
        largest would underflow the shared shift: those betas go through ``stats``."""
        betas = torch.as_tensor(betas, dtype=torch.float64)                          # (B,)
        inv = torch.where(torch.isinf(betas), torch.zeros_like(betas), 1.0 / betas)
        exponent = inv[:, None] * self.levels                                         # (B, G)
        shift = exponent.amax(dim=1, keepdim=True)                                    # (B, 1)
        sums = torch.einsum("bg,pgk->bpk", (exponent - shift).exp(), self.moments)    # (B, P, 6)
        norm = sums[..., 0]                                                           # (B, P): Z / exp(shift)
        per_prompt = sums[..., 1:] / norm[..., None]                                  # (B, P, 5)
        kl = (per_prompt[..., 0] * inv[:, None] - norm.log() - shift).mean(1)       # E[r] / beta - log Z
        out = {k: v.numpy() for k, v in zip(self.columns, per_prompt.mean(1).unbind(-1))}
        out["kl"] = torch.where(inv > 0, kl, 0.0).clamp_min(0.0).numpy()          # beta = inf: pi_ref itself
        for i in (~(norm > 1e-250).all(dim=1)).nonzero().flatten().tolist():        # underflow: one by one
            for k, v in self.stats(float(betas[i])).items():
                out[k][i] = v
        return out

    def response_logprobs(self, beta, p):
        """log pi*(y | x) of every complete response to prompt number ``p``: (N,)."""
        z = self.seq_ref[p] + self.seq_rewards[p] / beta
        return z - torch.logsumexp(z, dim=0)


__all__ = ["Stats", "Optimum", "soft_values", "exact_optimum", "policy_stats", "TiltedOptimum"]
