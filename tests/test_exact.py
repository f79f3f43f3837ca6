"""The exact optimum of Lab 12's toy (course_utils.response_tree, tree_optimum) against brute force and its own identities."""

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from course_staff.exact import exact_optimum_of
from course_utils.response_tree import (ACTIONS, ALL_PROMPTS, TERMINAL, ResponseTree, complete_only, path_logprobs,
                                        response_probs)
from course_utils.tree_optimum import TiltedOptimum, exact_optimum, policy_stats
from course_utils.runs import RunCache
from course_utils.views.optimum import (BETA_SLIDER, READOUT, READOUT_GAP, READOUT_SIZE, OptimumSlider, compare_sweep,
                                       plot_sweep, print_sweep, stats_at_beta)
from course_utils.prefs import DigitRM, digit_counts, gold_score
from course_utils.tinylm import BOS, EOS, PAD, TinyLM, encode_prompts, load_sft, sample, sequence_logprobs

PROMPTS = ["7+5=", "3+4=", "0+0="]
OFFSET = 0.4


def tilt(seq_ref_logp, seq_rewards, beta):
    """The optimum at the sequence level: log pi*(y|x) = log pi_ref(y|x) + r(y)/beta - log Z(x).

    Args: seq_ref_logp, seq_rewards (P, N) over complete responses (see complete_only).
    Returns: (log pi* (P, N), log Z (P,)). Equal to the token-level product of exact_optimum.
    """
    z = seq_ref_logp + seq_rewards / beta
    log_z = torch.logsumexp(z, dim=1)
    return z - log_z[:, None], log_z


@pytest.fixture(scope="module")
def sft():
    return load_sft()


@pytest.fixture(scope="module")
def rm():
    rm = DigitRM()
    with torch.no_grad():
        rm.w.copy_(torch.linspace(0.05, 0.35, 10))       # positive weights, like the fitted RM
    return rm


@pytest.fixture(scope="module")
def setup(sft, rm):
    tree = ResponseTree.build(PROMPTS)
    return tree, tree.logprobs(sft), tree.rm_rewards(rm, OFFSET)


def locate(out, row):
    """(depth, state, action) of a rollout's row in the response tree."""
    toks = [int(t) for t, m in zip(out["ids"][row, out["prompt_len"]:], out["mask"][row]) if m > 0]
    state = 0
    for t in toks[:-1]:
        state = state * 12 + t
    return len(toks) - 1, state, ACTIONS.tolist().index(toks[-1])


def test_tree_matches_sampling_logprobs_and_scores(setup, sft, rm):
    tree, ref, rewards = setup
    torch.manual_seed(0)
    out = sample(sft, PROMPTS * 40)
    seq = sequence_logprobs(sft, out).sum(1)
    score = rm(digit_counts(out)) - OFFSET
    gold = gold_score(out)
    paths = path_logprobs(ref)
    for row in range(len(seq)):
        d, s, a = locate(out, row)
        p = row % len(PROMPTS)
        assert TERMINAL[d][a]
        assert abs(paths[d][p, s, a] - seq[row]) < 1e-4
        assert abs(rewards[d][p, s, a] - score[row]) < 1e-5
        assert tree.features[d][p, s, a, 0] == gold[row]


def test_incremental_decoding_matches_the_full_forward_for_deeper_models():
    torch.manual_seed(1)
    model = TinyLM(n_layers=2)
    tree = ResponseTree.build(["9+9="])
    logp = tree.logprobs(model)
    out = sample(model, ["9+9="] * 50)
    seq = sequence_logprobs(model, out).sum(1)
    paths = path_logprobs(logp)
    for row in range(50):
        d, s, a = locate(out, row)
        assert abs(paths[d][0, s, a] - seq[row]) < 1e-4


@torch.no_grad()
def brute_force(model, prompt, w, offset, beta):
    """pi* = pi_ref exp(r / beta) / Z by listing every response, one forward per prefix, in plain Python."""
    ids, _ = encode_prompts([prompt])
    allowed = [t for t in range(15) if t not in (BOS, PAD)]
    cache = {}

    def next_logp(prefix):
        if prefix not in cache:
            logits = model(torch.cat([ids, torch.tensor([prefix], dtype=torch.long).view(1, -1)], 1))[0, -1]
            logits = logits.double()
            lse = math.log(sum(math.exp(logits[t]) for t in allowed))
            cache[prefix] = {t: float(logits[t]) - lse for t in allowed}
        return cache[prefix]

    responses = []
    for n in range(1, 5):
        for body in itertools.product([t for t in allowed if t != EOS], repeat=n - 1):
            for last in allowed:
                if n < 4 and last != EOS:
                    continue                                   # not complete: it goes on
                responses.append(body + (last,))
    answer = str(int(prompt[0]) + int(prompt[2]))
    rows = []
    for y in responses:
        logp = sum(next_logp(y[:t])[y[t]] for t in range(len(y)))
        r = sum(w[t] for t in y if t < 10) - offset
        text = "".join(str(t) if t < 10 else "?" for t in y if t != EOS)
        ended = y[-1] == EOS
        if ended and text == answer:
            gold = 1.0
        elif ended and 1 <= len(text) <= 2 and "?" not in text:
            gold = 0.0
        else:
            gold = -1.0
        rows.append((logp, r, gold))
    tilted = [lp + r / beta for lp, r, _ in rows]
    m = max(tilted)
    log_z = m + math.log(sum(math.exp(t - m) for t in tilted))
    probs = [math.exp(t - log_z) for t in tilted]
    return {"n": len(rows), "log_z": log_z, "sum": sum(probs),
            "reward": sum(p * r for p, (_, r, _) in zip(probs, rows)),
            "kl": sum(p * (t - log_z - lp) for p, t, (lp, _, _) in zip(probs, tilted, rows)),
            "gold": sum(p * g for p, (_, _, g) in zip(probs, rows)),
            "acc": sum(p for p, (_, _, g) in zip(probs, rows) if g == 1)}


def test_optimum_equals_brute_force(setup, sft, rm):
    tree, ref, rewards = setup
    beta = 0.05
    opt = exact_optimum(tree, ref, rewards, beta)
    bf = brute_force(sft, PROMPTS[0], rm.w.tolist(), OFFSET, beta)
    assert bf["n"] == sum(int(t.sum()) * 12 ** d for d, t in enumerate(TERMINAL)) == 22621
    assert abs(bf["sum"] - 1) < 1e-9
    pp = opt.stats.per_prompt
    assert abs(opt.log_z[0] - bf["log_z"]) < 1e-4
    for key in ["reward", "kl", "gold", "acc"]:
        assert abs(pp[key][0] - bf[key]) < 1e-4, (key, pp[key][0], bf[key])
    assert abs(pp["objective"][0] - beta * bf["log_z"]) < 1e-5     # J(pi*) = beta log Z


def test_token_level_product_is_the_sequence_level_optimum(setup):
    tree, ref, rewards = setup
    beta = 0.2
    opt = exact_optimum(tree, ref, rewards, beta)
    for d, (lp_opt, lp_ref, r) in enumerate(zip(path_logprobs(opt.logp), path_logprobs(ref), rewards)):
        target = lp_ref + r / beta - opt.log_z[:, None, None]         # log pi_ref(y) + r(y)/beta - log Z
        done = TERMINAL[d]
        assert torch.allclose(lp_opt[..., done], target[..., done], atol=1e-9)
    seq_opt, log_z = tilt(complete_only(path_logprobs(ref)), complete_only(rewards), beta)
    assert seq_opt.shape == (len(PROMPTS), 22621)
    assert torch.allclose(complete_only(path_logprobs(opt.logp)), seq_opt, atol=1e-9)
    assert torch.allclose(log_z, opt.log_z, atol=1e-12)


def perturbed(sft, scale, seed):
    torch.manual_seed(seed)
    model = TinyLM()
    model.load_state_dict(sft.state_dict())
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn_like(p))
    return model


@pytest.mark.parametrize("beta", [0.02, 0.1, 1.0])
def test_the_optimum_beats_every_other_policy(setup, sft, beta):
    tree, ref, rewards = setup
    opt = exact_optimum(tree, ref, rewards, beta)
    assert abs(opt.stats.objective - opt.objective) < 1e-9
    assert opt.stats.kl >= 0
    torch.manual_seed(3)
    others = {"sft": ref,
              "fresh": tree.logprobs(TinyLM()),
              "perturbed": tree.logprobs(perturbed(sft, 0.05, 4)),
              "cold": [F.log_softmax(lp / 0.5, -1) for lp in ref],
              "hot": [F.log_softmax(lp / 2.0, -1) for lp in ref],
              "greedy-ish": [F.log_softmax(lp / 0.05, -1) for lp in ref]}
    for name, logp in others.items():
        s = policy_stats(tree, logp, ref, rewards, beta, optimum=opt)
        gap = opt.stats.per_prompt["objective"] - s.per_prompt["objective"]
        assert (gap >= -1e-9).all(), name
        # J* - J(pi) = beta * KL(pi || pi*), prompt by prompt
        assert torch.allclose(gap, beta * s.per_prompt["kl_to_opt"], atol=1e-7), name
    self_stats = policy_stats(tree, opt.logp, ref, rewards, beta, optimum=opt)
    assert abs(self_stats.kl_to_opt) < 1e-9


@pytest.mark.parametrize("beta", [1e-3, 3e-3, 1e-2, 10.0, 1e3])
def test_stable_for_every_beta(setup, beta):
    tree, ref, rewards = setup
    opt = exact_optimum(tree, ref, rewards, beta)
    for t in opt.logp + opt.values + [opt.log_z]:
        assert torch.isfinite(t).all()
    total = sum(p.sum(dim=(1, 2)) for p in response_probs(opt.logp))
    assert torch.allclose(total, torch.ones(len(PROMPTS), dtype=torch.float64), atol=1e-9)
    for lp in opt.logp:                                                # each state's distribution sums to 1
        assert torch.allclose(lp.exp().sum(-1), torch.ones_like(lp[..., 0]), atol=1e-9)
    s = opt.stats
    assert all(math.isfinite(v) for v in [s.reward, s.kl, s.objective, s.gold, s.acc])
    best = torch.stack([torch.where(TERMINAL[d], r, -torch.inf).flatten(1).max(1).values
                        for d, r in enumerate(rewards)]).max(0).values
    if beta <= 1e-3:
        assert (best - s.per_prompt["reward"] < 0.05).all()             # beta -> 0: the RM's argmax
    if beta >= 1e3:
        assert s.kl < 1e-5                                               # beta -> inf: pi_ref itself


def test_one_liner(sft, rm, setup):
    tree, ref, rewards = setup
    opt = exact_optimum_of(sft, rm, OFFSET, 0.1, prompts=PROMPTS)
    assert torch.allclose(opt.log_z, exact_optimum(tree, ref, rewards, 0.1).log_z)
    assert -1 <= opt.stats.gold <= 1 and 0 <= opt.stats.acc <= 1
    assert len(set(ALL_PROMPTS)) == 100                    # the default: every prompt of the toy
    with pytest.raises(ValueError):
        exact_optimum_of(sft, rm, OFFSET, 0.0, prompts=PROMPTS[:1])


def test_slider_matches_the_optimum_and_draws(setup, sft, rm, monkeypatch):
    tree, ref, rewards = setup
    runs = RunCache(sft)
    runs.rm, runs.rm_offset = rm, OFFSET
    view = OptimumSlider(runs, betas=[1e-3, 0.1, 10.0], prompt="3+4=", prompts=PROMPTS).prepare()
    for i, beta in enumerate(view.betas):                # the curves drawn (stats_many) are stats(beta) at each beta
        for key, value in view.stats(beta).items():
            assert abs(view.curves[key][i] - value) < 1e-9 * max(1.0, abs(value)), (beta, key)
    for beta in [1e-3, 0.05, 3.0]:
        exact = exact_optimum(tree, ref, rewards, beta).stats
        fast = view.stats(beta)
        for key in ["reward", "kl", "gold", "acc", "malformed", "digits"]:
            assert abs(fast[key] - getattr(exact, key)) < 2e-3 * max(1.0, abs(getattr(exact, key))), (beta, key)
        png = view.update(beta)
        assert png.startswith(b"\x89PNG")
    sft_stats = policy_stats(tree, ref, ref, rewards, 1.0)
    assert abs(view.sft["gold"] - sft_stats.gold) < 1e-4 and view.sft["kl"] == 0.0
    view.display()
    slider, caption, frame = view.widget.children
    assert slider.value == 0.1 and view.readout[0].get_text() == "0.1" and "beta = 0.1:" in view.alt()
    slider.value = 1.0                                                    # the slider re-draws the view
    assert view.readout[0].get_text() == "1" and "beta = 1:" in view.alt()
    # the bars as decode_responses writes them ("" a blank, "…" no EOS); the alt text quotes them in words
    monkeypatch.setattr(view.tree, "answers", lambda top: ["", "12", "7777…", "3", "4", "5"][:len(top)])
    view.update(1.0)
    assert [label.get_text() for label in view.labels[:3]] == ["(blank)", "12", "7777…"]
    assert [said for said, _, _ in view.top] == ["(blank)", "'12'", "'7777' (no EOS)"]
    alt = view.alt()
    assert "top responses to 3+4=: (blank) " in alt and "; '12' " in alt and "; '7777' (no EOS) " in alt


def test_slider_readout_is_evenly_spaced(sft, rm):
    """OptimumSlider's readout, measured as drawn: from each number at the widest it shows (over the slider's
    betas) to the next word, READOUT_GAP ems each time; the line centred on the figure."""
    runs = RunCache(sft)
    runs.rm, runs.rm_offset = rm, OFFSET
    view = OptimumSlider(runs, betas=[1e-3, 0.1, 10.0], prompt="3+4=", prompts=PROMPTS).prepare()
    view.update(0.1)
    renderer = view.frame.canvas.get_renderer()
    words = {t.get_text(): t.get_window_extent(renderer) for t in view.fig.texts}
    betas = BETA_SLIDER["base"] ** np.arange(BETA_SLIDER["min"], BETA_SLIDER["max"] + 1e-9, BETA_SLIDER["step"])
    ends = []
    for (_, key, form), number in zip(READOUT, view.readout):
        for value in (betas if key == "beta" else view.curves[key]):
            number.set_text(form.format(value))
            ends.append((key, number.get_window_extent(renderer).x1))
    right = [max(x for k, x in ends if k == key) for _, key, _ in READOUT]
    gaps = [words[word].x0 - end for end, (word, _, _) in zip(right, READOUT[1:])]
    em = READOUT_SIZE / 72 * view.fig.dpi
    assert all(abs(gap - READOUT_GAP * em) < 1.5 for gap in gaps), gaps
    assert abs((words[READOUT[0][0]].x0 + right[-1]) / 2 - view.fig.bbox.width / 2) < 1.5


@pytest.mark.parametrize("per_prompt", [False, True])
def test_stats_at_many_betas_equal_stats_at_each(setup, per_prompt):
    """OptimumSlider's curves (stats_many, one product per beta) are stats(beta) at each beta; with rewards
    that differ by prompt by whole units (per_prompt), the shared shift underflows for some prompts at
    small beta and those betas take stats' path."""
    tree, ref, rewards = setup
    if per_prompt:
        rewards = [r + torch.arange(len(PROMPTS), dtype=r.dtype)[:, None, None] * TERMINAL[d] for d, r in enumerate(rewards)]
    tilted = TiltedOptimum(tree, ref, rewards)
    betas = [1e-3, 0.01, 0.1, 1.0, 10.0, math.inf]
    many = tilted.stats_many(betas)
    for i, beta in enumerate(betas):
        for key, value in tilted.stats(beta).items():
            assert abs(many[key][i] - value) < 1e-9 * max(1.0, abs(value)), (beta, key, many[key][i], value)
    assert many["kl"][-1] == 0.0


def test_sweep_comparison(setup, sft, rm, capsys):
    tree, ref, rewards = setup
    sweep = {0.1: (perturbed(sft, 0.05, 4), {"gold": []}), 0.0: sft}
    rows = compare_sweep(sweep, sft, rm, OFFSET, tree=tree)
    assert [r["beta"] for r in rows] == [0.0, 0.1]
    for r in rows:
        gap = r["opt"].objective - r["ppo"].objective
        assert gap >= 0 and abs(gap - r["beta_used"] * r["ppo"].kl_to_opt) < 1e-7
    assert rows[0]["ppo"].kl == 0.0                                        # the SFT model itself
    print_sweep(rows)
    assert "KL(PPO||pi*)" in capsys.readouterr().out
    assert len(plot_sweep(rows).axes) == 3


def test_stats_moved_to_another_beta_equal_stats_computed_there(setup, sft):
    """stats_at_beta (compare_sweep's one pass over the SFT model) gives, bit for bit, the Stats that
    policy_stats computes at that beta; a Stats with KL(pi || pi*) refuses to move."""
    tree, ref, rewards = setup
    torch.manual_seed(5)
    for logp in (ref, tree.logprobs(perturbed(sft, 0.05, 4))):
        base = policy_stats(tree, logp, ref, rewards, 1.0)
        for beta in (1e-3, 0.1, 0.2):
            moved, there = stats_at_beta(base, beta), policy_stats(tree, logp, ref, rewards, beta)
            assert moved.beta == beta and moved.per_prompt.keys() == there.per_prompt.keys()
            for key, value in vars(there).items():
                if key != "per_prompt":
                    assert getattr(moved, key) == value, (beta, key)
            for key, value in there.per_prompt.items():
                assert torch.equal(moved.per_prompt[key], value), (beta, key)
    opt = exact_optimum(tree, ref, rewards, 0.1)
    with pytest.raises(ValueError):
        stats_at_beta(policy_stats(tree, ref, ref, rewards, 0.1, optimum=opt), 0.2)


def test_fast_chunk_gives_the_same_logprobs_bit_for_bit(sft):
    """A tree passes FAST_CHUNK prompts at a time (its default): the same log-probs, bit for bit, as 10 at a time
    (the default before), for the SFT model and for a model with moved weights, as a trained policy has."""
    import copy

    from course_utils.response_tree import FAST_CHUNK

    moved = copy.deepcopy(sft)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in moved.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    prompts = ALL_PROMPTS[::7]                          # 15 prompts: chunks of 5 and of 10 cut them differently
    for model in (sft, moved):
        fast, default = (ResponseTree(prompts, chunk=c).logprobs(model) for c in (FAST_CHUNK, 10))
        assert all(torch.equal(a, b) for a, b in zip(fast, default))


def test_complete_only_shortcuts_equal_their_definitions_bit_for_bit(setup):
    """TiltedOptimum's two shortcuts give, bit for bit, what they stand for: complete_path_logprobs is
    complete_only(path_logprobs(.)), and complete_features()(rows) is complete_only(features_of(rows))."""
    from course_utils.response_tree import complete_only, complete_path_logprobs, path_logprobs

    tree, ref, _ = setup
    assert torch.equal(complete_path_logprobs(ref), complete_only(path_logprobs(ref)))
    features_of = tree.complete_features()
    for rows in (slice(0, 2), slice(1, None), torch.tensor([2, 0])):
        assert torch.equal(features_of(rows), complete_only(tree.features_of(rows)))
