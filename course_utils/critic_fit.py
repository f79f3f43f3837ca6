"""A critic fitted afresh to a frozen policy, the way train_rlhf fits its own (Lab 12's Experiment 10).

train_rlhf keeps its critic to itself, so CriticView fits one: a new ValueModel of the SFT model, Adam
at cfg.vf_lr, cfg.epochs full-batch steps on each batch of cfg.batch rollouts, targets the returns of
the lab's gae_per_token (at cfg.lam) on the rewards of the lab's kl_penalized_rewards, loss the lab's
ppo_rlhf_loss (whose policy part has no gradient here), gradients clipped at norm 1. What differs: the
policy is the trained one, frozen; the clip applies to the critic's gradient alone (train_rlhf clips
policy and critic together); and the critic sees FIT_ITERS batches, not cfg.iters.

The policy being frozen, its FIT_ITERS batches are drawn from the same distribution whenever they are
drawn: they are sampled, scored and log-probed all at once (one pass each instead of one per batch),
and only the critic's own steps run batch after batch. The critic's weights are one flat vector for
its optimizer and clip (``_flat_parameter``): a step costs a handful of tensor operations, not a
handful per weight tensor.

    critic = fit_critic(policy, sft, rm, rm_offset, cfg, kl_penalized_rewards, gae_per_token, ppo_rlhf_loss)
"""

import random

import torch

from course_utils.ppo_helpers import ValueModel, masked_whiten
from course_utils.reward_model import digit_counts
from course_utils.tinylm import make_batch, sample, sequence_logprobs

FIT_ITERS = 20          # batches the critic is fitted on (train_rlhf fits its own on cfg.iters = 120)


def fit_critic(policy, ref, rm, rm_offset, cfg, kl_penalized_rewards, gae_per_token, ppo_rlhf_loss,
               iters=FIT_ITERS, seed=0):
    """A fresh critic fitted to the frozen ``policy`` as train_rlhf fits its own (module docstring)."""
    torch.manual_seed(seed)
    critic = ValueModel(ref)
    flat = _flat_parameter(critic)
    opt = torch.optim.Adam([flat], lr=cfg.vf_lr, fused=True)
    for out, old_logp, ref_logp, score in _batches(policy, ref, rm, rm_offset, cfg.batch, iters, random.Random(seed)):
        mask = out["mask"]
        values = critic(out)                    # the first step's forward; its values (a copy) feed GAE too
        with torch.no_grad():
            rewards = kl_penalized_rewards(old_logp, ref_logp, score, mask, cfg.beta)
            adv, ret = gae_per_token(rewards, values.detach().clone(), mask, 1.0, cfg.lam)
            adv = masked_whiten(adv, mask)
        for epoch in range(cfg.epochs):
            values = values if epoch == 0 else critic(out)
            loss, _ = ppo_rlhf_loss(old_logp, old_logp, values, adv, ret, mask, cfg.clip_eps, cfg.vf_coef)
            flat.grad.zero_()
            loss.backward()
            torch.nn.utils.clip_grad_norm_([flat], 1.0)
            opt.step()
    return critic.eval()


def _batches(policy, ref, rm, rm_offset, batch, iters, gen):
    """``iters`` batches of ``batch`` rollouts of the frozen ``policy``, as (rollout, its log-probs under
    the policy and ``ref``, (B, T) each, RM scores (B,)): the prompts drawn batch by batch from ``gen``
    (make_batch, as train_rlhf does), the responses sampled and scored in one pass for all of them."""
    prompts = [p for _ in range(iters) for p in make_batch(batch, gen)[0]]
    out = sample(policy, prompts)
    with torch.no_grad():
        old_logp, ref_logp = sequence_logprobs(policy, out), sequence_logprobs(ref, out)
        score = rm(digit_counts(out)) - rm_offset
    for i in range(0, len(prompts), batch):
        rows = slice(i, i + batch)
        part = {"ids": out["ids"][rows], "prompt_len": out["prompt_len"], "mask": out["mask"][rows]}
        yield part, old_logp[rows], ref_logp[rows], score[rows]


def _flat_parameter(model):
    """One parameter holding all of ``model``'s weights, each of which becomes a view of it (its data
    and its gradient): an optimizer and a clip given that one parameter update the model. Its
    gradient starts at zero and is accumulated in place (zero it with ``flat.grad.zero_()``, never
    ``zero_grad()``, which would drop the tensor the views point into)."""
    params = list(model.parameters())
    flat = torch.nn.Parameter(torch.cat([p.detach().flatten() for p in params]))
    flat.grad = torch.zeros_like(flat)
    for p, data, grad in zip(params, flat.data.split([p.numel() for p in params]), flat.grad.split([p.numel() for p in params])):
        p.data, p.grad = data.view_as(p), grad.view_as(p)
    return flat


__all__ = ["FIT_ITERS", "fit_critic"]
