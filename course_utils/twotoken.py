"""Lab 11's enumerable toy: the SFT model's responses cut to exactly two tokens.

For one prompt, every two-token response "ij" can be listed (V x V = 225 of them), so the policy is
a table, not a sampler:

    first   (V,)    pi(y1 = i | x)
    second  (V, V)  pi(y2 = j | x, y1 = i);  the row of EOS puts all its mass on PAD (the response
                    already ended), so pi(ij) = first[i] * second[i, j] sums to 1 over the table.
    rewards (V, V)  +1 if "ij" spells the answer ("7"+EOS for 3+4, "1","2" for 7+5),
                     0 for another well-formed number, -1 for anything else (blank, non-digits).

These are the inputs of Lab 11's tilted_optimum, kl_objective and token_level_optimum.

    logits = two_token_logits(model, "7+5=")          # runs the model once
    first, second = two_token_policy(logits, 0.7)     # pi_T at any temperature, for free

The temperature here applies to the toy LM's own logits only: ``two_token_policy`` takes what
``two_token_logits`` computed with the course's TinyLM forward pass from a model's weights, never
arbitrary logits (a softmax at temperature T of any logits would be Lab 11's Task 2 with one line
of glue).
"""

import numpy as np
import torch

from course_utils.tinylm import DIGITS, EOS, N_DIGITS, PAD, TOKENS, VOCAB_SIZE, _allowed_logits, _genuine, encode_prompts

V = VOCAB_SIZE


class TwoTokenLogits:
    """The toy LM's logits for every two-token response to one prompt (BOS and PAD carry -inf).

    ``first`` (V,): the logits of y1; ``second`` (V, V): those of y2 after each y1 (float64 copies).
    """

    @torch.no_grad()
    def __init__(self, model, prompt):
        model = _genuine(model, "two_token_logits")                        # the weights, not the methods
        ids, _ = encode_prompts([prompt])                                   # (1, 5)
        both = torch.cat([ids.expand(V, -1), torch.arange(V)[:, None]], dim=1)   # (V, 6): prompt + i
        self.prompt = prompt
        self._z1 = _allowed_logits(model(ids)[0, -1]).double().numpy()      # (V,)
        self._z2 = _allowed_logits(model(both)[:, -1]).double().numpy()     # (V, V)

    @property
    def first(self):
        return self._z1.copy()

    @property
    def second(self):
        return self._z2.copy()

    def policy(self, temperature):
        """(first (V,), second (V, V)) of pi_T; T = 0 is greedy (one-hot on each argmax)."""
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        tables = []
        for z in (self._z1, self._z2):
            if temperature == 0:
                tables.append(np.eye(V)[np.argmax(z, axis=-1)])
            else:
                s = z / temperature
                e = np.exp(s - s.max(axis=-1, keepdims=True))
                tables.append(e / e.sum(axis=-1, keepdims=True))
        first, second = tables
        second[EOS] = 0.0
        second[EOS, PAD] = 1.0
        return first, second


def two_token_logits(model, prompt):
    """The TwoTokenLogits of a TinyLM on ``prompt`` ("a+b="): compute once, then apply any
    temperature with :func:`two_token_policy`."""
    return TwoTokenLogits(model, prompt)


def two_token_policy(logits, temperature=1.0):
    """(first (V,), second (V, V)) of pi_T from ``two_token_logits``; EOS's row ends on PAD."""
    if not isinstance(logits, TwoTokenLogits):
        raise TypeError(f"two_token_policy takes what two_token_logits(model, prompt) returns, "
                        f"got {type(logits).__name__}")
    return logits.policy(temperature)


def two_token_rewards(prompt):
    """Reward table (V, V) of every two-token response to ``prompt`` ("a+b=")."""
    encode_prompts([prompt])                                            # validates the prompt
    answer = str(int(prompt[0]) + int(prompt[2]))
    rewards = -np.ones((V, V))
    for i in DIGITS:
        for j in DIGITS + [EOS]:
            if i == 0 and j < N_DIGITS:                                     # "07" is not a number
                continue
            text = TOKENS[i] + (TOKENS[j] if j < N_DIGITS else "")
            rewards[i, j] = 1.0 if text == answer else 0.0
    return rewards


def joint(first, second):
    """pi(ij) = first[i] * second[i, j]: (V, V), sums to 1."""
    return first[:, None] * second


def response_text(i, j):
    """Readable text of the response "ij", e.g. "7<eos>" or "12"."""
    return TOKENS[i] + ("" if i == EOS else TOKENS[j])


__all__ = ["V", "TwoTokenLogits", "two_token_logits", "two_token_policy", "two_token_rewards", "joint",
           "response_text"]
