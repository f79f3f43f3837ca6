"""Lab 12's Experiment 10: how a token mean and a response mean of the loss weigh long and short responses.

A loss averaged over the N real tokens of a batch (a token mean, Task 5's ``masked_mean``) gives each
token the weight 1/N, so a response of L tokens weighs L/N. Averaged per response, then over the B
responses (a response mean), each response weighs 1/B and each of its tokens 1/(B L). The view
samples batches from a few policies and prints, per response length, the share of the responses and
the share of the loss's weight each mean gives them:

    views.LossWeights(runs, {"PPO, beta = 0": RLHFConfig(beta=0.0)}).show()
"""

import random

import torch

from course_utils.tinylm import MAX_NEW, make_batch, sample
from course_utils.views.base import View

N_BATCHES = 20          # batches per policy, of cfg.batch responses each (train_rlhf's batch)


def length_weights(mask):
    """Per response length L = 1..MAX_NEW, averaged over batches: (responses, token mean, ratio).

    mask: (n_batches, B, T) the rollouts' masks. Returns three (MAX_NEW,) tensors: the fraction of
    responses of length L (the share of the loss's weight on them under a response mean, 1/B each),
    that share under a token mean (L/N each), and the weight of one of their tokens under a response
    mean over its weight under a token mean, (1/(B L)) / (1/N) = N / (B L).
    """
    lengths = mask.sum(-1)                                                     # (n, B)
    n_tokens = lengths.sum(-1, keepdim=True)                                   # (n, 1): N per batch
    by_length = torch.stack([lengths == L for L in range(1, MAX_NEW + 1)], dim=-1).double()   # (n, B, 4)
    responses = by_length.mean(1)                                              # (n, 4): 1/B each
    token_mean = (by_length * (lengths / n_tokens)[..., None]).sum(1)          # L/N each
    ratio = n_tokens / (lengths.shape[1] * torch.arange(1, MAX_NEW + 1))       # (n, 4): N / (B L)
    return responses.mean(0), token_mean.mean(0), ratio.mean(0)


class LossWeights(View):
    """The SFT model and trained policies (a configuration of ``runs`` each): per response length,
    the share of sampled responses, and of the loss's weight under a token mean and a response mean."""

    def __init__(self, runs, configs, batch=64, seed=0):
        self.runs, self.configs, self.batch, self.seed = runs, dict(configs), batch, seed

    def _prepare(self):
        trained = self.runs.run_all(list(self.configs.values()))
        policies = {"SFT model": self.runs.sft, **{k: policy for k, (policy, _) in zip(self.configs, trained)}}
        prompts, _ = make_batch(N_BATCHES * self.batch, random.Random(self.seed))
        gen = torch.Generator().manual_seed(self.seed)
        self.rows = {}
        for label, policy in policies.items():
            mask = sample(policy, prompts, generator=gen)["mask"].view(N_BATCHES, self.batch, -1)
            self.rows[label] = length_weights(mask)

    def table(self):
        head = f"{'':<18}{'':<46}" + "".join(f"{f'L = {L}':>8}" for L in range(1, MAX_NEW + 1))
        lines = [f"per response length L (tokens, <eos> included), over {N_BATCHES} batches of {self.batch}", head]
        names = ("share of the responses (= of a response mean)", "share of a token mean",
                 "one token: response mean / token mean")
        for label, shares in self.rows.items():
            for k, (name, share) in enumerate(zip(names, shares)):
                lines.append(f"{label if k == 0 else '':<18}{name:<46}" + "".join(f"{x:8.2f}" for x in share.tolist()))
        return "\n".join(lines)

    def display(self):
        print(self.table())


__all__ = ["length_weights", "LossWeights"]
