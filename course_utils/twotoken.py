"""Lab 11's enumerable toy: the SFT model's responses cut to exactly two tokens.

For one prompt, every two-token response "ij" can be listed (V x V = 225 of them), so the policy is
a table, not a sampler:

    first   (V,)    pi(y1 = i | x)
    second  (V, V)  pi(y2 = j | x, y1 = i);  the row of EOS puts all its mass on PAD (the response
                    already ended), so pi(ij) = first[i] * second[i, j] sums to 1 over the table.
    rewards (V, V)  +1 if "ij" spells the answer ("7"+EOS for 3+4, "1","2" for 7+5),
                     0 for another well-formed number, -1 for anything else (blank, non-digits).

These are the inputs of Lab 11's tilted_optimum, kl_objective and token_level_optimum, and
``pair_kl`` is the exact KL that the KL-estimator experiment compares its estimates against.
"""

import numpy as np
import torch

from course_utils.tinylm import EOS, PAD, TOKENS, VOCAB_SIZE, _allowed_logits, encode_prompts

V = VOCAB_SIZE


@torch.no_grad()
def two_token_logits(model, prompt):
    """Logits of the first token (V,) and of the second token after each first token (V, V).

    Forbidden tokens (BOS, PAD) carry -inf. Compute once per prompt, then apply any temperature
    with :func:`two_token_policy` for free.
    """
    ids, _ = encode_prompts([prompt])                                   # (1, 5)
    z1 = _allowed_logits(model(ids)[0, -1]).double()                    # (V,)
    both = torch.cat([ids.expand(V, -1), torch.arange(V)[:, None]], dim=1)   # (V, 6): prompt + i
    z2 = _allowed_logits(model(both)[:, -1]).double()                   # (V, V)
    return z1.numpy(), z2.numpy()


def _softmax(z, temperature):
    """softmax(z / T) over the last axis; T = 0 is greedy (one-hot on the argmax)."""
    if temperature == 0:
        return np.eye(z.shape[-1])[np.argmax(z, axis=-1)]
    s = z / temperature
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    return p / p.sum(axis=-1, keepdims=True)


def two_token_policy(logits, temperature=1.0):
    """(first (V,), second (V, V)) of pi_T from ``two_token_logits``; EOS's row ends on PAD."""
    z1, z2 = logits
    first = _softmax(z1, temperature)
    second = _softmax(z2, temperature)
    second[EOS] = 0.0
    second[EOS, PAD] = 1.0
    return first, second


def two_token_rewards(prompt):
    """Reward table (V, V) of every two-token response to ``prompt`` ("a+b=")."""
    encode_prompts([prompt])                                            # validates the prompt
    answer = str(int(prompt[0]) + int(prompt[2]))
    rewards = -np.ones((V, V))
    for i in range(10):
        for j in list(range(10)) + [EOS]:
            if i == 0 and j < 10:                                           # "07" is not a number
                continue
            text = str(i) + (TOKENS[j] if j < 10 else "")
            rewards[i, j] = 1.0 if text == answer else 0.0
    return rewards


def joint(first, second):
    """pi(ij) = first[i] * second[i, j]: (V, V), sums to 1."""
    return first[:, None] * second


def pair_kl(first_p, second_p, first_q, second_q):
    """Exact KL(p || q) between two two-token policies (0 log 0 = 0; inf if q misses p's support)."""
    p, q = joint(first_p, second_p), joint(first_q, second_q)
    support = p > 0
    if (q[support] == 0).any():
        return float("inf")
    return float((p[support] * (np.log(p[support]) - np.log(q[support]))).sum())


def response_text(i, j):
    """Readable text of the response "ij", e.g. "7<eos>" or "12"."""
    return TOKENS[i] + ("" if i == EOS else TOKENS[j])


__all__ = ["V", "two_token_logits", "two_token_policy", "two_token_rewards", "joint", "pair_kl",
           "response_text"]
