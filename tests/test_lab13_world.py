"""Lab 13's world (course_utils/data/lab13_world.pt, read by course_utils.lab13_world) is Lab 12's end state.

Fast checks read the shipped data only: its reward model and offset are those the shipped Lab 12
reference curves were made with, and every preference pair is a (better, worse) pair of one prompt's
ranking. The slow check rebuilds the file from Lab 12's reference solution (course_staff.edition.
build_lab13_world, what `make lab13-data` runs) and compares.
"""

import pytest
import torch

from course_utils.lab13_world import load_world


@pytest.fixture(scope="module")
def world():
    return load_world()


def test_the_reward_model_is_the_one_of_lab12s_reference_curves(world):
    meta = world.ppo_curves["meta"]
    assert world.rm.w.tolist() == pytest.approx(meta["rm_weights"], abs=1e-6)
    assert world.rm_offset == pytest.approx(meta["rm_offset"], abs=1e-6)
    assert not world.rm.w.requires_grad


def pair_order_problems(pairs, rankings, k=4):
    """What is wrong with ``pairs`` as pairs of ``rankings`` ([] if nothing): each pair's responses are the
    rows "rows" of rankings["out"], two different responses to one prompt, the chosen ranked above."""
    out, rows = rankings["out"], pairs["rows"]
    problems = []
    for side, column in (("chosen", 0), ("rejected", 1)):
        if not torch.equal(pairs[side]["ids"], out["ids"][rows[:, column]]):
            problems.append(f"the {side} responses are not the rows they name")
    w, l = rows[:, 0], rows[:, 1]
    position = torch.argsort(rankings["rankings"], dim=1)          # [prompt, response] -> its place in the ranking
    for n in torch.nonzero(w // k != l // k).flatten().tolist():
        problems.append(f"pair {n}: two prompts")
    same = w // k == l // k
    below = position[w // k, w % k] > position[l // k, l % k]
    for n in torch.nonzero(same & below).flatten().tolist():
        problems.append(f"pair {n}: the chosen response is not ranked above the rejected one")
    for n in torch.nonzero((out["ids"][w] == out["ids"][l]).all(1)).flatten().tolist():
        problems.append(f"pair {n}: two identical responses")
    return problems


def test_every_pair_is_a_better_worse_pair_of_one_ranking(world):
    for pairs, rankings in ((world.train_pairs, world.train_rankings), (world.held_pairs, world.held_rankings)):
        n = pairs["chosen"]["ids"].shape[0]
        assert n > 4000 and pairs["rejected"]["ids"].shape[0] == n
        assert pair_order_problems(pairs, rankings) == []
        # the masks are those of sample: 1 up to and including <eos>
        for side in ("chosen", "rejected"):
            mask = pairs[side]["mask"]
            assert ((mask[:, 1:] <= mask[:, :-1]).all() and (mask[:, 0] == 1).all())


def test_the_pair_check_sees_a_swapped_pair(world):
    """The negative control: one pair turned round is found."""
    pairs = dict(world.train_pairs)
    pairs["rows"] = pairs["rows"].clone()
    pairs["rows"][7] = pairs["rows"][7].flip(0)
    found = pair_order_problems(pairs, world.train_rankings)
    assert "pair 7: the chosen response is not ranked above the rejected one" in found


def test_score_is_the_reward_model_minus_its_offset(world):
    out = world.train_rankings["out"]
    scores = world.score({"ids": out["ids"][:40], "prompt_len": 5, "mask": out["mask"][:40]})
    assert scores.shape == (40,) and not scores.requires_grad
    sft_mean = world.score(out).mean().item()
    assert abs(sft_mean) < 0.05            # SFT answers score about 0 (the offset is their mean score)


@pytest.mark.slow
def test_the_shipped_file_is_what_lab12s_reference_builds():
    from course_staff.edition.build_lab13_world import build
    from course_utils.lab13_world import WORLD_PATH

    shipped, built = torch.load(WORLD_PATH, weights_only=True), build()
    assert torch.allclose(shipped["rm_w"], built["rm_w"], atol=1e-5)
    assert abs(float(shipped["rm_offset"]) - float(built["rm_offset"])) < 1e-5
    for part in ("train", "held"):
        for key in ("ids", "rankings", "pairs"):
            assert torch.equal(shipped[part][key], built[part][key]), f"{part}/{key} changed: run make lab13-data"
