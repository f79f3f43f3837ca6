"""The hidden labeler: the truth about each response, and the noisy rankings it hands out.

``gold_score`` is what the labeler really thinks of a response; ``ranked_data`` is all that the
reward model ever sees of it: rankings of K sampled responses, noisy in proportion to ``KAPPA``;
what the experiments report about responses is ``course_utils.evaluation``'s.
"""

import random

import torch

from course_utils.tinylm import EOS, MAX_NEW, N_DIGITS, PAD, answer_tokens, make_batch, sample

KAPPA = 0.3   # labeler confidence: P(w preferred to l) = sigmoid(KAPPA * (gold_w - gold_l))


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
    is_digit = resp < N_DIGITS
    n_lead_digits = is_digit.long().cumprod(dim=1).sum(dim=1)         # digits before anything else
    eos_after_digits = resp.gather(1, n_lead_digits.clamp(max=MAX_NEW - 1)[:, None]).squeeze(1) == EOS
    well_formed = (n_lead_digits >= 1) & (n_lead_digits <= 2) & eos_after_digits
    return torch.where(correct, 1.0, torch.where(well_formed, 0.0, -1.0))


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


__all__ = ["KAPPA", "gold_score", "ranked_data"]


def __getattr__(name):
    """response_metrics and RESPONSE_METRICS moved to course_utils.evaluation; response_tree.py still
    imports them from here (to go once it imports them from there)."""
    if name in ("response_metrics", "RESPONSE_METRICS"):
        from course_utils import evaluation
        return getattr(evaluation, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
