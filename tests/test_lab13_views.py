"""Lab 13's exact figures (course_utils.referee) and views (course_utils.views.lab13), on policies made
without training: the SFT model and copies of it with one weight moved. The exact figures are checked
against facts independent of the code that computes them (a policy's distance to itself, a ranking by
the gold score itself, a group of one response)."""

import dataclasses
import math
import types

import pytest
import torch
import torch.nn.functional as F

from course_utils.lab13_runs import Lab13Runs
from course_utils.referee import Referee
from course_utils.tinylm import TOKENS, TinyLM, load_sft
from course_utils.views import lab13 as V


def reference_dpo_loss(logp_chosen, logp_rejected, ref_chosen, ref_rejected, beta):
    """DPO's loss as Lab 13's contract states it (the test's own copy; the package holds none)."""
    margins = beta * ((logp_chosen - ref_chosen) - (logp_rejected - ref_rejected))
    return -F.logsigmoid(margins).mean(), margins


def _counting_rm():
    """A reward model that counts digits (every weight 1): enough for exact figures, no fitting."""
    class Counting(torch.nn.Module):
        def forward(self, counts):
            return counts.sum(-1)
    return Counting()


@pytest.fixture(scope="module")
def referee():
    return Referee(load_sft(), _counting_rm(), 2.0)


@pytest.fixture(scope="module")
def moved():
    """Two policies: copies of the SFT model with the output layer's bias of one token raised."""
    out = []
    for token, by in ((TOKENS.index("<eos>"), 2.0), (1, 1.5)):     # EOS up (shorter answers), the digit 1 up
        m = TinyLM()
        m.load_state_dict(load_sft().state_dict())
        with torch.no_grad():
            m.w()["head.bias"][token] += by                # a view of the model's one weight vector
        out.append(m)
    return out


def test_judge_of_an_optimum_is_at_distance_0_from_it(referee):
    opt = referee.optimum("gold", 0.1)
    figures = referee.judge(opt.logp, 0.1)
    assert abs(figures["gold"]["kl_to_opt"]) < 1e-9 and figures["rm"]["kl_to_opt"] > 0.01
    sft = referee.judge(referee.sft, 0.1)["rm"]
    assert abs(sft["kl"]) < 1e-12
    assert math.isclose(sft["gap"], 0.1 * sft["kl_to_opt"], rel_tol=1e-6)


def test_curve_agrees_with_the_exact_optimum(referee):
    (point,) = referee.curve("rm", [0.2])
    stats = referee.optimum("rm", 0.2).stats
    assert math.isclose(point["gold"], stats.gold, abs_tol=1e-6) and math.isclose(point["kl"], stats.kl, abs_tol=1e-6)


def test_lengths_sum_to_one_and_follow_eos(referee, moved):
    sft, shorter = referee.lengths(referee.sft), referee.lengths(moved[0])
    assert math.isclose(float(sft.sum()), 1.0, abs_tol=1e-9) and math.isclose(float(shorter.sum()), 1.0, abs_tol=1e-9)
    mean = lambda d: float((d * torch.arange(1, 5)).sum())           # noqa: E731
    assert mean(shorter) < mean(sft), "raising EOS's logit shortens the answers"


def test_implicit_reward_is_beta_times_the_log_ratio_and_zero_at_the_reference(referee, moved):
    zero = V.implicit_reward(reference_dpo_loss, referee.ref, referee.ref, 0.1)
    assert zero.abs().max() == 0
    assert V.gold_order_accuracy(referee, zero) == pytest.approx(0.5)      # every pair a tie
    r = V.implicit_reward(reference_dpo_loss, referee.logp(moved[1]), referee.ref, 0.5)
    seq = V.complete_only(V.path_logprobs(referee.logp(moved[1]))) - V.complete_only(V.path_logprobs(referee.ref))
    assert torch.allclose(r, 0.5 * seq)


def test_gold_order_accuracy_of_the_gold_score_itself_is_1(referee):
    gold = V.complete_only(referee.tree.features)[..., 0]
    assert V.gold_order_accuracy(referee, gold) == pytest.approx(1.0)
    assert V.gold_order_accuracy(referee, -gold) == pytest.approx(0.0)


def test_a_group_of_one_always_carries_no_signal(referee, moved):
    zero = V.no_signal(referee, moved[0], [1, 2, 4])
    for name in ("rm", "gold"):
        assert zero[name][0] == pytest.approx(1.0) and zero[name][0] > zero[name][1] > zero[name][2]


def _tensor_bytes(obj, seen=None):
    """Bytes of the tensors reachable from obj through dicts, lists, tuples and attributes (each storage once)."""
    seen = set() if seen is None else seen
    if isinstance(obj, torch.Tensor):
        key = obj.untyped_storage().data_ptr()
        return 0 if key in seen or seen.add(key) else obj.untyped_storage().nbytes()
    if isinstance(obj, torch.nn.Module) or id(obj) in seen:
        return 0
    seen.add(id(obj))
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v, seen) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v, seen) for v in obj)
    return _tensor_bytes(vars(obj), seen) if hasattr(obj, "__dict__") else 0


def test_referee_keeps_figures_per_weights_not_log_probs(referee, moved):
    lean = Referee(referee.sft, _counting_rm(), 2.0, tree=referee.tree)
    for beta in (0.1, 0.2):                                     # both optima at both betas solved and kept
        lean.judge(lean.sft, beta)
    held = _tensor_bytes(lean)
    for policy in moved:
        fresh = lean.judge(lean.logp(policy), 0.1)                       # tree tensors: judged, nothing kept
        assert lean.judge(policy, 0.1) == fresh                          # the same figures, bit for bit
        assert lean.judge(policy, 0.1) is lean.judge(policy, 0.1)         # judged once
    assert _tensor_bytes(lean) - held < 2**20, "a judged policy's tree tensors (20 MB) are kept"
    trained = TinyLM()
    trained.load_state_dict(moved[0].state_dict())
    before = lean.judge(trained, 0.1)
    with torch.no_grad():
        trained.w()["head.bias"][TOKENS.index("<eos>")] -= 2.0           # trained in place: now the SFT model
    assert lean.judge(trained, 0.1) != before, "a policy whose weights changed in place got its old figures"
    assert lean.judge(trained, 0.1) == lean.judge(lean.logp(trained), 0.1)


def test_no_signal_a_chunk_of_prompts_at_a_time_is_the_whole_at_once(referee, moved):
    ks = [2, 3, 4, 8]
    probs = V.complete_only(V.response_probs(referee.logp(moved[1])))                 # (P, N), all prompts
    for name in ("rm", "gold"):
        levels, which = torch.unique(V.complete_only(referee.rewards[name]), return_inverse=True)
        mass = probs.new_zeros(probs.shape[0], len(levels)).scatter_add_(1, which, probs)
        whole = [float((mass ** k).sum(1).mean()) for k in ks]
        for chunk in (7, 100):
            assert V.no_signal(referee, moved[1], ks, chunk=chunk)[name] == whole, (name, chunk)


def _png(fig):
    png = fig._repr_png_()
    assert png[:4] == b"\x89PNG" and fig.alt and len(fig.alt) > 80
    return png


@dataclasses.dataclass(frozen=True)
class Cfg:
    beta: float = 0.1
    which: int = 0


@pytest.fixture(scope="module")
def runs(referee, moved):
    """A Lab13Runs whose driver hands back one of the moved policies (``cfg.which``) instead of training."""
    world = types.SimpleNamespace(sft=referee.sft, rm=None, rm_offset=None, ppo_curves=None)
    runs = Lab13Runs(world)
    runs._referee = referee
    return runs


def fixed(world, cfg, after=None):
    policy = FIXED[cfg.which]
    hist = {"after": [after(policy), after(policy)] if after else [], "train_acc": [0.6, 0.62], "held_acc": [0.6, 0.6]}
    return policy, hist


FIXED = []


def test_views_draw_with_alt_text(runs, moved):
    FIXED[:] = moved
    _png(V.Frontier(runs, {"A": (fixed, Cfg(0.1, 0)), "B": (fixed, Cfg(0.05, 1))}).figure())
    view = V.DPOEpochs(runs, fixed, Cfg(0.1, 1), dpo_loss=reference_dpo_loss)
    fig = view.figure()
    _png(fig)
    assert view.rows[0]["noise_free"] == pytest.approx(0.5) and "epoch 2" in fig.alt
    assert view.rows[1]["noise_free"] == view.rows[2]["noise_free"] != 0.5      # two snapshots of one policy
    cells = {(r, c): (fixed, Cfg(0.1, k)) for k, r in enumerate(("std", "mean")) for c in ("loss", "reward")}
    _png(V.GRPOGrid(runs, cells).figure())
    assert "E[L]" in V.LengthBias(runs, {"A": (fixed, Cfg(0.1, 0))}).table()
    _png(V.GroupSignal(runs, {"A": (fixed, Cfg(0.1, 0))}).figure())


def test_beta_slider_draws_each_beta_its_own_frame(runs, moved):
    FIXED[:] = moved
    view = V.BetaSlider(runs, {"A": (fixed, Cfg(0.1, 0)), "B": (fixed, Cfg(0.1, 1))}, betas=(0.05, 0.1))
    frames = {b: view.update(b) for b in (0.05, 0.1)}
    assert all(f[:4] == b"\x89PNG" for f in frames.values()) and frames[0.05] != frames[0.1]
    assert view.caption().startswith("beta = 0.1") and "pi*_RM" in view.alt()
    assert view.update(0.05) == frames[0.05] and view.caption().startswith("beta = 0.05")   # back: the same frame
    fresh = V.BetaSlider(runs, {"A": (fixed, Cfg(0.1, 0)), "B": (fixed, Cfg(0.1, 1))}, betas=(0.05, 0.1))
    fresh.update(0.1)
    assert fresh.update(0.05) == frames[0.05], "a kept frame is the frame drawn after another beta's"


def test_beta_slider_legend_stays_in_the_background_only_where_no_point_falls_on_it(runs, moved):
    FIXED[:] = moved
    view = V.BetaSlider(runs, {"A": (fixed, Cfg(0.1, 0)), "B": (fixed, Cfg(0.1, 1))}, betas=(0.05, 0.1))
    view.prepare()
    legend, renderer = view.ax.legend_, view.frame.canvas.get_renderer()
    moving = [a for a in view.frame.dynamic if a is not legend]
    on_it = [a for a in moving if a.axes is view.ax and a.get_window_extent(renderer).overlaps(legend.get_window_extent(renderer))]
    assert on_it and legend in view.frame.dynamic, "these runs put a point on the legend: it is drawn over them"
    for a in on_it:                                          # move them to the upper right, clear of it
        a.set_data([view.ax.get_xlim()[1]], [view.ax.get_ylim()[1]])
    legend.set_animated(False)

    def pngs(frame):
        out = []
        for b in (0.05, 0.1):
            view.draw(b)
            out.append(frame.png())
        return out

    frame = V._frame(view.fig, moving, legend)
    assert legend not in frame.dynamic
    still = pngs(frame)
    assert still == pngs(V.FastFigure(view.fig, moving + [legend])), "the same pixels as the legend drawn on top"


def test_a_point_on_the_legend_keeps_it_drawn_over_the_points(runs, moved):
    FIXED[:] = moved
    view = V.BetaSlider(runs, {"A": (fixed, Cfg(0.1, 0))}, betas=(0.1,))
    view.prepare()
    renderer = view.frame.canvas.get_renderer()
    legend = view.ax.legend_
    points = [a for a in view.shown[0.1] if a.axes is view.ax]
    for a in points:
        a.set_data([view.ax.get_xlim()[1]], [view.ax.get_ylim()[1]])     # the upper right corner
    assert V._clear_of(legend, points, renderer)
    x, y = view.ax.transData.inverted().transform(legend.get_window_extent(renderer).get_points().mean(0))
    points[0].set_data([x], [y])                 # a point in the middle of the legend
    assert not V._clear_of(legend, points, renderer)


def test_ppo_reference_points_come_from_the_shipped_runs():
    points = V.ppo_reference()
    assert [p["beta"] for p in points] == sorted(p["beta"] for p in points) and len(points) >= 4
    assert points[0]["kl"] > 10 > points[-1]["kl"], "beta 0 drifts tens of nats, beta 0.2 a fraction of one"


def test_a_snapshot_leaves_the_random_state_alone(moved):
    from course_utils.lab13_runs import snapshot
    torch.manual_seed(0)
    copy = snapshot(moved[0])
    after = torch.rand(3)
    torch.manual_seed(0)
    assert torch.equal(after, torch.rand(3)), "a run that keeps snapshots must draw what a run without them draws"
    assert torch.equal(copy.weights, moved[0].weights) and not copy.weights.requires_grad


def test_optimum_curves_are_solved_once_per_referee(referee, monkeypatch):
    """The Frontier cell and BetaSlider below it draw the same curves: the second reads the first's."""
    V._CURVES.pop(referee, None)
    want = {name: referee.curve(name, V.CURVE_BETAS) for name in ("rm", "gold")}
    assert [V.optimum_curve(referee, name) for name in ("rm", "gold")] == [want["rm"], want["gold"]]
    monkeypatch.setattr(referee, "curve", lambda *a: pytest.fail("solved again"))
    assert [V.optimum_curve(referee, name) for name in ("rm", "gold")] == [want["rm"], want["gold"]]
