"""course_utils.twotoken: Lab 11's enumerable two-token policy and reward table."""

import numpy as np
import pytest
import torch

from course_utils.tinylm import BOS, EOS, PAD, PLUS, TinyLM, encode_prompts, load_sft
from course_utils.twotoken import (V, joint, response_text, two_token_logits,
                                   two_token_policy, two_token_rewards)


@pytest.fixture(scope="module")
def logits():
    return two_token_logits(load_sft(), "7+5=")


def test_logits_shapes_and_forbidden_tokens(logits):
    z1, z2 = logits.first, logits.second
    assert z1.shape == (V,) and z2.shape == (V, V) and z1.dtype == np.float64
    assert np.isneginf(z1[[BOS, PAD]]).all() and np.isneginf(z2[:, [BOS, PAD]]).all()
    assert np.isfinite(np.delete(z1, [BOS, PAD])).all()


def test_logits_match_the_model(logits):
    model = load_sft()
    ids, _ = encode_prompts(["7+5="])
    with torch.no_grad():
        first = model(ids)[0, -1].double().numpy()
        after_one = model(torch.cat([ids, torch.tensor([[1]])], 1))[0, -1].double().numpy()
    keep = [v for v in range(V) if v not in (BOS, PAD)]
    np.testing.assert_allclose(logits.first[keep], first[keep], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(logits.second[1, keep], after_one[keep], rtol=1e-5, atol=1e-5)


def test_logits_come_from_a_tinylm_only(logits):
    """No tempered softmax of arbitrary logits (that is Lab 11's Task 2): the policy takes the toy
    LM's own logits, and those come from a TinyLM, not from a stand-in that returns made-up logits."""
    with pytest.raises(TypeError, match="two_token_logits"):
        two_token_policy((np.zeros(V), np.zeros((V, V))), 0.5)
    with pytest.raises(TypeError, match="TinyLM"):
        two_token_logits(lambda ids: torch.zeros(*ids.shape, V), "7+5=")
    logits.first[:] = 0.0                                           # a copy: the table stays the model's
    assert np.isneginf(logits.first[BOS])

    class Overridden(TinyLM):                                       # a TinyLM that hands in other logits
        def forward(self, ids, *args, **kwargs):
            return torch.zeros(*ids.shape, V)

    fake = Overridden()
    fake.load_state_dict(load_sft().state_dict())
    np.testing.assert_array_equal(two_token_logits(fake, "7+5=").first, logits.first)   # its weights count


@pytest.mark.parametrize("temperature", [0.3, 1.0, 2.5])
def test_policy_sums_to_one(logits, temperature):
    first, second = two_token_policy(logits, temperature)
    assert first.shape == (V,) and second.shape == (V, V)
    assert first.sum() == pytest.approx(1.0) and np.allclose(second.sum(1), 1.0)
    assert joint(first, second).shape == (V, V) and joint(first, second).sum() == pytest.approx(1.0)
    assert (first[[BOS, PAD]] == 0).all() and (second[:, BOS] == 0).all()
    assert (second[np.arange(V) != EOS][:, PAD] == 0).all()     # PAD only after EOS


def test_eos_row_ends_on_pad(logits):
    _, second = two_token_policy(logits, 1.0)
    expected = np.zeros(V)
    expected[PAD] = 1.0
    assert np.array_equal(second[EOS], expected)


def test_temperature_zero_is_one_hot(logits):
    first, second = two_token_policy(logits, 0)
    assert set(first.tolist()) == {0.0, 1.0} and first.sum() == 1
    assert first.argmax() == np.argmax(logits.first)
    assert ((second == 0) | (second == 1)).all() and (second.sum(1) == 1).all()
    rows = [i for i in range(V) if i != EOS]
    assert (second[rows].argmax(1) == np.argmax(logits.second[rows], axis=1)).all()


def test_low_temperature_approaches_greedy(logits):
    cold, _ = two_token_policy(logits, 0.01)
    greedy, _ = two_token_policy(logits, 0)
    assert np.abs(cold - greedy).max() < 1e-3


def test_rewards_one_digit_answer():
    r = two_token_rewards("3+4=")
    assert r.shape == (V, V)
    assert r[7, EOS] == 1 and (r == 1).sum() == 1
    assert r[8, EOS] == 0 and r[7, 7] == 0 and r[1, 2] == 0          # wrong well-formed numbers
    assert r[0, 7] == -1                                             # "07" is not a number
    assert (r[EOS] == -1).all()                                      # blank
    assert (r[PLUS] == -1).all() and r[7, PLUS] == -1 and r[7, PAD] == -1


def test_rewards_two_digit_answer():
    r = two_token_rewards("7+5=")
    assert r[1, 2] == 1 and (r == 1).sum() == 1
    assert r[1, EOS] == 0 and r[2, EOS] == 0 and r[2, 1] == 0
    assert (r[EOS] == -1).all() and r[1, BOS] == -1
    assert set(np.unique(r).tolist()) == {-1.0, 0.0, 1.0}


def test_rewards_zero_answer():
    r = two_token_rewards("0+0=")
    assert r[0, EOS] == 1 and (r == 1).sum() == 1


def test_rewards_reject_malformed_prompt():
    with pytest.raises(ValueError, match="malformed prompt"):
        two_token_rewards("12+3=")


def test_response_text():
    assert response_text(7, EOS) == "7<eos>" and response_text(1, 2) == "12"
    assert response_text(EOS, PAD) == "<eos>"
