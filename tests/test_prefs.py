"""course_utils.prefs: the hidden labeler, ranked data, the reward model, the critic, masked ops."""

import copy
import math
import random

import pytest
import torch

from course_utils.prefs import (KAPPA, DigitRM, ValueModel, digit_counts, gold_score, masked_mean,
                                masked_whiten, ranked_data, sft_loss)
from course_utils.tinylm import EOS, MAX_NEW, PLUS, EQUALS, TinyLM, encode_prompts, load_sft, sample
from tests.rollouts import rollout


@pytest.fixture(scope="module")
def sft():
    return load_sft()



# ----------------------------------------------------------------------------- the hidden labeler
GOLD_CASES = [
    # prompt, response tokens, gold
    ("3+4=", [7, EOS], 1.0),               # right, one digit
    ("7+5=", [1, 2, EOS], 1.0),            # right, two digits
    ("0+0=", [0, EOS], 1.0),               # right, zero
    ("9+9=", [1, 8, EOS], 1.0),            # right, largest sum
    ("3+4=", [8, EOS], 0.0),               # wrong one-digit number
    ("7+5=", [1, 3, EOS], 0.0),            # wrong two-digit number
    ("7+5=", [2, EOS], 0.0),               # wrong: the last digit only
    ("3+4=", [7, 7, EOS], 0.0),            # wrong two-digit number
    ("7+5=", [1, 2, 2, EOS], -1.0),        # three digits
    ("7+5=", [1, 0, 0, EOS], -1.0),        # three digits
    ("7+5=", [1, 2, 1, 2], -1.0),          # no EOS (ran out of tokens)
    ("3+4=", [7, 7, 7, 7], -1.0),          # the hack: four digits, no EOS
    ("3+4=", [EOS], -1.0),                 # blank
    ("3+4=", [PLUS, EOS], -1.0),           # non-digit
    ("3+4=", [7, EQUALS, EOS], -1.0),      # digit then non-digit
    ("3+4=", [EQUALS, 7, EOS], -1.0),      # non-digit then digit
    ("7+5=", [1, PLUS, 2, EOS], -1.0),     # non-digit between digits
]


@pytest.mark.parametrize("prompt,resp,gold", GOLD_CASES)
def test_gold_score_hand_made(prompt, resp, gold):
    assert gold_score(rollout([prompt], [resp])).tolist() == [gold]


def test_gold_score_batch_shape_and_dtype():
    prompts, resps, golds = zip(*GOLD_CASES)
    g = gold_score(rollout(list(prompts), list(resps)))
    assert g.shape == (len(GOLD_CASES),) and g.dtype == torch.float32
    assert g.tolist() == list(golds)


def test_gold_score_of_short_rollouts(sft):
    """A rollout sampled with max_new < 4 is scored as if padded: a 2-token answer without EOS is malformed."""
    out = rollout(["7+5="], [[1, 2, EOS]])
    short = {"ids": out["ids"][:, :7], "prompt_len": 5, "mask": out["mask"][:, :2]}
    assert gold_score(short).tolist() == [-1.0]
    out = sample(sft, ["1+1="] * 8, max_new=2, generator=torch.Generator().manual_seed(0))
    assert gold_score(out).shape == (8,)


def test_digit_counts_hand_made():
    out = rollout(["7+5=", "3+4=", "1+1=", "5+5=", "9+9="],
                  [[1, 2, EOS], [7, 7, 7, 7], [EOS], [PLUS, EOS], [1, 0, 0, EOS]])
    c = digit_counts(out)
    assert c.shape == (5, 10) and c.dtype == torch.float32
    expected = torch.zeros(5, 10)
    expected[0, 1] = expected[0, 2] = 1
    expected[1, 7] = 4
    expected[4, 1], expected[4, 0] = 1, 2
    assert torch.equal(c, expected)


def test_digit_counts_only_real_tokens():
    out = rollout(["7+5="], [[1, 2, EOS]])
    out["ids"][0, -1] = 3                       # a digit where the mask is 0 is not counted
    assert digit_counts(out)[0, 3] == 0 and digit_counts(out).sum() == 2


# ----------------------------------------------------------------------------- ranked data
@pytest.fixture(scope="module")
def ranked(sft):
    return ranked_data(sft, 3000, k=4, seed=11)


def test_ranked_data_structure(ranked):
    assert len(ranked) == 3000
    d = ranked[0]
    assert set(d) == {"prompt", "out", "gold", "ranking"}
    for d in ranked[:200]:
        assert d["out"]["ids"].shape == (4, 9) and d["out"]["mask"].shape == (4, 4)
        assert d["out"]["prompt_len"] == 5
        assert sorted(d["ranking"]) == [0, 1, 2, 3]
        assert torch.equal(d["gold"], gold_score(d["out"]))
        assert (d["out"]["ids"][:, :5] == encode_prompts([d["prompt"]])[0]).all()


def test_ranked_data_is_reproducible(sft):
    a, b = ranked_data(sft, 20, seed=3), ranked_data(sft, 20, seed=3)
    c = ranked_data(sft, 20, seed=4)
    assert [d["ranking"] for d in a] == [d["ranking"] for d in b]
    assert all(torch.equal(x["out"]["ids"], y["out"]["ids"]) for x, y in zip(a, b))
    assert [d["prompt"] for d in a] != [d["prompt"] for d in c]


def pair_wins(data):
    """{gold difference: (times the better one was ranked above, pairs)} over all pairs of a prompt."""
    stats = {}
    for d in data:
        pos = {r: i for i, r in enumerate(d["ranking"])}
        g = d["gold"].tolist()
        for i in range(4):
            for j in range(i + 1, 4):
                if g[i] < g[j] or (g[i] == g[j] and i > j):
                    continue
                w, l = i, j                                 # w has the higher (or equal) gold
                diff = g[w] - g[l]
                won, n = stats.get(diff, (0, 0))
                stats[diff] = (won + (pos[w] < pos[l]), n + 1)
    return stats


def test_plackett_luce_pairwise_probabilities(ranked):
    """P(w ranked above l) = sigmoid(KAPPA * (gold_w - gold_l)), within 4 standard errors."""
    stats = pair_wins(ranked)
    assert {0.0, 1.0, 2.0} <= set(stats)
    for diff, (won, n) in stats.items():
        p = 1 / (1 + math.exp(-KAPPA * diff))
        se = math.sqrt(p * (1 - p) / n)
        assert n > 200, (diff, n)
        assert abs(won / n - p) < 4 * se + 1e-9, f"gold diff {diff}: {won / n:.3f} vs {p:.3f} (n={n})"


def test_plackett_luce_with_a_confident_labeler(sft):
    stats = pair_wins(ranked_data(sft, 1000, k=4, seed=5, kappa=3.0))
    won, n = stats[2.0]
    p = 1 / (1 + math.exp(-6.0))
    assert abs(won / n - p) < 4 * math.sqrt(p * (1 - p) / n) + 2 / n


# ----------------------------------------------------------------------------- reward model
def test_digit_rm_shapes():
    rm = DigitRM()
    assert rm.w.shape == (10,) and torch.equal(rm.w.detach(), torch.zeros(10))
    with torch.no_grad():
        rm.w.copy_(torch.arange(10.0))
    counts = torch.zeros(3, 10)
    counts[0, 7] = 4
    counts[1, 1] = counts[1, 2] = 1
    assert rm(counts).shape == (3,)
    assert rm(counts).tolist() == [28.0, 3.0, 0.0]
    rm(counts).sum().backward()
    assert torch.equal(rm.w.grad, counts.sum(0))


def test_gold_order_agreement_counts_only_pairs_with_a_gold_winner():
    from course_utils.evaluation import gold_order_agreement

    rm = DigitRM()
    with torch.no_grad():
        rm.w[7] = 1.0                                  # a score = how many 7s
    cw, cl = torch.zeros(4, 10), torch.zeros(4, 10)
    cw[:, 7], cl[:, 7] = torch.tensor([2.0, 0.0, 1.0, 3.0]), torch.tensor([1.0, 1.0, 1.0, 0.0])
    gw, gl = torch.tensor([1.0, 1.0, 0.0, 0.0]), torch.tensor([0.0, -1.0, -1.0, 0.0])
    # right, wrong, a tie (1/2); the last pair has no gold winner and does not count
    assert gold_order_agreement(rm, cw, cl, gw, gl) == (pytest.approx(0.5), 0.75)
    with torch.no_grad():
        rm.w[7] = -1.0                                 # the opposite order
    assert gold_order_agreement(rm, cw[:1], cl[:1], gw[:1], gl[:1]) == (0.0, 1.0)


# ----------------------------------------------------------------------------- critic
def test_value_model_trains_when_the_sft_model_is_frozen(sft):
    frozen = copy.deepcopy(sft).requires_grad_(False)
    before = {k: v.clone() for k, v in frozen.state_dict().items()}
    critic = ValueModel(frozen)
    assert all(p.requires_grad for p in critic.parameters())
    out = sample(frozen, ["3+4=", "7+5=", "1+1="] * 4, generator=torch.Generator().manual_seed(0))
    opt = torch.optim.Adam(critic.parameters(), lr=1e-2)
    target = torch.ones_like(out["mask"]) * out["mask"]
    losses = []
    for _ in range(20):
        loss = ((critic(out) - target) ** 2).sum() / out["mask"].sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert any(not torch.equal(p, before[k]) for k, p in critic.body.state_dict().items())
    assert all(torch.equal(v, before[k]) for k, v in frozen.state_dict().items())   # SFT untouched
    assert not any(p.requires_grad for p in frozen.parameters())


def test_value_model_shape_and_zero_at_padding(sft):
    critic = ValueModel(sft)
    with torch.no_grad():
        critic.head.bias.fill_(1.0)
        critic.head.weight.normal_()
    out = rollout(["3+4=", "7+5=", "1+1=", "2+2="], [[7, EOS], [1, 2, EOS], [EOS], [7, 7, 7, 7]])
    v = critic(out)
    assert v.shape == (4, MAX_NEW)
    assert (v[out["mask"] == 0] == 0).all() and (v[out["mask"] > 0] != 0).all()


def test_value_model_reads_the_state_before_each_token(sft):
    """values[:, t] depends on tokens before response token t only (the state in which it was chosen)."""
    critic = ValueModel(sft)
    with torch.no_grad():
        critic.head.weight.normal_()
    a = rollout(["7+5="], [[1, 2, 3, 4]])
    b = rollout(["7+5="], [[1, 2, 3, 9]])
    va, vb = critic(a), critic(b)
    assert torch.equal(va, vb)                               # the last token changes no value
    c = rollout(["7+5="], [[5, 2, 3, 4]])
    vc = critic(c)
    assert va[0, 0] == vc[0, 0] and va[0, 1] != vc[0, 1]


# ----------------------------------------------------------------------------- masked statistics
def test_masked_mean_is_the_seeds_token_mean():
    x = torch.tensor([[1.0, 2.0, 7.0], [3.0, -5.0, 9.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    m = masked_mean(x, mask)
    assert m.item() == pytest.approx(2.0)                    # (1 + 2 + 3) / 3: padding does not count
    m.backward()
    assert (x.grad[mask == 0] == 0).all() and torch.allclose(x.grad[mask > 0], torch.full((3,), 1 / 3))
    assert masked_mean(x.detach(), mask.bool()).item() == pytest.approx(2.0)
    assert masked_mean(x.detach(), torch.zeros(2, 3)).item() == 0.0      # no real token: 0, not nan


def test_masked_mean_is_no_nan_safe_masked_sum():
    """sum(x * mask) / sum(mask), as the seed defines it: nan at padding stays nan (the nan-safe masked
    sum is Lab 11's Task 1b, which the package must not do)."""
    x = torch.tensor([[1.0, float("nan")]])
    assert torch.isnan(masked_mean(x, torch.tensor([[1.0, 0.0]])))


def test_masked_whiten_ignores_padding_and_rezeros_it():
    torch.manual_seed(0)
    x = torch.randn(6, 4) * 3 + 5
    mask = torch.tensor([[1.0] * n + [0.0] * (4 - n) for n in [1, 2, 3, 4, 4, 2]])
    x_nan = torch.where(mask > 0, x, torch.full_like(x, float("nan")))
    w = masked_whiten(x_nan, mask)
    assert torch.isfinite(w).all() and (w[mask == 0] == 0).all()
    real = w[mask > 0]
    assert real.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert (real ** 2).mean().item() == pytest.approx(1.0, abs=1e-4)   # population variance
    # the padding's values do not matter
    x_big = torch.where(mask > 0, x, torch.full_like(x, 1e6))
    torch.testing.assert_close(masked_whiten(x_big, mask), w)


# ----------------------------------------------------------------------------- PPO-ptx
def test_sft_loss_decreases_on_clean_data():
    torch.manual_seed(0)
    model = TinyLM()
    rng = random.Random(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(60):
        loss = sft_loss(model, 64, rng)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert sum(losses[-5:]) / 5 < 0.6 * sum(losses[:5]) / 5


def test_sft_loss_is_reproducible_and_clean(sft):
    a = sft_loss(sft, 32, random.Random(1))
    b = sft_loss(sft, 32, random.Random(1))
    assert a.ndim == 0 and torch.equal(a, b) and a.requires_grad
    # the demonstrations are correct answers: the SFT model (which learned to add) has a small loss
    assert a.item() < 1.0
