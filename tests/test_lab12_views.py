"""Lab 12's plots and sliders (course_utils/views/lab12.py), its run cache (course_utils/runs.py) and
its shipped reference curves.

Fast: no PPO training; histories are synthetic or come from the reference file, handed out by a
stand-in train_rlhf through a real RunCache. Slider updates are timed in CPU time of this process,
so a busy machine does not make them fail.
"""

import dataclasses
import functools
import json

import numpy as np
import pytest
import torch

from course_utils import parallel
from course_utils.checks import needs
from course_utils.prefs import DigitRM
from course_utils.evaluation import METRICS, last_third, sft_offset
from course_utils.response_tree import exact_entropy
from course_utils.reference_curves import REFERENCE_PATH, load_reference_curves
from course_utils.runs import SWEEP_BETAS, RunCache
from course_utils.world import N_OFFSET, N_PROMPTS, NOTEBOOK
from course_utils.runtime import grading
from course_utils.tinylm import load_sft
from course_utils.views import lab12 as views


PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def one_worker(monkeypatch):
    """The stand-ins for train_rlhf here record their calls in this process: runs one after another
    (side by side, the same runs: tests/test_parallel_runs.py)."""
    monkeypatch.setenv(parallel.ENV, "1")


def fake_history(n=30, drift=0.0, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n) / n
    return {"rm": list(0.1 + drift * t + 0.02 * rng.standard_normal(n)),
            "gold": list(0.7 - drift * t), "kl": list(0.1 + 10 * drift * t),
            "acc": list(0.8 - 0.5 * drift * t), "malformed": list(0.1 + 0.5 * drift * t),
            "digits": list(1.3 + 2 * drift * t), "beta": [0.1] * n, "clip_frac": [0.01] * n,
            "value_loss": [0.1] * n}


@dataclasses.dataclass
class Cfg:
    beta: float = 0.1
    target_kl: float = None
    seed: int = 0


def rm_of_digits(weight=0.3):
    rm = DigitRM()
    with torch.no_grad():
        rm.w.fill_(weight)
    return rm


def cache_of(histories, calls=None):
    """A real RunCache on the SFT model with a fixed RM, whose stand-in train_rlhf returns the SFT
    model and ``histories(cfg)``: no PPO training."""
    runs = RunCache(load_sft())
    runs.rm, runs.rm_offset = rm_of_digits(), 0.4

    def train(sft, rm, rm_offset, cfg):
        if calls is not None:
            calls.append(cfg)
        return sft, histories(cfg)

    runs.use(train)
    return runs


# ----------------------------------------------------------------------------- helpers
def test_smooth_is_a_trailing_mean():
    assert np.allclose(views.smooth([1, 2, 3, 4, 5], window=2), [1, 1.5, 2.5, 3.5, 4.5])
    assert np.allclose(views.smooth([4.0], window=5), [4.0])
    assert np.allclose(views.smooth(np.ones(50), window=7), 1.0)


def test_last_third_and_summary():
    hist = fake_history(n=30, drift=1.0)
    assert last_third(hist, "gold") == pytest.approx(np.mean(hist["gold"][-10:]))
    line = views.run_summary("beta = 0", hist)
    assert line.startswith("beta = 0: gold +0.70 -> ") and "accuracy 0.80 -> " in line and "KL" in line


def test_progress_is_silent_outside_a_kernel_and_while_grading(monkeypatch):
    it = range(3)
    assert views.progress(it) is it
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert grading()
    assert views.progress(it) is it


def test_progress_shows_no_bar_for_a_loop_whose_first_step_fails(monkeypatch):
    """An unfinished task raises in the first PPO iteration: no bar is left red at 0% above the
    "Finish ... first" line. A loop that runs gets its bar, counted from its first step."""
    import tqdm.auto

    from course_utils import runtime

    bars = []

    class Bar:
        def __init__(self, items, desc=None, total=None, initial=0, leave=False):
            self.items, self.count = items, initial
            bars.append(self)

        def __iter__(self):
            for item in self.items:
                self.count += 1
                yield item

    monkeypatch.setattr(runtime, "_in_kernel", lambda: True)
    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    with pytest.raises(NotImplementedError):
        for _ in views.progress(range(120), desc="PPO, beta 0"):
            raise NotImplementedError
    assert bars == []
    assert list(views.progress(range(5), desc="PPO, beta 0.1")) == [0, 1, 2, 3, 4]
    assert len(bars) == 1 and bars[0].count == 5


# ----------------------------------------------------------------------------- static plots
def test_plots_render():
    h0, h1 = fake_history(drift=1.0), fake_history(drift=0.0, seed=1)
    figs = [views.plot_rm_fit(0.547, 0.552, 0.89, torch.rand(10)),
            views.plot_curves({"beta = 0": h0, "beta = 0.1": h1}, title="t", target_kl=0.5),
            views.plot_controller(h1, target_kl=0.5),
            views.plot_overoptimization({0.0: h0, 0.1: h1})]
    assert len(figs[1].axes) == 6
    assert figs[1].axes[2].get_yscale() == "symlog"            # KL of 10 next to KL of 0.1
    for fig in figs:
        png = fig._repr_png_()
        assert png.startswith(PNG) and len(png) > 5000


# ----------------------------------------------------------------------------- the run cache
def test_run_cache_trains_each_configuration_once():
    calls = []
    cache = cache_of(lambda cfg: fake_history(drift=cfg.beta), calls)
    a = cache.run(Cfg(beta=0.0))
    assert cache.run(Cfg(beta=0.0)) is a
    sweep = cache.sweep(Cfg(), [0.0, 0.05, 0.1])
    assert list(sweep) == [0.0, 0.05, 0.1]
    assert [c.beta for c in calls] == [0.0, 0.05, 0.1]
    assert sweep[0.0] is a
    assert list(cache.sweep(Cfg())) == list(SWEEP_BETAS)              # the course's sweep by default
    cache.use(cache.train_fn)                                          # new code: the old runs are gone
    cache.run(Cfg(beta=0.0))
    assert len(calls) == 3 + 2 + 1                                     # 0.07 and 0.2 were new


def test_run_cache_waits_for_the_reward_model(capsys):
    runs = RunCache(load_sft())
    runs.use(lambda *args: pytest.fail("trained without a reward model"))
    for view in (views.TrainingCurves(runs, {"beta = 0": Cfg(beta=0.0)}), views.RewardOffset(runs),
                 views.OptimumSlider(runs), views.SampleExplorer(runs, {})):
        with needs("Tasks 3, 4 and 5"):
            view.show()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and all(line.startswith("Finish Part A (Tasks 1 and 2") for line in lines)


def test_fit_reward_model_uses_the_labs_function_and_one_offset():
    seen = []

    def train_reward_model(data, seed=0):
        seen.append((len(data), seed))
        return rm_of_digits(0.2)

    runs = cache_of(lambda cfg: fake_history())
    runs.run(Cfg())
    rm = runs.fit_reward_model(train_reward_model)
    assert seen == [(N_PROMPTS, 0)] and runs.rm is rm and runs.runs == {}   # a new RM forgets the old runs
    assert runs.rm_offset == pytest.approx(sft_offset(rm, runs.sft, n=N_OFFSET, seed=NOTEBOOK.offset))
    assert runs.world.train_data[0]["prompt"] != runs.world.held_out[0]["prompt"]    # two draws


def test_sft_offset_centres_sft_scores():
    sft, rm = load_sft(), rm_of_digits()
    offset = sft_offset(rm, sft, n=N_OFFSET, seed=2)
    assert offset == sft_offset(rm, sft, n=N_OFFSET, seed=2) and 0.3 * 0.9 < offset < 0.3 * 2.1   # one or two digits
    assert sft_offset(rm, sft, n=N_OFFSET, seed=3) != offset


# ----------------------------------------------------------------------------- reference curves
@pytest.fixture(scope="module")
def reference():
    ref = load_reference_curves()
    assert ref is not None, f"{REFERENCE_PATH} is missing: run python -m benchmarks.make_reference_curves"
    return ref


def test_reference_curves_are_data_for_the_notebook_sweep(reference):
    raw = json.loads(REFERENCE_PATH.read_text())       # plain JSON: numbers, no code
    assert set(raw) == {"meta", "runs"}
    assert sorted(reference["runs"]) == sorted(SWEEP_BETAS)
    for beta, runs in reference["runs"].items():
        assert len(runs) == len(reference["meta"]["seeds"]) >= 2
        for hist in runs:
            for key in METRICS:
                assert len(hist[key]) == reference["meta"]["config"]["iters"]
                assert all(isinstance(v, (int, float)) for v in hist[key])


def test_reference_curves_show_the_lesson(reference):
    """beta = 0 hacks (gold to -1, digits up), the default beta keeps gold above its start."""
    for hist in reference["runs"][0.0]:
        assert np.mean(hist["gold"][-10:]) < np.mean(hist["gold"][:5]) - 0.3
        assert np.mean(hist["digits"][-10:]) > np.mean(hist["digits"][:5])
    for hist in reference["runs"][0.1]:
        assert np.mean(hist["gold"][-10:]) >= np.mean(hist["gold"][:5])
        assert np.mean(hist["kl"][-10:]) < 2


# ----------------------------------------------------------------------------- sliders
def reference_runs(reference):
    """A RunCache whose runs at each beta of the sweep are the reference's first seed."""
    return cache_of(lambda cfg: reference["runs"][cfg.beta][0])


def test_curve_explorer_draws_a_frame_per_beta(reference):
    explorer = views.CurveExplorer(reference_runs(reference), Cfg()).prepare()
    pngs = {b: explorer.update(b) for b in SWEEP_BETAS}          # the first draw of each is warm-up
    assert all(p.startswith(PNG) for p in pngs.values())
    assert len(set(pngs.values())) == len(SWEEP_BETAS)
    assert all(explorer.update(b) == pngs[b] for b in SWEEP_BETAS)          # a beta's frame, again


def test_curve_explorer_without_reference():
    runs = cache_of(lambda cfg: fake_history(drift=1.0 if cfg.beta == 0 else 0.0))
    explorer = views.CurveExplorer(runs, Cfg(), betas=(0.0, 0.1), reference=None).prepare()
    assert explorer.update(0.1).startswith(PNG) and "beta = 0.1" in explorer.title.get_text()


def test_curve_explorer_widget_follows_the_slider(reference):
    explorer = views.CurveExplorer(reference_runs(reference), Cfg())
    explorer.show()
    slider, caption, frame = explorer.widget.children
    assert slider.value == SWEEP_BETAS[len(SWEEP_BETAS) // 2]
    slider.value = 0.0
    assert explorer.title.get_text().startswith("beta = 0:")


def test_training_curves_show_runs_summaries_and_the_controller(capsys):
    calls = []
    runs = cache_of(lambda cfg: {**fake_history(drift=cfg.beta), "beta": list(np.linspace(0.1, 0.2, 30))}, calls)
    view = views.TrainingCurves(runs, {"beta = 0": Cfg(beta=0.0), "target KL 0.5": Cfg(target_kl=0.5)},
                                title="t", answers_to=["3+4=", "9+8="])
    view.show()
    out = capsys.readouterr().out
    assert "beta = 0: gold " in out and "target KL 0.5: KL over the last third" in out
    assert "beta 0.100 -> 0.200" in out and "3+4=" in out and len(calls) == 2
    views.TrainingCurves(runs, {"beta = 0": Cfg(beta=0.0)}).show()
    assert len(calls) == 2                                             # from the cache


@pytest.fixture(scope="module")
def sample_explorer():
    return views.SampleExplorer(cache_of(lambda cfg: fake_history()), {"also SFT": Cfg()}, n_show=6).prepare()


def test_sample_explorer_shows_prompts_answers_and_exact_means(sample_explorer):
    html = sample_explorer.update(1.0)
    assert html.count("<tr") >= 6 + 3
    assert "+" in html and "gold" in html and "SFT" in html and "these 6 prompts" in html
    a, b = sample_explorer.update(0.0), sample_explorer.update(2.0)
    assert a != b
    sft, same = (sample_explorer.entry(1.0, n) for n in sample_explorer.names)
    assert sft["gold"] == pytest.approx(same["gold"])                  # the same model, exactly
    greedy, hot = sample_explorer.entry(0.0, "SFT"), sample_explorer.entry(2.0, "SFT")
    assert greedy["malformed"] < hot["malformed"]                      # greedy hides the blanks


def test_sample_explorer_widget_is_a_table_that_follows_the_slider(sample_explorer):
    sample_explorer.display()
    slider, caption, frame = sample_explorer.widget.children
    assert slider.value == 1.0 and frame.value == sample_explorer.update(1.0)      # an HTML widget
    slider.value = 0.0
    assert frame.value == sample_explorer.update(0.0) != sample_explorer.update(1.0)


def test_sample_explorer_matches_sampling(sample_explorer):
    """The exact mean gold at T = 1 over the shown prompts is what sampling the SFT model on them estimates."""
    from course_utils.labeler import gold_score
    from course_utils.tinylm import sample

    out = sample(load_sft(), sample_explorer.prompts * 700, generator=torch.Generator().manual_seed(0))
    assert gold_score(out).mean().item() == pytest.approx(sample_explorer.entry(1.0, "SFT")["gold"], abs=0.03)


def test_sample_explorer_is_deterministic(sample_explorer):
    torch.manual_seed(123)                                         # global RNGs do not matter
    again = views.SampleExplorer(cache_of(lambda cfg: fake_history()), {"also SFT": Cfg()}, n_show=6)
    assert again.update(1.0) == sample_explorer.update(1.0)


def test_lab12_views_do_nothing_while_grading(monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    runs = RunCache(load_sft())
    runs.use(lambda *args: pytest.fail("trained while grading"))
    for view in (views.LabelerExamples(runs.sft), views.RewardModelFit(runs, None, None, None),
                 views.RewardOffset(runs), views.TrainingCurves(runs, {"b": Cfg()}), views.CurveExplorer(runs, Cfg()),
                 views.OverOptimization(runs, Cfg()), views.SampleExplorer(runs, {"b": Cfg()}),
                 views.OptimumComparison(runs, Cfg()), views.OptimumSlider(runs),
                 views.LossWeights(runs, {"b": Cfg()}), views.CriticView(runs, Cfg(), None, None, None)):
        assert view.show() is None and not view._prepared
    assert capsys.readouterr().out == ""


def test_exact_entropy_of_the_sft_model_matches_sampling():
    """HealthSignals' exact entropy over whole responses: -E[log pi(y|x)], enumerated, against the mean
    of -log pi(y|x) over samples of the 100 prompts."""
    from course_utils.response_tree import ResponseTree
    from course_utils.tinylm import load_sft, sample, sequence_logprobs

    sft = load_sft()
    exact = exact_entropy(ResponseTree.build(), sft)
    prompts = [f"{a}+{b}=" for a in range(10) for b in range(10)] * 40
    out = sample(sft, prompts, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        sampled = -(sequence_logprobs(sft, out) * out["mask"]).sum(1)
    assert exact == pytest.approx(sampled.mean().item(), abs=4 * sampled.std().item() / len(prompts) ** 0.5)
    assert 0.3 < exact < 1.5


def test_health_signals_share_the_sft_models_pass_with_experiment_8(monkeypatch):
    """The SFT model's log-probs on the tree come from views.optimum.reference_logprobs (Experiment 8 has
    made them by then): HealthSignals runs the model once per run only, and its entropy is exact_entropy's."""
    from course_utils.response_tree import ResponseTree
    from course_utils.views.optimum import reference_logprobs

    runs = cache_of(lambda cfg: fake_history())
    tree = ResponseTree.build()
    reference_logprobs(tree, runs.sft)                                  # what Experiment 8 leaves behind
    expected = exact_entropy(tree, runs.sft)
    passes, logprobs = [], ResponseTree.logprobs

    @functools.wraps(logprobs)                                          # its name: the cache's key
    def counted(self, model):
        passes.append(model)
        return logprobs(self, model)

    monkeypatch.setattr(ResponseTree, "logprobs", counted)
    view = views.HealthSignals(runs, {"run A": Cfg(), "run B": Cfg(beta=0.05)}).prepare()
    assert len(passes) == 2                                             # runs A and B, not the SFT model again
    assert view.entropy["SFT model"] == expected
    assert view.entropy["run A"] == expected                            # the stand-in's policy: the SFT model's weights


def test_lab12_figures_keep_their_text_inside_the_figure():
    """The figures have fixed margins (no layout engine): every title, label, tick label and legend
    must still lie inside the figure."""
    h0, h1 = fake_history(drift=1.0), fake_history(drift=0.0, seed=1)
    health = views.HealthSignals(None, {})
    health.histories = {"run A": dict(h0, value_loss=list(np.geomspace(0.5, 0.01, 30))),
                        "run B": dict(h1, clip_frac=list(np.linspace(0.05, 0.07, 30)), value_loss=[0.02] * 30)}
    figs = {"rm_fit": views.plot_rm_fit(0.547, 0.552, 0.89, torch.linspace(-0.5, 0.8, 10)),
            "curves": views.plot_curves({"beta = 0": h0, "beta = 0.1": h1}, title="t", target_kl=0.5),
            "curves, no title": views.plot_curves({"beta = 0.1": h1}),
            "controller": views.plot_controller(h1, target_kl=0.5),
            "overoptimization": views.plot_overoptimization({0.0: h0, 0.1: h1}), "health": health.figure()}
    for name, fig in figs.items():
        fig._repr_png_()                                                # draws it, as the notebook does
        box, (w, h) = fig.get_tightbbox(), fig.get_size_inches()
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= w and box.y1 <= h, (name, box, (w, h))


def test_plot_curves_keeps_the_title_it_is_given():
    hist = {k: [0.0, 0.1, 0.2] for k in views.METRICS}
    fig = views.plot_curves({"run": hist}, title="PPO at beta = 0")
    assert fig._suptitle.get_text() == "PPO at beta = 0"


# ----------------------------------------------------------------------------- Experiment 10: token mean, response mean
def test_length_weights_of_a_known_batch():
    from course_utils.views.length import length_weights

    mask = torch.tensor([[[1.0, 0, 0, 0], [1, 1, 1, 0]]])            # one batch: lengths 1 and 3, N = 4, B = 2
    responses, token_mean, ratio = length_weights(mask)
    assert responses.tolist() == [0.5, 0, 0.5, 0]
    assert token_mean.tolist() == [0.25, 0, 0.75, 0]
    assert torch.allclose(ratio.double(), torch.tensor([2.0, 1.0, 2 / 3, 0.5], dtype=torch.double))


def test_loss_weights_table(capsys):
    runs = cache_of(lambda cfg: fake_history())
    view = views.LossWeights(runs, {"PPO, beta = 0": Cfg(beta=0.0)})
    view.show()
    out = capsys.readouterr().out
    assert "SFT model" in out and "PPO, beta = 0" in out and "share of a token mean" in out
    for responses, token_mean, _ in view.rows.values():
        assert float(responses.sum()) == pytest.approx(1) and float(token_mean.sum()) == pytest.approx(1)


# ----------------------------------------------------------------------------- Experiment 11: the critic, exactly
def _perturbed(model, scale=0.1, seed=0):
    """A copy of ``model`` with seeded noise on every weight: a policy that is not its reference."""
    import copy

    other = copy.deepcopy(model)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in other.parameters():
            p.add_(scale * torch.randn(p.shape, generator=gen))
    return other


def test_exact_policy_values_match_monte_carlo():
    """V^pi(root) and Q^pi(root, a) of the KL-penalized return, computed on the tree, against the mean
    return of 20,000 sampled responses (the RM score minus beta times the summed log-ratios)."""
    from course_utils.response_tree import ResponseTree
    from course_utils.reward_model import digit_counts
    from course_utils.tinylm import PROMPT_LEN, sample, sequence_logprobs
    from course_utils.policy_evaluation import policy_values

    sft = load_sft()
    policy, rm, offset, beta, n = _perturbed(sft), rm_of_digits(), 0.4, 0.1, 20000
    tree = ResponseTree.build(["7+5=", "3+4="])
    values, q = policy_values(tree.logprobs(policy), tree.logprobs(sft), tree.rm_rewards(rm, offset), beta)
    for p, prompt in enumerate(tree.prompts):
        out = sample(policy, [prompt] * n, generator=torch.Generator().manual_seed(p))
        with torch.no_grad():
            log_ratio = (sequence_logprobs(policy, out) - sequence_logprobs(sft, out)) * out["mask"]
            ret = (rm(digit_counts(out)) - offset - beta * log_ratio.sum(1)).double()
        assert float(values[0][p, 0]) == pytest.approx(ret.mean().item(), abs=4 * ret.std().item() / n ** 0.5)
        first = out["ids"][:, PROMPT_LEN]
        counts = torch.bincount(first, minlength=12)[:12]              # first tokens that continue the response
        common = (counts >= 100).nonzero()[:, 0].tolist()              # Q of those drawn 100 times or more
        assert common
        for a in common:
            pick = ret[first == a]
            # + 1e-3: continuations rarer than 1 in len(pick) may be missing from the sample
            assert float(q[0][p, 0, a]) == pytest.approx(pick.mean().item(), abs=4 * pick.std().item() / len(pick) ** 0.5 + 1e-3)


def test_at_the_optimum_the_policy_value_is_the_soft_value():
    from course_utils.response_tree import ResponseTree
    from course_utils.tree_optimum import soft_values
    from course_utils.policy_evaluation import policy_values

    tree = ResponseTree.build(["7+5=", "0+0=", "9+9="])
    ref, rewards = tree.logprobs(load_sft()), tree.rm_rewards(rm_of_digits(), 0.4)
    for beta in (0.05, 0.1, 1.0):
        soft, opt_logp = soft_values(ref, rewards, beta)
        exact, _ = policy_values(opt_logp, ref, rewards, beta)
        for d in range(4):
            assert torch.allclose(exact[d], soft[d], atol=1e-10), (beta, d)
        sft_values, _ = policy_values(ref, ref, rewards, beta)        # pi_ref itself: a lower value
        assert (sft_values[0] < soft[0] - 1e-6).all()


@pytest.fixture(scope="module")
def lab12():
    from course_staff.solutions import load_lab
    return load_lab("lab12")


@pytest.fixture(scope="module")
def critic_view(lab12):
    runs = cache_of(lambda cfg: fake_history())          # its "trained policy" is the SFT model
    return views.CriticView(runs, lab12["RLHFConfig"](), lab12["kl_penalized_rewards"], lab12["gae_per_token"],
                            lab12["ppo_rlhf_loss"], fit_iters=3, n_eval=300).prepare()


def test_critic_view_looks_up_the_exact_values_of_each_token(critic_view):
    v = critic_view
    m = v.mask.bool()
    _, ret = v.gae(v.exact_values, 0.0)                  # with V^pi, GAE(0)'s return r_t + V(next) is Q^pi
    assert torch.allclose(ret[m], v.exact_q[m], atol=1e-5)
    assert v.curves["exact"][0] < 1e-5 and v.curves["share"][-1] < 1e-5
    assert (np.diff(v.curves["exact"]) > 0).all()                # with V^pi: only the sampled rewards' noise, growing
    assert v.curves["share"][0] > 1e-3 and v.curves["share"][-1] < 1e-5     # lambda = 0 inherits the critic's errors, 1 none
    soft, exact = v.optimum_check
    assert torch.allclose(soft, exact, atol=1e-10)
    assert (v.exact_values[:, 0][m[:, 0]] != 0).any()


def test_critic_view_rewards_use_the_rollouts_log_probs(lab12):
    """The view reads its rollouts' log-probs off the tree: the rewards are those of the policy's and
    the SFT model's own sequence_logprobs (a policy that is not its reference, so the KL term counts)."""
    from course_utils.reward_model import digit_counts
    from course_utils.tinylm import sequence_logprobs

    runs = cache_of(lambda cfg: fake_history())
    policy = _perturbed(runs.sft)
    runs.use(lambda sft, rm, rm_offset, cfg: (policy, fake_history()))
    cfg = lab12["RLHFConfig"]()
    v = views.CriticView(runs, cfg, lab12["kl_penalized_rewards"], lab12["gae_per_token"], lab12["ppo_rlhf_loss"],
                         fit_iters=1, n_eval=200).prepare()
    out, mask = v.rollouts, v.mask
    with torch.no_grad():
        score = runs.rm(digit_counts(out)) - runs.rm_offset
        logp, ref_logp = sequence_logprobs(policy, out), sequence_logprobs(runs.sft, out)
        want = lab12["kl_penalized_rewards"](logp, ref_logp, score, mask, cfg.beta)
    assert (logp - ref_logp).abs().max() > 0.01
    assert torch.allclose(v.rewards.float(), want, atol=1e-5)


def test_critic_fit_is_deterministic(lab12):
    """Two fits of the same seed give bit-identical critics (one flat parameter, rollouts drawn at once)."""
    from course_utils.critic_fit import fit_critic

    runs = cache_of(lambda cfg: fake_history())
    fns = lab12["kl_penalized_rewards"], lab12["gae_per_token"], lab12["ppo_rlhf_loss"]
    fit = lambda: fit_critic(_perturbed(runs.sft), runs.sft, runs.rm, runs.rm_offset, lab12["RLHFConfig"](), *fns, 2)
    first, second = fit(), fit()
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))
    assert not torch.equal(first.head.weight, torch.zeros_like(first.head.weight))      # it did train


def test_critic_view_frame_redraws_its_numbers_only(critic_view):
    assert critic_view.update(0.5).startswith(PNG)
    assert "lambda = 0.5" in critic_view.caption()
    title = critic_view.scatter_title                  # a frame redraws the numbers' line only, under a static title
    assert f"λ = 0.5: correlation {critic_view.corr:.3f}" in title.get_text()
    assert title.axes.title not in critic_view.frame.dynamic and "GAE(λ)" in title.axes.get_title()


def test_critic_view_first_draw_leaves_the_fit_to_the_first_move(lab12, outside_a_kernel, monkeypatch):
    """show() draws the exact values alone, fits no critic and says what comes; the slider's first move
    fits it (once), draws the four panels and puts a complete static picture in place of the first one."""
    import course_utils.views.critic as critic_view

    shown, fits = [], []
    monkeypatch.setattr("IPython.display.display", lambda data, **kwargs: shown.append((data, kwargs)))
    fit = critic_view.fit_critic
    monkeypatch.setattr(critic_view, "fit_critic", lambda *args: fits.append(1) or fit(*args))
    v = views.CriticView(cache_of(lambda cfg: fake_history()), lab12["RLHFConfig"](), lab12["kl_penalized_rewards"],
                         lab12["gae_per_token"], lab12["ppo_rlhf_loss"], fit_iters=1, n_eval=200)
    v.show()
    slider, note, frame = v.widget.children
    (first, how), = shown
    assert not fits and v.critic is None
    assert "fitted when you first move the slider" in note.value and "with the critic" not in note.value
    assert "come with the slider's first move" in first["text/plain"] and "come with the slider" in frame.value
    assert "exact V^pi (smallest at lambda = 0)" in first["text/plain"]        # what the first frame draws
    slider.value = 0.5                                                         # the first move
    assert len(fits) == 1 and v.critic is not None
    assert "0.5: RMS error of the returns" in note.value and "with the critic" in note.value
    (again, how_again), = shown[1:]
    assert how_again["update"] and how_again["display_id"] == how["display_id"]
    assert "learned critic's values" in again["text/plain"] and "first move" not in again["text/plain"]
    assert again["image/png"] != first["image/png"]
    slider.value = 0.1
    assert len(fits) == 1 and len(shown) == 2                                  # fitted once, the picture made once more


def _kernel_critic_view(lab12, monkeypatch, ppo_rlhf_loss=None, shell=True):
    """A CriticView shown as in a kernel (inside an event loop, with a kernel's shell and its cell events;
    ``shell=False``: a running loop with no shell, as another library's): (shown, fits, events, view, cell),
    cell() showing the view inside the loop."""
    import asyncio
    from types import SimpleNamespace

    from IPython.core.events import EventManager, available_events

    import course_utils.views.critic as critic_view

    shown, fits = [], []
    monkeypatch.setattr("IPython.display.display", lambda data, **kwargs: shown.append((data, kwargs)))
    fit = critic_view.fit_critic
    monkeypatch.setattr(critic_view, "fit_critic", lambda *args: fits.append(1) or fit(*args))
    events = EventManager(None, available_events)
    if shell:
        monkeypatch.setattr("IPython.get_ipython", lambda: SimpleNamespace(events=events, kernel=SimpleNamespace()))
    v = views.CriticView(cache_of(lambda cfg: fake_history()), lab12["RLHFConfig"](), lab12["kl_penalized_rewards"],
                         lab12["gae_per_token"], ppo_rlhf_loss or lab12["ppo_rlhf_loss"], fit_iters=1, n_eval=200)

    async def cell():
        v.show()
        return asyncio.get_running_loop()

    return shown, fits, events, v, cell


def test_critic_view_completes_itself_in_a_kernel_when_the_cell_has_run(lab12, outside_a_kernel, monkeypatch):
    """In a kernel, show() draws the exact values alone and says the critic is being fitted; when the cell
    has run (post_run_cell: before the request ends, so a notebook run by nbclient keeps it) the critic is
    fitted once, the widget's frame and the static picture are made again, complete, at once, and torch's
    global RNG is as the cell left it. Nothing more happens on the loop's next turn or on a move."""
    import asyncio

    shown, fits, events, v, cell = _kernel_critic_view(lab12, monkeypatch)

    async def run():
        await cell()
        slider, note, frame = v.widget.children
        (first, how), = shown
        assert not fits and "being fitted" in note.value and "in a moment" in first["text/plain"]
        torch.manual_seed(7)
        rng = torch.get_rng_state()
        events.trigger("post_run_cell", None)                                 # the cell has run
        assert len(fits) == 1 and torch.equal(torch.get_rng_state(), rng)
        assert "with the critic" in note.value and "in a moment" not in frame.value
        (again, how_again), = shown[1:]
        assert how_again["update"] and how_again["display_id"] == how["display_id"]
        assert "learned critic's values" in again["text/plain"] and "in a moment" not in again["text/plain"]
        await asyncio.sleep(0.01)                                            # the loop's turns: done already
        events.trigger("post_run_cell", None)                                # a later cell: nothing
        slider.value = 0.5
        assert len(fits) == 1 and len(shown) == 2

    asyncio.run(run())


def test_critic_view_completes_itself_outside_a_cell_on_the_loops_next_turn(lab12, outside_a_kernel, monkeypatch):
    """Shown in a kernel outside a cell (a widget's message: no post_run_cell comes): completed on the event
    loop's next turn."""
    import asyncio

    shown, fits, events, v, cell = _kernel_critic_view(lab12, monkeypatch)

    async def run():
        await cell()
        assert not fits and len(shown) == 1
        await asyncio.sleep(0.01)
        assert len(fits) == 1 and len(shown) == 2 and "learned critic's values" in shown[1][0]["text/plain"]

    asyncio.run(run())


def test_critic_view_in_a_loop_that_is_no_kernels_leaves_the_fit_to_the_first_move(lab12, outside_a_kernel, monkeypatch):
    """A running event loop without a kernel's shell (another library's in a plain process, as Playwright's
    sync API leaves marked running while it is open): the view does as in a script, fitting nothing by itself."""
    import asyncio

    shown, fits, events, v, cell = _kernel_critic_view(lab12, monkeypatch, shell=False)

    async def run():
        await cell()
        await asyncio.sleep(0.01)                                           # the loop's turns: nothing comes
        slider, note, frame = v.widget.children
        assert not fits and len(shown) == 1 and "fitted when you first move the slider" in note.value

    asyncio.run(run())


def test_critic_view_completion_reports_a_failing_function_in_the_caption(lab12, outside_a_kernel, monkeypatch):
    """A student's function that fails in the fit: the caption says so, the first picture stays, nothing raises."""
    import asyncio
    from types import SimpleNamespace

    def broken(*args):
        raise ValueError("a bug in Task 5")

    shown, fits, events, v, cell = _kernel_critic_view(lab12, monkeypatch, ppo_rlhf_loss=broken)

    async def run():
        await cell()
        raised = []
        events.print_on_error, events.shell = False, SimpleNamespace(showtraceback=lambda: raised.append(1))
        events.trigger("post_run_cell", None)
        slider, note, frame = v.widget.children
        assert not raised and "raised ValueError: a bug in Task 5" in note.value
        assert v.critic is None and len(shown) == 1

    asyncio.run(run())


def test_critic_view_waits_for_unfinished_parts(capsys, lab12):
    with needs("Tasks 3, 4 and 5"):
        views.CriticView(RunCache(load_sft()), Cfg(), None, None, None).show()        # no reward model yet
    assert "Finish Part A" in capsys.readouterr().out

    def unfinished(*args):
        raise NotImplementedError("Task: gae_per_token")

    with needs("Tasks 3, 4 and 5"):
        views.CriticView(cache_of(lambda cfg: fake_history()), lab12["RLHFConfig"](), lab12["kl_penalized_rewards"],
                         unfinished, lab12["ppo_rlhf_loss"]).show()
    assert "Finish Tasks 3, 4 and 5 first" in capsys.readouterr().out


def test_the_reference_pass_is_shared_until_the_weights_change():
    from course_utils.response_tree import ResponseTree
    from course_utils.views.optimum import reference_logprobs

    model, tree = load_sft(), ResponseTree.build(["7+5="])
    first = reference_logprobs(tree, model)
    assert reference_logprobs(tree, model) is first                        # shared: no second pass
    assert all(torch.equal(a, b) for a, b in zip(first, tree.logprobs(model)))
    assert reference_logprobs(ResponseTree.build(["1+1="]), model) is not first    # another tree
    with torch.no_grad():
        next(model.parameters()).add_(0.01)                                 # new weights: computed again
    again = reference_logprobs(ResponseTree.build(["7+5="]), model)
    assert again is not first and not all(torch.equal(a, b) for a, b in zip(first, again))


def test_the_rewards_on_the_tree_are_shared_until_the_reward_model_changes():
    from course_utils.prefs import DigitRM
    from course_utils.response_tree import ResponseTree
    from course_utils.views.optimum import rm_rewards

    rm, tree = DigitRM(), ResponseTree.build(["7+5="])
    first = rm_rewards(tree, rm, 0.5)
    assert rm_rewards(tree, rm, 0.5) is first                               # shared: scored once
    assert all(torch.equal(a, b) for a, b in zip(first, tree.rm_rewards(rm, 0.5)))
    assert rm_rewards(tree, rm, 0.25) is not first                          # another offset
    with torch.no_grad():
        rm.w.add_(0.1)                                                       # new weights: scored again
    again = rm_rewards(tree, rm, 0.5)
    assert not all(torch.equal(a, b) for a, b in zip(first, again))


def test_critic_view_takes_the_sft_pass_from_experiment_8_bit_for_bit(monkeypatch):
    """reference_logprobs_on: on CriticView's tree (20 of the 100 prompts, 5 at a time), the rows of
    a pass over the 100 prompts (here 10 at a time: the rows do not depend on the chunk) are the log-probs a
    pass of its own gives, bit for bit; taken from there, no model pass; after the weights move, or without
    that pass, computed."""
    from course_utils.response_tree import ALL_PROMPTS, FAST_CHUNK, ResponseTree
    from course_utils.views.critic import PROMPTS
    from course_utils.views.optimum import reference_logprobs, reference_logprobs_on

    model = load_sft()
    tree = ResponseTree(PROMPTS, chunk=FAST_CHUNK)
    own = tree.logprobs(model)
    reference_logprobs(ResponseTree(ALL_PROMPTS, chunk=10), model)      # what Experiment 8 leaves behind
    monkeypatch.setattr(ResponseTree, "logprobs", lambda self, m: pytest.fail("a model pass"))
    shared = reference_logprobs_on(tree, model)
    assert all(torch.equal(a, b) for a, b in zip(shared, own))
    monkeypatch.undo()
    with torch.no_grad():
        next(model.parameters()).add_(0.01)                             # moved weights: Experiment 8's pass is stale
    moved = reference_logprobs_on(tree, model)
    assert all(torch.equal(a, b) for a, b in zip(moved, tree.logprobs(model)))
    assert not torch.equal(moved[0], own[0])
