"""Every negative control of `make science` is an ablation of the mechanism its criterion claims: it
could meet the criterion if the mechanism were not what it claims, and fails only through its figures,
never by arithmetic or by definition. No training: the runs are replaced by stand-ins that report the
figures a control would need to meet its criterion, or an untrained model's. (tests/test_science.py
checks on real, short runs that each control changes exactly its criterion's mechanism input.)

A control reverted to an old form fails here: a fixed beta as the controller's control (no single KL
is near two targets; a fixed beta "moves" 1.00x by definition), the reward model at its initial
weights (all 0), PPO-ptx judged on accuracy alone (a policy that never trains keeps its accuracy),
a control that is another criterion's figure (the GRPO mirror pair, k2_biased against unbiased's k1),
the rise of gold at beta 0 against an RM fit on shuffled rankings (which keeps a count component by
chance), the spammed digits against an RM with only its heaviest weights swapped (which leaves the
third heaviest in place), a CPU-time ratio as a criterion.
"""

import difflib
import math
import types

import pytest
import torch

from benchmarks import criteria  # noqa: E402
from benchmarks import science  # noqa: E402
from benchmarks import science_beyond  # noqa: E402
from benchmarks import science_lab12 as L12  # noqa: E402

from course_staff.beyond import methods as B  # noqa: E402


def criteria_of(experiment):
    return [c for e in science.experiments() if e.name == experiment for c in e.criteria]


# ----------------------------------------------------------------------------- the controller
def test_controller_control_is_the_controller_with_its_sign_flipped(monkeypatch):
    """Stand-in runs that all reach their target: then the control must meet the criterion too (it can
    fail only through what its runs do), and every run, criterion's and control's, has the controller on."""
    calls = []

    def reaches_its_target(seed, rm="fit", controller="as given", **changes):
        calls.append((controller, changes))
        kl = changes.get("target_kl") or 0.4                      # a fixed beta settles somewhere
        return {"kl_last_third": kl, "beta_start": changes["beta"], "beta_end": changes["beta"]}

    monkeypatch.setattr(L12, "ppo", reaches_its_target)
    out = L12.run_controller(0)
    for c in criteria_of("lab12.controller"):
        for label, key in c.controls:
            assert c.meets(out[key]), (
                f"lab12.controller.{c.name}: its control ({label}) fails even when every run reaches its target "
                f"({c.fmt.format(out[key])}, needs {c.threshold_text()}): it fails by arithmetic or by definition")
    assert all("target_kl" in ch for _, ch in calls), \
        "a run without the controller (a fixed beta) is no ablation of the controller's feedback"
    starts = {ctl: sorted(ch["beta"] for c2, ch in calls if c2 == ctl) for ctl, _ in calls}
    assert set(starts) == {"as given", "sign flipped"} and starts["as given"] == starts["sign flipped"], starts
    assert max(starts["as given"]) / min(starts["as given"]) >= 10, "two starts an order of magnitude apart"


def test_the_flipped_controller_is_train_rlhf_with_one_line_changed():
    given, flipped = L12.flipped_source()
    changed = [d for d in difflib.ndiff(given.splitlines(), flipped.splitlines()) if d[:1] in "+-"]
    assert len(changed) == 2 and "(1 - 0.1 * e)" in changed[1] and "(1 + 0.1 * e)" in changed[0], changed


# ----------------------------------------------------------------------------- the reward model
@pytest.fixture(scope="module")
def small_world():
    from course_utils.labeler import ranked_data
    from course_utils.tinylm import load_sft
    sft = load_sft()
    train, held = ranked_data(sft, 300, k=4, seed=77), ranked_data(sft, 300, k=4, seed=78)
    return L12.World(sft, train, held, L12.lab()["train_reward_model"](train, seed=77), 0.0, {})


def test_reward_model_controls_are_fits_not_the_initial_weights(monkeypatch, small_world):
    """A control that scores what the untrained model (all weights 0) scores is no ablation of fitting
    on the labeler's rankings: it ties every pair by definition."""
    monkeypatch.setattr(L12, "world", lambda seed: small_world)
    L12.shuffled_rm.cache_clear()
    try:
        out = L12.run_reward_model(0)
    finally:
        L12.shuffled_rm.cache_clear()
    acc, ceiling = L12.lab()["rm_accuracy"](L12.DigitRM(), small_world.held_out)
    untrained = {0.5, ceiling - acc, 0.0, abs(0.5 - out["agreement_counting"])}
    for c in criteria_of("lab12.reward_model"):
        for label, key in c.controls:
            assert all(abs(out[key] - u) > 1e-9 for u in untrained), (
                f"lab12.reward_model.{c.name}: its control ({label}) scores {out[key]:.4f}, what a model at its "
                f"initial weights scores: it fails by definition, not for want of what the fit learns")


# ----------------------------------------------------------------------------- the hack, step by step
@pytest.fixture
def hack_world(monkeypatch, small_world):
    """Lab 12's hack experiment on the small world, its control RMs built from that world's fit."""
    import dataclasses
    world = dataclasses.replace(small_world, start={"gold": 0.5})
    monkeypatch.setattr(L12, "world", lambda seed: world)
    monkeypatch.setattr(L12, "untrained_early_peak", lambda sft, seed: world.start["gold"])
    caches = [f.cache_clear for f in L12.CONTROL_RMS.values()]
    for clear in caches:
        clear()
    yield world
    for clear in caches:
        clear()


def _stand_in_ppo(choose):
    """A stand-in for PPO at beta 0: its final policy writes choose(rm) only (a digit), four at a time."""
    def ppo(seed, rm="fit", controller="as given", **changes):
        digit = choose(L12.reward_model(seed, rm))
        return {"early_gold_peak": 0.0, "kl": 40.0, "malformed": 1.0, "history": {"kl": [40.0] * 120},
                "digit_shares": [float(d == digit) for d in range(10)]}
    return ppo


@pytest.mark.parametrize("k", [0, 1, 2], ids=["heaviest", "second", "third"])
def test_spams_heavy_control_moves_every_heavy_digit(monkeypatch, hack_world, k):
    """The runs settle on one of the RM's heavy digits, not always the heaviest (seed 1: the third
    heaviest, four 2s). The control's RM must make whatever heavy digit the policy picks a light one of
    the fit: a stand-in policy that writes the k-th heaviest digit of the RM it is trained on must then
    fail the criterion. Swapping only the heaviest (or the two heaviest) digits with the lightest leaves
    the third heaviest where it was, and the stand-in meets the criterion under that control."""
    monkeypatch.setattr(L12, "ppo", _stand_in_ppo(lambda rm: int(rm.w.detach().argsort(descending=True)[k])))
    out = L12.run_hack(0)
    c, = [c for c in criteria_of("lab12.hack") if c.name == "spams_heavy"]
    for label, key in c.controls:
        assert not c.meets(out[key]), (
            f"lab12.hack.spams_heavy: under its control ({label}) a policy writing that RM's digit of rank {k + 1} "
            f"still writes a heavy digit of the fit ({c.fmt.format(out[key])}, {c.threshold_text()}): the control "
            "does not move the heavy digits")


def test_rises_first_control_has_no_count_component(monkeypatch, hack_world):
    """What makes gold rise first is that the RM pays for any digit, so a blank scores lowest, as the
    labeler says: the count component of its weights (their mean). The control's RM must carry none of it
    and keep the rest of the fit. An RM fit on shuffled rankings keeps whatever count component chance
    gives it (seed 2: mean weight +0.03 against weights of -0.05..+0.15; gold rose +0.13 at beta 0)."""
    names = ["fit", *L12.CONTROL_RMS]
    start = hack_world.start["gold"]
    monkeypatch.setattr(L12, "ppo", lambda seed, rm="fit", **_: {           # the peak names the RM trained on
        "early_gold_peak": start + names.index(rm), "kl": 40.0, "malformed": 1.0, "digit_shares": [0.1] * 10,
        "history": {"kl": [40.0] * 120}})
    monkeypatch.setattr(L12, "untrained_early_peak", lambda sft, seed: start)       # the noise floor: no rise
    out = L12.run_hack(0)
    c, = [c for c in criteria_of("lab12.hack") if c.name == "rises_first"]
    fit = hack_world.rm.w.detach()
    trained = [names[round(out[key])] for _, key in c.controls]
    assert trained, "rises_first needs a control trained on an RM without the count component"
    for name in trained:
        w = L12.reward_model(0, name).w.detach()
        assert abs(w.mean().item()) < 1e-6 * fit.abs().mean().item(), (
            f"lab12.hack.rises_first: its control's RM ({name!r}) keeps a count component (mean weight "
            f"{w.mean().item():+.4f}): a blank still scores below an average answer, which is the mechanism itself")
        assert torch.allclose(fit - w, (fit - w).mean().expand(10), atol=1e-6), (
            f"lab12.hack.rises_first: its control's RM ({name!r}) changes more than the count component of the fit")


# ----------------------------------------------------------------------------- PPO-ptx
def test_ptx_criterion_fails_for_a_policy_that_never_trains(monkeypatch):
    start = {"rm": 0.0, "gold": 0.52, "kl": 0.0, "acc": 0.73, "malformed": 0.2, "digits": 1.1}
    monkeypatch.setattr(L12, "world", lambda seed: types.SimpleNamespace(start=start))
    monkeypatch.setattr(L12, "ppo", lambda seed, **changes: dict(start))        # nothing learned
    out = L12.run_ptx(0)
    for c in criteria_of("lab12.ptx"):
        assert not c.meets(out[c.key]), (
            f"lab12.ptx.{c.name} is met by a policy that never trains ({c.fmt.format(out[c.key])}): "
            "keeping the accuracy alone shows nothing; PPO-ptx must also gain RM score, and a tie with plain PPO "
            "is not below it")


# ----------------------------------------------------------------------------- means over PPO seeds
# Three criteria read the mean run over L12.PPO_SEEDS PPO seeds, criterion and control at the same seeds: a
# stand-in whose world's own PPO seed (the run every other criterion reads) lies on the wrong side, the others on
# the right side, must give the mean's verdict. Control: with PPO_SEEDS = 1 (that one run alone, the old
# single-run criterion) the same stand-in misses the criterion.
def _off(seed, ppo_seed):
    """True for the stand-in run of the world's own PPO seed, the outlier."""
    return ppo_seed in (None, seed)


def _verdicts(monkeypatch, experiment, name, run):
    """[(criterion met, [each control meets it])] of ``run(0)``'s figures: over PPO_SEEDS PPO seeds, over one."""
    c, = [c for c in criteria_of(experiment) if c.name == name]
    out = []
    for n in (L12.PPO_SEEDS, 1):
        monkeypatch.setattr(L12, "PPO_SEEDS", n)
        figures = run(0)
        out.append((c.meets(figures[c.key]), [c.meets(figures[key]) for _, key in c.controls]))
    return out


def _check(verdicts):
    mean, one = verdicts
    assert mean == (True, [False]), f"the mean over PPO seeds (met, [controls meet]): {mean}"
    assert one[0] is False, f"control: the world's own PPO seed alone must miss the criterion: {one}"


def test_kl_plateau_reads_the_mean_over_ppo_seeds(monkeypatch, hack_world):
    bound = L12.collapse_kl(hack_world.sft, 0)

    def ppo(seed, rm="fit", controller="as given", ppo_seed=None, **changes):
        # beta = 0: the outlier's KL 1.6 times the bound (|log 1.6| > log 1.5), the others' at it; the default beta
        # far below it at every PPO seed
        level = (1.6 if _off(seed, ppo_seed) else 1.0) * bound if changes["beta"] == 0.0 else 0.5
        return {"early_gold_peak": 0.0, "kl": level, "malformed": 1.0, "history": {"kl": [level] * 120},
                "digit_shares": [float(d == 0) for d in range(10)]}

    monkeypatch.setattr(L12, "ppo", ppo)
    _check(_verdicts(monkeypatch, "lab12.hack", "kl_plateau", L12.run_hack))


def test_clip_normal_reads_the_mean_over_ppo_seeds(monkeypatch):
    def ppo(seed, rm="fit", controller="as given", ppo_seed=None, **changes):
        # run A: the outlier clips 7% over the last third, the others 3%; run B: the outlier 3%, the others 20%
        high = "lr" in changes
        clip = (0.03 if high else 0.07) if _off(seed, ppo_seed) else (0.2 if high else 0.03)
        return {"history": {"clip_frac": [clip] * 120, "kl": [1.0] * 120, "value_loss": [1.0] * 120}, "policy": None}

    monkeypatch.setattr(L12, "ppo", ppo)
    monkeypatch.setattr(L12, "world", lambda seed: types.SimpleNamespace(sft=None))
    monkeypatch.setattr(L12, "response_tree", lambda: None)
    monkeypatch.setattr(L12, "exact_entropy", lambda tree, model: 1.0)
    _check(_verdicts(monkeypatch, "lab12.health", "clip_normal", L12.run_health))


def test_best_lambda_reads_the_mean_curve_over_ppo_seeds(monkeypatch):
    import numpy as np
    from course_utils.views.critic import LAMBDAS
    lam = np.array(LAMBDAS)

    def curves(seed, ppo_seed, fit_iters):
        # the learned critic's error smallest at 0.75 for the outlier, at 0.95 for the others; V^pi's at 0
        best = 0.75 if _off(seed, ppo_seed) else 0.95
        return {"critic": (lam - best) ** 2, "exact": lam ** 2, "share": np.full(len(lam), 0.04)}

    monkeypatch.setattr(L12, "critic_curves", curves)
    _check(_verdicts(monkeypatch, "lab12.critic", "best_lambda", L12.run_critic))


# ----------------------------------------------------------------------------- one criterion per fact
def test_no_criterion_is_another_ones_control():
    """A control's figure that is another criterion's own figure makes two criteria of one fact (the
    mirror pairs GRPO unscaled_drifts / reward_scaled_lands, k2_biased against unbiased's k1)."""
    for e in science.experiments():
        keys = {c.key: c.name for c in e.criteria}
        for c in e.criteria:
            for label, key in c.controls:
                assert key not in keys, (f"{e.name}.{c.name}: its control ({label}) is the figure of "
                                         f"{e.name}.{keys[key]}: one fact counted twice")


def test_every_control_is_another_figure_than_its_criterion():
    for e in science.experiments():
        for c in e.criteria:
            assert c.controls and c.mechanism and all(key != c.key and label for label, key in c.controls), \
                f"{e.name}.{c.name}"


def test_the_mechanism_check_sees_a_second_change():
    inputs = {"a": {"beta": 0.1, "rm": "fit", "seed ppo": 0}, "b": {"beta": 0.0, "rm": "fit", "seed ppo": 7},
              "c": {"beta": 0.0, "rm": "shuffled", "seed ppo": 0}}
    assert criteria.changed_inputs(inputs, "a", "b") == {"beta"}              # a seed is a nuisance input
    assert criteria.changed_inputs(inputs, "a", "c") == {"beta", "rm"}


def test_no_criterion_is_a_time_or_a_cost():
    """CPU time is a figure of the measurement lane (science_beyond.MEASURED), never a criterion."""
    for e in science.experiments():
        for c in e.criteria:
            assert "cpu" not in c.key.lower() and "time" not in c.claim.lower(), f"{e.name}.{c.name}"
    assert [e.name for e in science.experiments(attr="MEASURED")] == ["beyond.budget"]


# ----------------------------------------------------------------------------- Beyond PPO
def test_dpo_is_compared_with_ppo_at_matched_kl():
    points = [(0.2, 0.86), (0.5, 0.80), (1.0, 0.70), (10.0, -0.5)]
    assert science_beyond.frontier_gold(points, 0.5) == pytest.approx(0.80)
    t = (math.log(0.7) - math.log(0.5)) / (math.log(1.0) - math.log(0.5))
    assert science_beyond.frontier_gold(points, 0.7) == pytest.approx(0.80 + t * (0.70 - 0.80))
    with pytest.raises(ValueError, match="KL 0.1000 is outside"):               # no extrapolation, no NaN
        science_beyond.frontier_gold(points, 0.1)
    assert science_beyond.frontier_gold(points, 0.1, sft_gold=0.5) == pytest.approx(0.5 + 0.5 * 0.36)
    with pytest.raises(ValueError, match="KL 20.0000 is outside PPO's frontier, KL 0.0000 to 10.0000"):
        science_beyond.frontier_gold(points, 20.0, sft_gold=0.5)
    c, = [c for c in criteria_of("beyond.dpo") if c.name == "on_frontier"]
    assert c.key == "dpo_off_frontier_labeler" and [k for _, k in c.controls] == ["dpo_off_frontier_shuffled"]


def test_the_sweep_spans_every_kl_it_is_read_at(monkeypatch):
    """A reading past the sweep's largest KL adds smaller betas (WIDER, in turn) until the sweep reaches it."""
    kl_at = lambda beta: 0.04 / beta                                            # noqa: E731  smaller beta, larger KL
    monkeypatch.setattr(science_beyond, "ppo_figures", lambda seed, beta: {"kl": kl_at(beta), "gold": 0.0})
    assert list(science_beyond.spanning_sweep(0, [0.5, kl_at(0.05)])) == list(science_beyond.SWEEP)
    assert list(science_beyond.spanning_sweep(0, [0.5, kl_at(0.05) * 1.01])) == [*science_beyond.SWEEP, 0.03]
    assert list(science_beyond.spanning_sweep(0, [kl_at(0.025)])) == [*science_beyond.SWEEP, 0.03, 0.02]


def test_grpo_cells_differ_in_one_factor_each():
    """The 2 x 2: where the KL goes x whether beta's term is on the score's scale, each cell a (config, score
    function) of Lab 13's train_grpo (B.cell). The published cells are Lab 13's own (k3 unscaled; the
    penalized reward normalized as a whole)."""
    lab13 = B.lab("lab13")
    torch.manual_seed(0)
    score, kl, k3 = torch.randn(8), torch.rand(8) * 3, torch.rand(8, 3)
    groups = lambda x: x.view(2, 4)                                                                  # noqa: E731
    std = groups(score).std(1, keepdim=True) + 1e-6
    plain = lab13["group_advantages"](groups(score)).flatten()

    def run(kl_in, scaled):
        """(advantages, the k3 term of the loss) of one cell, as Lab 13's train_grpo and grpo_iteration make
        them from the cell's config and score function (kl: each response's sampled log-ratio to pi_ref)."""
        cfg, score_fn = B.cell(lab13["GRPOConfig"](batch=2, k=4, beta=0.1, kl_in=kl_in), lambda out: score.clone(),
                               scaled)
        scores = score_fn(None)
        if cfg.kl_in == "reward":                         # train_grpo: the penalty in the score, none in the loss
            scores, loss_beta = scores - cfg.beta * kl, 0.0
        else:
            loss_beta = cfg.beta
        return lab13["group_advantages"](groups(scores), cfg.scale).flatten(), loss_beta * k3, cfg

    for scaled in (None, False):                                                   # Shao et al.
        adv, penalty, _ = run("loss", scaled)
        assert torch.equal(adv, plain) and torch.allclose(penalty, 0.1 * k3)
    adv, penalty, cfg = run("loss", True)
    assert torch.equal(adv, plain) and torch.allclose(penalty, (0.1 / std).repeat_interleave(4)[:, None] * k3)
    # ... and Lab 13's grpo_loss weighs each response's k3 so: ratio 1, k3 = exp(-0.3) - 1 + 0.3 on each token
    logp = torch.randn(8, 3)
    loss, _ = lab13["grpo_loss"](logp, logp, logp - 0.3, adv, torch.ones(8, 3), 0.2, cfg.beta)
    weight = (0.1 / std).repeat_interleave(4)
    assert torch.allclose(loss, -(adv - weight * (math.exp(-0.3) - 1 + 0.3)).mean())
    for scaled in (None, True):                                                    # PPO's penalized reward
        adv, penalty, _ = run("reward", scaled)
        assert torch.allclose(adv, lab13["group_advantages"](groups(score - 0.1 * kl)).flatten())
        assert torch.equal(penalty, torch.zeros_like(k3))
    adv, penalty, _ = run("reward", False)
    centred = (groups(kl) - groups(kl).mean(1, keepdim=True)).flatten()
    assert torch.allclose(adv, plain - 0.1 * centred, atol=1e-6) and torch.equal(penalty, torch.zeros_like(k3))
    assert set(science_beyond.GRPO_CELLS) == {(p, s) for p in ("loss", "reward") for s in (False, True)}
