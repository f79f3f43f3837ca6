"""Preferences for the toy: the hidden labeler, ranked data, the proxy reward model and the critic.

The labeler knows the truth (``gold_score``); the reward model only sees how many of each digit a
response holds (``DigitRM``), so it cannot tell a right answer from a long one. Optimize it too hard
and the policy learns to emit digits: the reward model's score goes up while the labeler's goes down.
"""

import copy
import random

import torch
import torch.nn as nn

from course_utils.tinylm import EOS, MAX_NEW, PAD, answer_tokens, encode_prompts, make_batch, sample, \
    supervised_loss

KAPPA = 0.3   # labeler confidence: P(w preferred to l) = sigmoid(KAPPA * (gold_w - gold_l))


# ----------------------------------------------------------------------------- the hidden labeler
def gold_score(out):
    """The labeler's true score of each response of a rollout: (B,) float.

        +1  the exact sum followed by EOS                   ("12<eos>" for 7+5)
         0  a wrong number of 1 or 2 digits followed by EOS ("13<eos>")
        -1  malformed: blank, 3+ digits, no EOS, or a non-digit token
    """
    ids, L = out["ids"], out["prompt_len"]
    resp = ids[:, L:]                                                  # (B, T)
    if resp.shape[1] < MAX_NEW:
        resp = torch.cat([resp, torch.full((resp.shape[0], MAX_NEW - resp.shape[1]), PAD)], dim=1)
    correct = (resp == answer_tokens(ids)).all(dim=1)
    is_digit = resp < 10
    n_lead_digits = is_digit.long().cumprod(dim=1).sum(dim=1)         # digits before anything else
    eos_after_digits = resp.gather(1, n_lead_digits.clamp(max=MAX_NEW - 1)[:, None]).squeeze(1) == EOS
    well_formed = (n_lead_digits >= 1) & (n_lead_digits <= 2) & eos_after_digits
    return torch.where(correct, 1.0, torch.where(well_formed, 0.0, -1.0))


def digit_counts(out):
    """How many times each digit 0-9 occurs in each response (real tokens only): (B, 10) float."""
    resp = out["ids"][:, out["prompt_len"]:]
    real_digit = (out["mask"] > 0) & (resp < 10)
    counts = torch.zeros(resp.shape[0], 10)
    return counts.scatter_add_(1, resp.clamp(max=9), real_digit.float())


def ranked_data(model, n_prompts, k=4, seed=0, kappa=None):
    """Rankings by the noisy labeler of K sampled responses per prompt (Plackett-Luce).

    A ranking is drawn by sorting ``kappa * gold + Gumbel noise``, best first, which makes
    P(w ranked above l) = sigmoid(kappa * (gold_w - gold_l)) for every pair.

    Returns:
        list of n_prompts dicts: ``prompt`` (str), ``out`` (a rollout of its K responses),
        ``gold`` (K,) tensor, ``ranking`` (list of K response indices, best first).
    """
    kappa = KAPPA if kappa is None else kappa
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    prompts, _ = make_batch(n_prompts, rng)
    out = sample(model, [p for p in prompts for _ in range(k)], generator=gen)
    gold = gold_score(out).view(n_prompts, k)
    u = torch.rand(n_prompts, k, generator=gen).clamp_min(1e-12)
    gumbel = -torch.log(-torch.log(u))
    rankings = torch.argsort(kappa * gold + gumbel, dim=1, descending=True)
    data = []
    for i, p in enumerate(prompts):
        rows = slice(i * k, (i + 1) * k)
        data.append({"prompt": p,
                     "out": {"ids": out["ids"][rows], "prompt_len": out["prompt_len"], "mask": out["mask"][rows]},
                     "gold": gold[i], "ranking": rankings[i].tolist()})
    return data


# ----------------------------------------------------------------------------- the proxy reward model
class DigitRM(nn.Module):
    """A reward model linear in the ten digit counts: r(x, y) = counts(y) . w.

    ``rm(counts)`` with counts (N, 10) returns scores (N,). It sees which digits a response holds,
    not whether they add up: a proxy that can be hacked.
    """

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(10))

    def forward(self, counts):
        return counts @ self.w


# ----------------------------------------------------------------------------- the critic
class ValueModel(nn.Module):
    """The critic: a trainable copy of the LM's body plus a scalar head.

    ``critic(out)`` returns values (B, T): entry [b, t] is V(x, y_<t), the value of the state in
    which response token t was chosen (read at column prompt_len - 1 + t), and 0 at padding.
    """

    def __init__(self, sft_model):
        super().__init__()
        self.body = copy.deepcopy(sft_model)
        self.body.requires_grad_(True)     # the copy must train even if sft_model was frozen
        self.head = nn.Linear(self.body.head.in_features, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def forward(self, out):
        ids, L, mask = out["ids"], out["prompt_len"], out["mask"]
        h = self.body.hidden(ids[:, :-1])[:, L - 1:]                  # (B, T, d)
        return self.head(h).squeeze(-1) * mask


# ----------------------------------------------------------------------------- masked statistics
def masked_mean(x, mask):
    """Mean of x over the positions where mask is 1 (padding may hold anything, even nan): scalar."""
    m = mask.bool()
    return torch.where(m, x, torch.zeros_like(x)).sum() / m.sum().clamp_min(1)


def masked_whiten(x, mask, eps=1e-8):
    """(x - mean) / std over the real positions only; padding is exactly 0 afterwards."""
    m = mask.bool()
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return torch.where(m, (x - mean) * torch.rsqrt(var + eps), torch.zeros_like(x))


# ----------------------------------------------------------------------------- PPO-ptx
def sft_loss(policy, batch, rng):
    """Supervised loss on ``batch`` clean, correct additions drawn from ``rng`` (for PPO-ptx)."""
    prompts, _ = make_batch(batch, rng)
    ids, _ = encode_prompts(prompts)
    return supervised_loss(policy, ids, answer_tokens(ids))


__all__ = ["KAPPA", "gold_score", "digit_counts", "ranked_data", "DigitRM", "ValueModel",
           "masked_mean", "masked_whiten", "sft_loss"]
