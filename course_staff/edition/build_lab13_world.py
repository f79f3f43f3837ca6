"""Write Lab 13's starting world as data: course_utils/data/lab13_world.pt (``make lab13-data``).

    python -m course_staff.edition.build_lab13_world

Lab 13 starts where Lab 12 ends: the shipped SFT model, the labeler's rankings, the reward model fit
to them and its offset. Students must get these without Lab 12's solutions in the package, so this
staff script runs Lab 12's reference (``course_staff.solutions.load_lab``: ``train_reward_model``,
``ranking_to_pairs``) on Lab 12's notebook world (``course_utils.world.make_world``, seed 0) and saves
the results as tensors only; ``course_utils.lab13_world.load_world`` reads them back.

Saved (deterministic: the same file on every run of one machine; another CPU may differ in the
reward model's last bits):

    rm_w            (10,) float32   the reward model's digit weights (DigitRM.w)
    rm_offset       ()    float32   the mean RM score of SFT samples
    train / held    for the 2000 ranked prompts of the reward model's training set and the 2000
                    held-out ones: ids (4 P, 9) uint8 (each prompt's K = 4 responses, one row each),
                    rankings (P, 4) uint8 (row indices within the prompt, best first),
                    pairs (N, 2) int16 (rows of ids: chosen, rejected; every pair of each ranking,
                    pairs of two identical responses left out: their DPO margin is always 0)
"""

import sys

import torch

from course_staff.solutions import load_lab
from course_utils import world as lab12_world
from course_utils.lab13_world import WORLD_PATH
from course_utils.tinylm import PAD


def _part(data, to_pairs):
    """ids, rankings and pairs of one ranked_data list."""
    k = data[0]["out"]["ids"].shape[0]
    ids = torch.cat([d["out"]["ids"] for d in data])
    pairs = [(i * k + w, i * k + l) for i, d in enumerate(data) for w, l in to_pairs(d["ranking"])]
    pairs = torch.tensor(pairs)
    keep = (ids[pairs[:, 0]] != ids[pairs[:, 1]]).any(1)
    rankings = torch.tensor([d["ranking"] for d in data])
    assert ids.max() <= PAD and len(ids) < 2 ** 15
    return {"ids": ids.to(torch.uint8), "rankings": rankings.to(torch.uint8), "pairs": pairs[keep].to(torch.int16)}


def build():
    """The world's tensors, from Lab 12's reference solution and its notebook world (seed 0)."""
    lab12 = load_lab("lab12")
    state = torch.random.get_rng_state()
    w = lab12_world.make_world(lab12["train_reward_model"], seed=0)
    torch.random.set_rng_state(state)
    to_pairs = lab12["ranking_to_pairs"]
    return {"rm_w": w.rm.w.detach().clone(), "rm_offset": torch.tensor(float(w.rm_offset)),
            "train": _part(w.train_data, to_pairs), "held": _part(w.held_out, to_pairs)}


def main():
    data = build()
    torch.save(data, WORLD_PATH)
    n = {part: len(data[part]["pairs"]) for part in ("train", "held")}
    print(f"{WORLD_PATH}: rm_offset {float(data['rm_offset']):.6f}, {n['train']} training pairs, {n['held']} held-out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
