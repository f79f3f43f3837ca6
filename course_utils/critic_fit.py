"""A critic fitted afresh to a frozen policy, the way train_rlhf fits its own (Lab 12's Experiment 10).

train_rlhf keeps its critic to itself, so CriticView fits one: a new ValueModel of the SFT model, Adam
at cfg.vf_lr, cfg.epochs full-batch steps on each batch of cfg.batch rollouts, targets the returns of
the lab's gae_per_token (at cfg.lam) on the rewards of the lab's kl_penalized_rewards, loss the lab's
ppo_rlhf_loss (whose policy part has no gradient here), gradients clipped at norm 1. What differs: the
policy is the trained one, frozen; the clip applies to the critic's gradient alone (train_rlhf clips
policy and critic together); and the critic sees FIT_ITERS batches, not cfg.iters.

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
    gen = random.Random(seed)
    critic = ValueModel(ref)
    opt = torch.optim.Adam(critic.parameters(), lr=cfg.vf_lr)
    for _ in range(iters):
        prompts, _ = make_batch(cfg.batch, gen)
        out = sample(policy, prompts)
        mask = out["mask"]
        values = critic(out)                    # the first step's forward; its values (a copy) feed GAE too
        with torch.no_grad():
            old_logp, ref_logp = sequence_logprobs(policy, out), sequence_logprobs(ref, out)
            score = rm(digit_counts(out)) - rm_offset
            rewards = kl_penalized_rewards(old_logp, ref_logp, score, mask, cfg.beta)
            adv, ret = gae_per_token(rewards, values.detach().clone(), mask, 1.0, cfg.lam)
            adv = masked_whiten(adv, mask)
        for epoch in range(cfg.epochs):
            values = values if epoch == 0 else critic(out)
            loss, _ = ppo_rlhf_loss(old_logp, old_logp, values, adv, ret, mask, cfg.clip_eps, cfg.vf_coef)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(list(critic.parameters()), 1.0)
            opt.step()
    return critic.eval()


__all__ = ["FIT_ITERS", "fit_critic"]
