"""What the experiments measure, beside each other: the metric schema and the helpers that compute it.

    METRICS            train_rlhf's history keys, as Lab 12's panels plot them
    RESPONSE_METRICS   the part of METRICS that each response has on its own (no RM, no KL)
    response_metrics(out)              {name: (B,) float} of a rollout, for RESPONSE_METRICS
    pair_accuracy(margins)             how often a margin is positive, a tie counting 1/2
    noise_ceiling(p)                   the best accuracy on pairs a labeler orders right with probability p
    gold_order_agreement(rm, ...)      pair_accuracy of an RM against the noise-free gold order
    sft_offset(rm, sft_model, n, seed) the mean RM score of SFT samples (scores minus it: SFT at about 0)
    last_third(hist, key)              the mean of a history's metric over its last third: where a run settled
"""

import random

import torch

from course_utils.labeler import gold_score
from course_utils.reward_model import digit_counts
from course_utils.tinylm import make_batch, sample

METRICS = ("rm", "gold", "kl", "acc", "malformed", "digits")
RESPONSE_METRICS = tuple(m for m in METRICS if m not in ("rm", "kl"))   # gold, acc, malformed, digits


def response_metrics(out):
    """The RESPONSE_METRICS of each response of a rollout: {name: (B,) float}.

        gold       the labeler's score (gold_score)
        acc        1 if the response is exactly the sum, else 0 (gold == 1)
        malformed  1 if it is blank, too long, unended or not a number (gold < 0)
        digits     how many digits it holds (what the proxy reward model counts)
    """
    gold = gold_score(out)
    return {"gold": gold, "acc": (gold == 1).float(), "malformed": (gold < 0).float(),
            "digits": digit_counts(out).sum(1)}


def pair_accuracy(margins):
    """Mean of (margin > 0), a tie (margin == 0) counting 1/2: margins (N,) -> float."""
    return ((margins > 0).float() + 0.5 * (margins == 0).float()).mean().item()


def noise_ceiling(p):
    """The expected accuracy of the best possible reward model on pairs whose preferred response the
    labeler picks with probability p (N,): mean of max(p, 1 - p)."""
    return torch.maximum(p, 1 - p).mean().item()


@torch.no_grad()
def gold_order_agreement(rm, counts_w, counts_l, gold_w, gold_l):
    """How often ``rm`` orders a pair like the noise-free gold score, on the pairs whose gold scores
    differ (a tie counts 1/2): (agreement, the fraction of pairs with a gold winner).

    Args: the digit counts (N, 10) and gold scores (N,) of each pair's winner and loser, as the
    lab's ``comparisons`` returns them.
    """
    margin = (rm(counts_w) - rm(counts_l)) * torch.sign(gold_w - gold_l)
    decided = gold_w != gold_l
    return pair_accuracy(margin[decided]), decided.float().mean().item()


@torch.no_grad()
def sft_offset(rm, sft_model, n, seed):
    """The RM offset: the mean score ``rm`` gives n responses of the SFT model (seeded prompts and
    samples). Scores minus this offset put an SFT answer at about 0, as in InstructGPT."""
    prompts, _ = make_batch(n, random.Random(seed))
    out = sample(sft_model, prompts, generator=torch.Generator().manual_seed(seed))
    return rm(digit_counts(out)).mean().item()


__all__ = ["METRICS", "RESPONSE_METRICS", "response_metrics", "pair_accuracy", "noise_ceiling",
           "gold_order_agreement", "sft_offset"]


def last_third(hist, key):
    """Mean of ``hist[key]`` over the last third of the iterations: where a run has settled."""
    values = hist[key][-(len(hist[key]) // 3 or 1):]
    return sum(values) / len(values)
