"""Lab 12's plots and sliders (course_utils/lab12_views.py) and its shipped reference curves.

Fast: no PPO training; histories are synthetic or come from the reference file. Slider updates are
timed in CPU time of this process, so a busy machine does not make them fail.
"""

import dataclasses
import json
import random
import time

import nbformat
import numpy as np
import pytest
import torch

from course_utils.views import lab12 as views
from course_utils.prefs import DigitRM
from course_utils.tinylm import load_sft

from course_staff.harness import REPO

PNG = b"\x89PNG\r\n\x1a\n"
SLIDER_BUDGET_MS = 150


def fake_history(n=30, drift=0.0, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n) / n
    return {"rm": list(0.1 + drift * t + 0.02 * rng.standard_normal(n)),
            "gold": list(0.7 - drift * t), "kl": list(0.1 + 10 * drift * t),
            "acc": list(0.8 - 0.5 * drift * t), "malformed": list(0.1 + 0.5 * drift * t),
            "digits": list(1.3 + 2 * drift * t), "beta": [0.1] * n, "clip_frac": [0.01] * n,
            "value_loss": [0.1] * n}


def cpu_ms(fn, *args):
    t0 = time.process_time()
    fn(*args)
    return (time.process_time() - t0) * 1000


def notebook_sweep_betas():
    nb = nbformat.read(str(REPO / "source" / "lab12" / "lab12.ipynb"), as_version=4)
    for cell in nb.cells:
        for line in cell.source.splitlines():
            if line.startswith("SWEEP_BETAS = "):
                return [float(x) for x in json.loads(line.split("=", 1)[1])]
    raise AssertionError("the notebook defines no SWEEP_BETAS")


# ----------------------------------------------------------------------------- helpers
def test_smooth_is_a_trailing_mean():
    assert np.allclose(views.smooth([1, 2, 3, 4, 5], window=2), [1, 1.5, 2.5, 3.5, 4.5])
    assert np.allclose(views.smooth([4.0], window=5), [4.0])
    assert np.allclose(views.smooth(np.ones(50), window=7), 1.0)


def test_progress_is_silent_outside_a_kernel_and_while_grading(monkeypatch):
    it = range(3)
    assert views.progress(it) is it
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert views.grading()
    assert views.progress(it) is it


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
@dataclasses.dataclass
class Cfg:
    beta: float = 0.1
    seed: int = 0


def test_run_cache_trains_each_configuration_once():
    calls = []

    def train(sft, rm, offset, cfg):
        calls.append(cfg)
        return "policy", fake_history(drift=cfg.beta)

    cache = views.RunCache(train, "sft", "rm", 0.3)
    a = cache.run(Cfg(beta=0.0))
    assert cache.run(Cfg(beta=0.0)) is a
    sweep = cache.sweep(Cfg(), [0.0, 0.05, 0.1])
    assert list(sweep) == [0.0, 0.05, 0.1]
    assert [c.beta for c in calls] == [0.0, 0.05, 0.1]
    assert sweep[0.0] is a[1]
    cache.clear()
    cache.run(Cfg(beta=0.0))
    assert len(calls) == 4


# ----------------------------------------------------------------------------- reference curves
@pytest.fixture(scope="module")
def reference():
    ref = views.load_reference_curves()
    assert ref is not None, f"{views.REFERENCE_PATH} is missing: run benchmarks/make_reference_curves.py"
    return ref


def test_reference_curves_are_data_for_the_notebook_sweep(reference):
    raw = json.loads(views.REFERENCE_PATH.read_text())       # plain JSON: numbers, no code
    assert set(raw) == {"meta", "runs"}
    assert sorted(reference["runs"]) == sorted(notebook_sweep_betas())
    for beta, runs in reference["runs"].items():
        assert len(runs) == len(reference["meta"]["seeds"]) >= 2
        for hist in runs:
            for key, _, _ in views.METRICS:
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
def test_curve_explorer_redraws_fast(reference):
    sweep = {b: runs[0] for b, runs in reference["runs"].items()}
    explorer = views.CurveExplorer(sweep, reference)
    pngs = {b: explorer.update(b) for b in sweep}              # the first draw of each is warm-up
    assert all(p.startswith(PNG) for p in pngs.values())
    assert len(set(pngs.values())) == len(sweep)
    times = [cpu_ms(explorer.update, b) for b in list(sweep) * 2]
    assert np.median(times) < SLIDER_BUDGET_MS, times


def test_curve_explorer_without_reference():
    explorer = views.CurveExplorer({0.0: fake_history(drift=1.0), 0.1: fake_history()}, None)
    assert explorer.update(0.1).startswith(PNG)


def test_curve_explorer_widget_follows_the_slider(reference):
    sweep = {b: runs[0] for b, runs in reference["runs"].items()}
    explorer = views.CurveExplorer(sweep, reference)
    box = explorer.widget(0.1)
    seen = []
    explorer.update = lambda b, _orig=explorer.update: seen.append(b) or _orig(b)
    slider = box.children[0]
    assert slider.value == 0.1
    slider.value = 0.0
    assert seen == [0.0]


@pytest.fixture(scope="module")
def sample_explorer():
    sft = load_sft()
    rm = DigitRM()
    with torch.no_grad():
        rm.w.fill_(0.3)
    return views.SampleExplorer({"SFT": sft, "also SFT": sft}, rm, 0.4, n_show=6, n_stats=128)


def test_sample_explorer_shows_prompts_answers_and_scores(sample_explorer):
    html = sample_explorer.update(1.0)
    assert html.count("<tr>") >= 6 + 2
    assert "+" in html and "gold" in html and "SFT" in html
    a, b = sample_explorer.update(0.0), sample_explorer.update(2.0)
    assert a != b
    times = [cpu_ms(sample_explorer.update, t) for t in sample_explorer.temperatures]
    assert np.median(times) < SLIDER_BUDGET_MS, times


def test_sample_explorer_is_deterministic(sample_explorer):
    sft = load_sft()
    again = views.SampleExplorer({"SFT": sft, "also SFT": sft}, sample_explorer_rm(), 0.4, n_show=6, n_stats=128)
    assert again.update(1.0) == sample_explorer.update(1.0)
    random.seed(123)
    torch.manual_seed(123)                                         # global RNGs do not matter
    assert views.SampleExplorer({"SFT": sft, "also SFT": sft}, sample_explorer_rm(), 0.4, n_show=6,
                                n_stats=128).update(1.0) == again.update(1.0)


def sample_explorer_rm():
    rm = DigitRM()
    with torch.no_grad():
        rm.w.fill_(0.3)
    return rm
