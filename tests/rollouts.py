"""Hand-made rollouts for the unit tests of course_utils."""

import torch

from course_utils.tinylm import BOS, EOS, MAX_NEW, PAD, encode_prompts


def rollout(prompts, responses):
    """A rollout dict from prompts and responses given as lists of token ids (padded with PAD to MAX_NEW)."""
    ids, L = encode_prompts(prompts)
    resp = torch.tensor([r + [PAD] * (MAX_NEW - len(r)) for r in responses])
    mask = torch.tensor([[1.0] * len(r) + [0.0] * (MAX_NEW - len(r)) for r in responses])
    return {"ids": torch.cat([ids, resp], dim=1), "prompt_len": L, "mask": mask}


@torch.no_grad()
def greedy(model, prompts):
    """The greedy (argmax, BOS and PAD forbidden) response to each prompt, as a rollout dict: the
    tests' own decoder (the package samples at temperature 1 only)."""
    ids, L = encode_prompts(prompts)
    done = torch.zeros(len(prompts), dtype=torch.bool)
    mask = torch.zeros(len(prompts), MAX_NEW)
    for t in range(MAX_NEW):
        logits = model(ids)[:, -1].clone()
        logits[:, [BOS, PAD]] = float("-inf")
        nxt = torch.where(done, PAD, logits.argmax(-1))
        mask[:, t] = (~done).float()
        ids = torch.cat([ids, nxt[:, None]], dim=1)
        done |= nxt == EOS
    return {"ids": ids, "prompt_len": L, "mask": mask}
