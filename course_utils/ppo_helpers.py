"""What PPO needs besides the lab's own tasks: the critic, masked statistics, the PPO-ptx loss."""

import copy
import types

import torch
import torch.nn as nn

from course_utils.tinylm import answer_tokens, encode_prompts, make_batch, supervised_loss


class ValueModel(nn.Module):
    """The critic: a trainable copy of the LM's body plus a scalar head.

    ``critic(out)`` returns values (B, T): entry [b, t] is V(x, y_<t), the value of the state in
    which response token t was chosen (read at column prompt_len - 1 + t), and 0 at padding.

    The head's weight (1, d) and bias (1,) live in one parameter, ``head_weights`` (d + 1), zero at
    the start; ``critic.head.weight`` and ``critic.head.bias`` are views of it. One tensor fewer for
    the optimizer, whose step costs a few operations per tensor whatever its size (see ``TinyLM``).
    """

    def __init__(self, sft_model):
        super().__init__()
        self.body = copy.deepcopy(sft_model)
        self.body.requires_grad_(True)     # the copy must train even if sft_model was frozen
        d = self.body.d_model
        nn.Linear(d, 1)                    # drawn and dropped: the global RNG moves as when the head was an nn.Linear
        self.head_weights = nn.Parameter(torch.zeros(d + 1))

    @property
    def head(self):
        """The value head as views of ``head_weights``: ``.weight`` (1, d) and ``.bias`` (1,)."""
        d = self.body.d_model
        return types.SimpleNamespace(weight=self.head_weights[:d].view(1, d), bias=self.head_weights[d:])

    def forward(self, out):
        ids, L, mask = out["ids"], out["prompt_len"], out["mask"]
        return self.body.scalar_head(ids[:, :-1], self.head_weights, last=ids.shape[1] - L) * mask   # (B, T)


# ----------------------------------------------------------------------------- masked statistics
def masked_mean(x, mask):
    """sum(x * mask) / sum(mask): the mean of x over the real positions (a scalar).

    Padding must hold finite numbers (0 * nan is nan), as every tensor of a rollout does; a sum that
    survives nan or -inf at padding is Lab 11's Task 1b, not this helper.
    """
    return (x * mask).sum() / mask.sum().clamp_min(1)


def masked_whiten(x, mask, eps=1e-8):
    """(x - mean) / std over the real positions only (padding may hold anything); padding is 0 afterwards."""
    m = mask.bool()
    x = torch.where(m, x, torch.zeros_like(x))
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return torch.where(m, (x - mean) * torch.rsqrt(var + eps), torch.zeros_like(x))


# ----------------------------------------------------------------------------- PPO-ptx
def sft_loss(policy, batch, rng):
    """Supervised loss on ``batch`` clean, correct additions drawn from ``rng`` (for PPO-ptx)."""
    prompts, _ = make_batch(batch, rng)
    ids, _ = encode_prompts(prompts)
    return supervised_loss(policy, ids, answer_tokens(ids))


__all__ = ["ValueModel", "masked_mean", "masked_whiten", "sft_loss"]
