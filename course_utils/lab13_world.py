"""Lab 13's world, loaded from data: where Lab 12 ended, without Lab 12's code.

    from course_utils.lab13_world import load_world
    world = load_world()
    world.sft                      TinyLM, Lab 12's SFT model: DPO's and GRPO's start and reference
    world.rm, world.rm_offset      Lab 12's reward model (DigitRM) fit to the rankings, and its offset
    world.score(out)               (B,) rm(digit_counts(out)) - rm_offset of a rollout: SFT answers ~ 0
    world.train_pairs              the preference pairs of the rankings the reward model was fit on:
                                   {"chosen": rollout, "rejected": rollout}, N pairs each (ids (N, 9),
                                   prompt_len 5, mask (N, 4)), and "rows" (N, 2): the rows of the two
                                   responses in train_rankings["out"]
    world.held_pairs               the same for the 2000 held-out prompts
    world.train_rankings           {"out": rollout of 4 P responses, "rankings": (P, 4) long, best first}
    world.held_rankings            the same, held out
    world.ppo_curves               Lab 12's reference PPO runs (course_utils.views.lab12.load_reference_curves)

The tensors come from course_utils/data/lab13_world.pt, which staff write with Lab 12's reference
solution (``make lab13-data``); nothing here fits a reward model or turns a ranking into pairs.
"""

from dataclasses import dataclass
from pathlib import Path

import torch

from course_utils.reward_model import DigitRM, digit_counts
from course_utils.tinylm import EOS, MAX_NEW, PROMPT_LEN, load_sft

WORLD_PATH = Path(__file__).with_name("data") / "lab13_world.pt"


def _rollout(ids):
    """A rollout dict of token ids (N, 9): mask 1 up to and including each response's EOS."""
    ids = ids.long()
    resp = ids[:, PROMPT_LEN:]
    ended_before = torch.cumsum((resp == EOS).long(), dim=1) - (resp == EOS).long()   # EOS strictly earlier
    return {"ids": ids, "prompt_len": PROMPT_LEN, "mask": (ended_before == 0).float()}


def _rows(out, index):
    return {"ids": out["ids"][index], "prompt_len": out["prompt_len"], "mask": out["mask"][index]}


@dataclass
class World:
    """Lab 12's end state (see the module docstring)."""
    sft: object
    rm: DigitRM
    rm_offset: float
    train_pairs: dict
    held_pairs: dict
    train_rankings: dict
    held_rankings: dict
    ppo_curves: dict

    @torch.no_grad()
    def score(self, out):
        """The reward model's score of each response of a rollout, minus the offset: (B,) float."""
        return self.rm(digit_counts(out)) - self.rm_offset


def _part(raw):
    out = _rollout(raw["ids"])
    assert out["mask"].shape[1] == MAX_NEW
    pairs = raw["pairs"].long()
    return ({"chosen": _rows(out, pairs[:, 0]), "rejected": _rows(out, pairs[:, 1]), "rows": pairs},
            {"out": out, "rankings": raw["rankings"].long()})


def load_world(path=WORLD_PATH):
    """Lab 13's world: Lab 12's SFT model, reward model, offset, preference pairs and PPO curves."""
    from course_utils.views.lab12 import load_reference_curves

    raw = torch.load(path, weights_only=True)
    rm = DigitRM()
    with torch.no_grad():
        rm.w.copy_(raw["rm_w"])
    rm.requires_grad_(False)
    train_pairs, train_rankings = _part(raw["train"])
    held_pairs, held_rankings = _part(raw["held"])
    return World(load_sft(), rm, float(raw["rm_offset"]), train_pairs, held_pairs, train_rankings, held_rankings,
                 load_reference_curves())


__all__ = ["WORLD_PATH", "World", "load_world"]
