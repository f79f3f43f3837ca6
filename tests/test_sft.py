"""The shipped SFT checkpoint: good enough to add, bad enough to leave RLHF room; rebuildable."""

import json
import random

import pytest
import torch

from course_staff.edition.build_sft import checkpoint_digest, record_path, train_sft
from course_utils.prefs import gold_score
from course_utils.tinylm import decode_responses, load_sft, make_batch, sample
from tests.rollouts import greedy

ALL_PROMPTS = [f"{a}+{b}=" for a in range(10) for b in range(10)]


@pytest.fixture(scope="module")
def sft():
    return load_sft()


@pytest.mark.parametrize("seed", [0, 1])
def test_sft_adds_well_but_not_perfectly(sft, seed):
    """On 256 fresh prompts, sampled (not greedy): exact accuracy in (0.5, 0.9), some malformed."""
    prompts, answers = make_batch(256, random.Random(10_000 + seed))
    out = sample(sft, prompts, generator=torch.Generator().manual_seed(seed))
    acc = sum(r == a for r, a in zip(decode_responses(out), answers)) / len(answers)
    malformed = (gold_score(out) < 0).float().mean().item()
    assert 0.5 < acc < 0.9, f"sampled accuracy {acc:.3f}"
    assert malformed > 0, "no malformed responses: RLHF would have nothing to hurt"
    assert gold_score(out).mean().item() == pytest.approx(acc - malformed, abs=1e-6)


def test_greedy_sft_is_mostly_right(sft):
    out = greedy(sft, ALL_PROMPTS)
    answers = [str(int(p[0]) + int(p[2])) for p in ALL_PROMPTS]
    assert sum(r == a for r, a in zip(decode_responses(out), answers)) >= 70


@pytest.mark.slow   # trains the SFT model (800 Adam steps)
def test_rebuilt_checkpoint_matches_the_shipped_one(sft):
    rebuilt = train_sft(seed=0)
    assert torch.equal(greedy(rebuilt, ALL_PROMPTS)["ids"],
                       greedy(sft, ALL_PROMPTS)["ids"])
    with torch.no_grad():
        for step in range(4):               # logits on the prompt and on the greedy continuations
            seq = greedy(sft, ALL_PROMPTS)["ids"][:, :5 + step]
            torch.testing.assert_close(rebuilt(seq), sft(seq), atol=1e-3, rtol=1e-3)


def test_the_checkpoint_records_how_and_where_it_was_made():
    record = json.loads(record_path().read_text())
    assert record["sha256"] == checkpoint_digest(), \
        "sft.json describes another checkpoint than sft.pt: rebuild both with `make sft`"
    assert {"processor", "capability", "threads", "torch"} <= set(record["made on"])
