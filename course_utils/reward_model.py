"""The proxy reward model: linear in how many of each digit a response holds.

It sees which digits a response holds, not whether they add up, so a policy that optimizes it hard
enough learns to emit digits: the score goes up while the labeler's goes down.
"""

import random

import torch
import torch.nn as nn

from course_utils.tinylm import make_batch, sample


def digit_counts(out):
    """How many times each digit 0-9 occurs in each response (real tokens only): (B, 10) float."""
    resp = out["ids"][:, out["prompt_len"]:]
    real_digit = (out["mask"] > 0) & (resp < 10)
    counts = torch.zeros(resp.shape[0], 10)
    return counts.scatter_add_(1, resp.clamp(max=9), real_digit.float())


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


@torch.no_grad()
def sft_offset(rm, sft_model, n=2000, seed=2):
    """The RM offset: the mean score ``rm`` gives n responses of the SFT model (seeded prompts and
    samples). Scores minus this offset put an SFT answer at about 0, as in InstructGPT."""
    prompts, _ = make_batch(n, random.Random(seed))
    out = sample(sft_model, prompts, generator=torch.Generator().manual_seed(seed))
    return rm(digit_counts(out)).mean().item()


@torch.no_grad()
def gold_order_agreement(rm, counts_w, counts_l, gold_w, gold_l):
    """How often ``rm`` orders a pair like the noise-free gold score, on the pairs whose gold scores
    differ (a tie counts 1/2): (agreement, the fraction of pairs with a gold winner).

    Args: the digit counts (N, 10) and gold scores (N,) of each pair's winner and loser, as the
    lab's ``comparisons`` returns them.
    """
    margin = rm(counts_w) - rm(counts_l)
    decided = gold_w != gold_l
    right = (margin * (gold_w - gold_l) > 0).float() + 0.5 * (margin == 0).float()
    return right[decided].mean().item(), decided.float().mean().item()


__all__ = ["digit_counts", "DigitRM", "sft_offset", "gold_order_agreement"]
