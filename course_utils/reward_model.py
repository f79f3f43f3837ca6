"""The proxy reward model: linear in how many of each digit a response holds.

It sees which digits a response holds, not whether they add up, so a policy that optimizes it hard
enough learns to emit digits: the score goes up while the labeler's goes down.
"""

import torch
import torch.nn as nn

from course_utils.tinylm import N_DIGITS


def digit_counts(out):
    """How many times each digit 0-9 occurs in each response (real tokens only): (B, 10) float."""
    resp = out["ids"][:, out["prompt_len"]:]
    real_digit = (out["mask"] > 0) & (resp < N_DIGITS)
    counts = torch.zeros(resp.shape[0], N_DIGITS)
    return counts.scatter_add_(1, resp.clamp(max=N_DIGITS - 1), real_digit.float())


class DigitRM(nn.Module):
    """A reward model linear in the ten digit counts: r(x, y) = counts(y) . w.

    ``rm(counts)`` with counts (N, 10) returns scores (N,). It sees which digits a response holds,
    not whether they add up: a proxy that can be hacked.
    """

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(N_DIGITS))

    def forward(self, counts):
        return counts @ self.w


__all__ = ["digit_counts", "DigitRM"]
