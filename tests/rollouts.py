"""Hand-made rollouts for the unit tests of course_utils."""

import torch

from course_utils.tinylm import MAX_NEW, PAD, encode_prompts


def rollout(prompts, responses):
    """A rollout dict from prompts and responses given as lists of token ids (padded with PAD to MAX_NEW)."""
    ids, L = encode_prompts(prompts)
    resp = torch.tensor([r + [PAD] * (MAX_NEW - len(r)) for r in responses])
    mask = torch.tensor([[1.0] * len(r) + [0.0] * (MAX_NEW - len(r)) for r in responses])
    return {"ids": torch.cat([ids, resp], dim=1), "prompt_len": L, "mask": mask}
