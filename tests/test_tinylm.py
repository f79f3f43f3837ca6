"""course_utils.tinylm: shapes, masks, sampling rules, determinism, log-probs, decoding, errors."""

import random

import pytest
import torch

from course_utils.tinylm import (BOS, DIGITS, EOS, MAX_LEN, MAX_NEW, N_DIGITS, NEVER_SAMPLED, PAD, PLUS, EQUALS,
                                 PROMPT_LEN, RESPONSE_TOKENS, TOKENS, VOCAB_SIZE, TinyLM, answer_tokens, decode_responses, encode_prompts,
                                 load_sft, make_batch, sample, sequence_logprobs, supervised_loss)
from tests.rollouts import rollout

ALL_PROMPTS = [f"{a}+{b}=" for a in range(10) for b in range(10)]


@pytest.fixture(scope="module")
def sft():
    return load_sft()


@pytest.fixture(scope="module")
def untrained():
    torch.manual_seed(0)
    return TinyLM()



# ----------------------------------------------------------------------------- shapes
def test_vocabulary():
    assert VOCAB_SIZE == 15 and (PLUS, EQUALS, BOS, EOS, PAD) == (10, 11, 12, 13, 14)
    assert PROMPT_LEN == 5 and MAX_NEW == 4 and MAX_LEN == 9


def test_encode_prompts():
    ids, L = encode_prompts(["3+4=", "9+0="])
    assert L == 5 and ids.dtype == torch.long
    assert ids.tolist() == [[BOS, 3, PLUS, 4, EQUALS], [BOS, 9, PLUS, 0, EQUALS]]


def test_make_batch_is_reproducible():
    p1, a1 = make_batch(50, random.Random(3))
    p2, a2 = make_batch(50, random.Random(3))
    assert (p1, a1) == (p2, a2) and len(p1) == 50
    assert all(str(int(p[0]) + int(p[2])) == a for p, a in zip(p1, a1))


def test_model_shapes(untrained):
    ids = torch.randint(0, VOCAB_SIZE, (3, 7))
    assert untrained(ids).shape == (3, 7, VOCAB_SIZE)
    assert untrained.hidden(ids).shape == (3, 7, 32)
    assert sum(p.numel() for p in untrained.parameters()) < 20_000


def test_model_is_causal(untrained):
    ids = torch.randint(0, 10, (2, MAX_LEN))
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 10
    with torch.no_grad():
        assert torch.equal(untrained(ids)[:, :-1], untrained(changed)[:, :-1])


def test_sample_shapes(sft):
    out = sample(sft, ["1+2=", "7+5=", "0+0="], generator=torch.Generator().manual_seed(0))
    assert out["ids"].shape == (3, PROMPT_LEN + MAX_NEW) and out["ids"].dtype == torch.long
    assert out["prompt_len"] == PROMPT_LEN and out["mask"].shape == (3, MAX_NEW)
    assert out["mask"].dtype == torch.float32
    assert torch.equal(out["ids"][:, :PROMPT_LEN], encode_prompts(["1+2=", "7+5=", "0+0="])[0])
    short = sample(sft, ["1+2="], max_new=2, generator=torch.Generator().manual_seed(0))
    assert short["ids"].shape == (1, PROMPT_LEN + 2) and short["mask"].shape == (1, 2)


def test_answer_tokens():
    ids, _ = encode_prompts(["3+4=", "7+5=", "0+0=", "9+9="])
    assert answer_tokens(ids).tolist() == [[7, EOS, PAD, PAD], [1, 2, EOS, PAD], [0, EOS, PAD, PAD],
                                           [1, 8, EOS, PAD]]


# ----------------------------------------------------------------------------- masks and sampling rules
def test_mask_and_padding_rules(untrained):
    """Mask 1 up to and including EOS then 0; PAD exactly after EOS; BOS and PAD never sampled."""
    prompts = ALL_PROMPTS * 20
    out = sample(untrained, prompts, generator=torch.Generator().manual_seed(1))
    resp, mask = out["ids"][:, PROMPT_LEN:], out["mask"]
    for row, m in zip(resp.tolist(), mask.tolist()):
        n = int(sum(m))
        assert m == [1.0] * n + [0.0] * (MAX_NEW - n) and n >= 1
        real = row[:n]
        assert BOS not in real and PAD not in real
        assert EOS not in real[:-1]                            # EOS only as the last real token
        if n < MAX_NEW:
            assert real[-1] == EOS and row[n:] == [PAD] * (MAX_NEW - n)
    # the untrained model is far from greedy: every one of the 13 allowed tokens shows up
    assert set(resp[mask > 0].tolist()) == set(range(VOCAB_SIZE)) - {BOS, PAD}


def test_mask_length_is_position_of_eos(sft):
    out = sample(sft, ALL_PROMPTS, generator=torch.Generator().manual_seed(2))
    for row, n in zip(out["ids"][:, PROMPT_LEN:].tolist(), out["mask"].sum(1).long().tolist()):
        assert n == (row.index(EOS) + 1 if EOS in row else MAX_NEW)


def test_sample_draws_from_the_models_distribution(sft):
    """The first token's frequencies over 4000 draws match softmax of the allowed logits (T = 1)."""
    out = sample(sft, ["9+9="] * 4000, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = sft(out["ids"][:1, :PROMPT_LEN])[0, -1]
    logits[[BOS, PAD]] = float("-inf")
    freq = torch.bincount(out["ids"][:, PROMPT_LEN], minlength=VOCAB_SIZE) / 4000
    torch.testing.assert_close(freq, torch.softmax(logits, -1), atol=0.03, rtol=0)


# ----------------------------------------------------------------------------- determinism
def test_sample_is_reproducible_from_a_generator(sft):
    a = sample(sft, ALL_PROMPTS, generator=torch.Generator().manual_seed(7))
    b = sample(sft, ALL_PROMPTS, generator=torch.Generator().manual_seed(7))
    c = sample(sft, ALL_PROMPTS, generator=torch.Generator().manual_seed(8))
    assert torch.equal(a["ids"], b["ids"]) and torch.equal(a["mask"], b["mask"])
    assert not torch.equal(a["ids"], c["ids"])


def test_sample_is_reproducible_from_manual_seed(sft):
    torch.manual_seed(5)
    a = sample(sft, ALL_PROMPTS)
    torch.manual_seed(5)
    b = sample(sft, ALL_PROMPTS)
    assert torch.equal(a["ids"], b["ids"])


def _multinomial_sample(model, prompts, generator=None):
    """What ``sample`` draws, by torch.multinomial: the same cached passes, one token a step."""
    from course_utils.causal_pass import softmax
    from course_utils.tinylm import extending
    ids, L = encode_prompts(prompts)
    forbid = torch.zeros(VOCAB_SIZE)
    forbid[NEVER_SAMPLED] = float("-inf")
    attention, cols, done = [extending([])], [], torch.zeros(len(prompts), dtype=torch.bool)
    with torch.no_grad():
        logits = model(ids, attention=attention, last=1)[:, -1]
        for t in range(MAX_NEW):
            p = softmax(logits + forbid)                          # sample's softmax: the same p
            nxt = torch.multinomial(p, 1, generator=generator).squeeze(1).masked_fill(done, PAD)
            done |= nxt == EOS
            cols.append(nxt)
            logits = model(nxt[:, None], positions=torch.tensor([L + t]), attention=attention)[:, -1]
    return torch.stack(cols, 1)


def test_sample_draws_what_multinomial_draws(sft):
    """sample draws as torch.multinomial does (its own noise, without its checks): the same tokens from
    the same RNG state, with a generator or the global RNG. (Pinned to torch 2.13's multinomial: if a torch
    release draws otherwise, sample still draws from p, but no longer the tokens runs drew before.)"""
    prompts = ALL_PROMPTS * 5
    for seed in range(3):
        got = sample(sft, prompts, generator=torch.Generator().manual_seed(seed))["ids"][:, PROMPT_LEN:]
        assert torch.equal(got, _multinomial_sample(sft, prompts, torch.Generator().manual_seed(seed)))
        torch.manual_seed(seed)
        got = sample(sft, prompts)["ids"][:, PROMPT_LEN:]
        torch.manual_seed(seed)
        assert torch.equal(got, _multinomial_sample(sft, prompts))


def test_sample_refuses_a_diverged_model(sft):
    model = TinyLM()
    model.load_state_dict(sft.state_dict())
    with torch.no_grad():
        model.weights[7] = float("nan")
    with pytest.raises(ValueError, match="nan or inf"):
        sample(model, ["1+1="])


def test_sample_restores_training_mode(sft):
    model = TinyLM()
    model.train()
    sample(model, ["1+1="])
    assert model.training


# ----------------------------------------------------------------------------- sequence_logprobs
def naive_logprobs(model, out):
    """Token by token: a fresh forward pass on every prefix, BOS and PAD removed from the softmax."""
    ids, L, mask = out["ids"], out["prompt_len"], out["mask"]
    B, T = mask.shape
    res = torch.zeros(B, T, dtype=torch.float64)
    with torch.no_grad():
        for b in range(B):
            for t in range(T):
                if mask[b, t] == 0:
                    continue
                logits = model(ids[b:b + 1, :L + t])[0, -1].double()
                allowed = [v for v in range(VOCAB_SIZE) if v not in (BOS, PAD)]
                logz = torch.logsumexp(logits[allowed], 0)
                res[b, t] = logits[ids[b, L + t]] - logz
    return res


def test_sequence_logprobs_matches_naive(sft):
    out = sample(sft, ALL_PROMPTS[::7] * 2, generator=torch.Generator().manual_seed(3))
    lp = sequence_logprobs(sft, out)
    assert lp.shape == out["mask"].shape
    torch.testing.assert_close(lp.detach().double(), naive_logprobs(sft, out), atol=1e-4, rtol=1e-4)


def test_sequence_logprobs_zero_at_padding_and_negative_elsewhere(sft):
    out = sample(sft, ALL_PROMPTS, generator=torch.Generator().manual_seed(4))
    lp = sequence_logprobs(sft, out)
    pad = out["mask"] == 0
    assert pad.any(), "expected some padded responses"
    assert (lp[pad] == 0).all() and (lp[~pad] <= 0).all() and torch.isfinite(lp).all()


def test_sequence_logprobs_has_gradient():
    torch.manual_seed(0)
    model = TinyLM()
    out = sample(model, ALL_PROMPTS[:16], generator=torch.Generator().manual_seed(0))
    lp = sequence_logprobs(model, out)
    assert lp.requires_grad
    lp.sum().backward()
    grads = [p.grad for p in model.parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


def test_sequence_logprobs_of_hand_made_rollout(sft):
    out = rollout(["3+4=", "7+5=", "1+1="], [[7, EOS], [1, 2, EOS], [EOS]])
    lp = sequence_logprobs(sft, out)
    torch.testing.assert_close(lp.detach().double(), naive_logprobs(sft, out), atol=1e-4, rtol=1e-4)
    assert (lp[0, 2:] == 0).all() and (lp[2, 1:] == 0).all()


# ----------------------------------------------------------------------------- decoding
def test_the_vocabulary_layout():
    assert [TOKENS[d] for d in DIGITS] == [str(d) for d in range(10)] and N_DIGITS == len(DIGITS) == 10
    assert [TOKENS[t] for t in (PLUS, EQUALS, BOS, EOS, PAD)] == ["+", "=", "<bos>", "<eos>", "<pad>"]
    assert RESPONSE_TOKENS == DIGITS + [PLUS, EQUALS, EOS] and not set(RESPONSE_TOKENS) & set(NEVER_SAMPLED)


def decode_prompts(out):
    """Prompt strings of a rollout, e.g. ``"7+5="`` (only the tests read prompts back)."""
    return ["".join(TOKENS[t] for t in row[1:]) for row in out["ids"][:, :out["prompt_len"]].tolist()]


def test_decode():
    out = rollout(["3+4=", "7+5=", "1+1=", "2+2=", "5+5="],
                  [[7, EOS], [1, 2, EOS], [EOS], [7, 7, 7, 7], [PLUS, EOS]])
    assert decode_responses(out) == ["7", "12", "", "7777…", "+"]
    assert decode_prompts(out) == ["3+4=", "7+5=", "1+1=", "2+2=", "5+5="]


def test_decode_sampled_roundtrip(sft):
    prompts = ALL_PROMPTS[:30]
    out = sample(sft, prompts, generator=torch.Generator().manual_seed(0))
    assert decode_prompts(out) == prompts
    for text, row, m in zip(decode_responses(out), out["ids"][:, PROMPT_LEN:].tolist(), out["mask"].tolist()):
        n = int(sum(m))
        if row[n - 1] == EOS:
            assert len(text) == n - 1
        else:
            assert text.endswith("…")


# ----------------------------------------------------------------------------- supervised loss
def test_supervised_loss_is_mean_over_real_tokens():
    torch.manual_seed(0)
    model = TinyLM()
    ids, _ = encode_prompts(["3+4=", "7+5="])
    target = answer_tokens(ids)
    loss = supervised_loss(model, ids, target)
    assert loss.ndim == 0 and loss.requires_grad
    seq = torch.cat([ids, target], 1)
    logp = torch.log_softmax(model(seq[:, :-1])[:, PROMPT_LEN - 1:], -1)
    real = target != PAD                                     # 2 + 3 real tokens
    naive = -logp.gather(-1, target[..., None]).squeeze(-1)[real].mean()
    torch.testing.assert_close(loss, naive)


# ----------------------------------------------------------------------------- clear errors
@pytest.mark.parametrize("bad", ["3+4", "12+3=", "a+b=", " 3+4=", "3-4=", "3+4=5", "", "٣+4=", 34, None])
def test_malformed_prompt_is_named(sft, bad):
    with pytest.raises(ValueError, match="malformed prompt"):
        encode_prompts(["1+1=", bad])
    with pytest.raises(ValueError, match="malformed prompt"):
        sample(sft, [bad])


def test_string_instead_of_list():
    with pytest.raises(TypeError, match="list"):
        encode_prompts("3+4=")


def test_empty_prompt_list():
    with pytest.raises(ValueError, match="empty"):
        encode_prompts([])


def test_too_long_input(sft):
    with pytest.raises(ValueError, match="at most 9"):
        sft(torch.zeros(1, MAX_LEN + 1, dtype=torch.long))


@pytest.mark.parametrize("max_new", [0, 5])
def test_bad_max_new(sft, max_new):
    with pytest.raises(ValueError, match="max_new"):
        sample(sft, ["1+1="], max_new=max_new)


def test_rollout_functions_run_a_tinylm_only(sft):
    """No temperature, and no stand-in model that hands in made-up logits: sampling any logits at a
    temperature is Lab 11's Task 2, their log-probs Task 1 (tests/test_package_solves_nothing.py)."""
    with pytest.raises(TypeError, match="temperature"):
        sample(sft, ["1+1="], temperature=0.5)
    standin = lambda ids: torch.zeros(*ids.shape, VOCAB_SIZE)                 # noqa: E731
    with pytest.raises(TypeError, match="sample runs a TinyLM"):
        sample(standin, ["1+1="])
    out = sample(sft, ["1+1="])
    with pytest.raises(TypeError, match="sequence_logprobs runs a TinyLM"):
        sequence_logprobs(standin, out)


def test_make_batch_needs_a_random_generator():
    with pytest.raises(TypeError, match="random.Random"):
        make_batch(3, 0)
