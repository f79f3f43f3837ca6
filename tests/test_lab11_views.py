"""Fast checks of Lab 11's plots and sliders (course_utils/views/lab11.py).

The views get the instructor's functions from the source notebook (course_staff.solutions.load_lab),
as a student's finished notebook would pass its own.
"""


import numpy as np
import pytest
import torch

from course_utils.views import lab11 as views
from course_utils.checks import needs

from course_staff.solutions import load_lab  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def lab():
    return load_lab("lab11")


@pytest.fixture(autouse=True)
def not_grading(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)


def _unfinished(*args, **kwargs):
    raise NotImplementedError()


def _frames(view, values):
    """The slider's frames at ``values`` (its speed is bench.py's: `make bench`, not a test): each a PNG, and
    as many different pictures as values."""
    frames = [view.update(v) for v in values]
    return all(f.startswith(PNG) for f in frames) and len(set(frames)) == len(values)


# ----------------------------------------------------------------------------- helpers
def test_entropy_handles_zeros_without_warnings():
    with np.errstate(all="raise"):
        assert views.entropy([0.5, 0.5, 0.0]) == pytest.approx(np.log(2))
        assert views.entropy(np.eye(3)[1]) == 0.0
        assert views.entropy(np.full((2, 4), 0.25), axis=1) == pytest.approx([np.log(4)] * 2)


# ----------------------------------------------------------------------------- log-probs (Task 1)
def test_logprob_table_scores_samples_with_the_students_functions(lab, capsys):
    view = views.LogprobTable(lab["model"], "7+5=", lab["response_logprobs"], lab["sequence_logprob"])
    view.show()
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + 8 and "log pi(y|x)" in lines[0]
    assert torch.isfinite(view.seq_logp).all()                    # padding is -inf, the sums are not
    assert torch.isneginf(view.tok_logp).any()
    probs = view.seq_logp.exp()
    assert ((probs > 0) & (probs <= 1)).all()


# ----------------------------------------------------------------------------- temperature
def test_temperature_view_caches_logits_and_samples(lab, monkeypatch):
    calls = []

    def counting_generate(*args, **kwargs):
        calls.append(kwargs["temperature"])
        return lab["generate"](*args, **kwargs)

    view = views.TemperatureView(lab["model"], "7+5=", counting_generate, n_samples=6)
    assert calls == []                                            # the constructor only keeps its arguments
    view.prepare()
    assert view.logits.first.shape == (15,) and view.logits.second.shape == (15, 15)
    monkeypatch.setattr(views, "two_token_logits", _unfinished)   # no model call after construction
    for t in (1.0, 0.5, 1.0, 0.0, 0.5):
        png = view.update(t)
        assert png.startswith(PNG)
    assert sorted(calls) == [0.0, 0.5, 1.0]                     # one generate call per temperature
    first, pair = view.distributions(0.7)
    assert first.shape == (15,) and pair.shape == (15, 15)
    assert first.sum() == pytest.approx(1) and pair.sum() == pytest.approx(1)
    view.update(0.0)
    assert view.h == (0.0, 0.0) and len(set(view.sampled)) == 1    # greedy: one answer, no entropy
    assert len(view.sampled) == 6 and "T = 0" in view.caption()
    assert view.h_first.shape == view.temperatures.shape
    assert np.all(np.diff(view.h_pair[view.temperatures >= 0.5]) > 0)  # entropy grows with T


def test_temperature_view_samples_are_seeded(lab):
    a = views.TemperatureView(lab["model"], "3+4=", lab["generate"], n_samples=16, seed=3).prepare().samples(2.0)
    b = views.TemperatureView(lab["model"], "3+4=", lab["generate"], n_samples=16, seed=3).prepare().samples(2.0)
    assert a == b and len(a) == 16


def test_temperature_view_without_generate(lab):
    view = views.TemperatureView(lab["model"], "7+5=")
    assert view.update(1.3).startswith(PNG) and view.sampled == []
    assert "samples" not in view.caption()


def test_temperature_slider_draws_a_frame_per_temperature(lab):
    view = views.TemperatureView(lab["model"], "7+5=", lab["generate"])
    assert _frames(view, [0.3, 0.6, 0.9, 1.2, 1.8, 2.4, 3.0, 0.0])


# ----------------------------------------------------------------------------- beta
def test_beta_view_curves_and_update(lab):
    view = views.BetaView(lab["ref_first"], lab["ref_second"], lab["rewards"], lab["tilted_optimum"],
                          lab["kl_objective"]).prepare()
    n = len(view.betas)
    assert view.curves.shape == (n, 4)
    assert np.allclose(view.J, view.beta_log_Z, atol=1e-9)        # J(pi*) = beta log Z
    assert np.all(view.kl >= -1e-12) and np.all(np.diff(view.kl) <= 1e-12)  # KL falls as beta grows
    assert view.mean_r[0] == pytest.approx(1.0, abs=1e-6)          # tiny beta: always the answer
    assert view.update(0.3).startswith(PNG)
    assert view.pi_star.shape == (15, 15) and view.pi_star.sum() == pytest.approx(1)
    assert "beta = 0.3" in view.caption()
    assert _frames(view, [0.02, 0.05, 0.2, 0.5, 2.0, 5.0, 20.0])


# ----------------------------------------------------------------------------- KL experiment
def test_kl_experiment_shows_the_known_ordering(lab):
    exp = views.KLEstimatorExperiment(lab["model"], "7+5=", lab["kl_estimators"], temperatures=(1.1, 2.0),
                                      n_samples=50_000).prepare()
    near, far = exp.rows
    assert near["kl"] < far["kl"]
    for row in exp.rows:                                           # k1 and k3 unbiased (4 standard errors)
        for k in ("k1", "k3"):
            assert abs(row[k]["bias"]) < 4 * row[k]["se"] + 1e-3, (row["T"], k, row[k])
    assert far["k2"]["bias"] > 0.5                                 # k2 biased once the policies drift apart
    assert near["k3"]["std"] < near["k1"]["std"] / 3               # k3 far less noisy near pi_ref
    again = views.KLEstimatorExperiment(lab["model"], "7+5=", lab["kl_estimators"], temperatures=(1.1, 2.0),
                                        n_samples=50_000).prepare()
    assert again.rows == exp.rows                                  # seeded
    table = exp.table()
    assert "k3 bias" in table and len(table.splitlines()) == 2 + 2 + 1
    assert exp.figure().startswith(PNG)


def test_kl_experiment_exact_kl_is_the_enumerated_sum(lab):
    """The exact KL the estimators are judged against: sum over the 225 responses of p log(p / q)."""
    from course_utils.twotoken import joint, two_token_logits, two_token_policy

    exp = views.KLEstimatorExperiment(lab["model"], "7+5=", lab["kl_estimators"], temperatures=(1.5,),
                                      n_samples=1000).prepare()
    logits = two_token_logits(lab["model"], "7+5=")
    p, q = joint(*two_token_policy(logits, 1.5)), joint(*two_token_policy(logits, 1.0))
    s = p > 0
    assert exp.rows[0]["kl"] == pytest.approx(float((p[s] * np.log(p[s] / q[s])).sum()), rel=1e-12)


def test_while_grading_no_view_calls_the_students_functions(lab, monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    calls = []

    def counting(*args, **kwargs):
        calls.append(1)
        return lab["kl_estimators"](*args, **kwargs)

    exp = views.KLEstimatorExperiment(lab["model"], "7+5=", counting)
    assert exp.show() is None and calls == [] and not hasattr(exp, "rows")
    views.LogprobTable(lab["model"], "7+5=", _unfinished, _unfinished).show()      # no "Finish ..." either
    assert capsys.readouterr().out == ""


# ----------------------------------------------------------------------------- soft values
def test_soft_value_view(lab):
    view = views.SoftValueView(lab["ref_first"], lab["ref_second"], lab["rewards"],
                               lab["token_level_optimum"], lab["tilted_optimum"]).prepare()
    assert view.max_gap(0.05) < 1e-12
    lo, hi = view.limits["V0"]
    assert lo - 1e-9 <= view.V0_curve.min() and view.V0_curve.max() <= hi + 1e-9
    assert np.all(np.diff(view.V0_curve) <= 1e-12)                 # soft max falls towards the mean
    assert view.update(1.0).startswith(PNG) and "largest gap" in view.caption()
    assert view.first_star.sum() == pytest.approx(1)
    assert _frames(view, [0.02, 0.1, 0.5, 2.0, 10.0, 50.0])


# ----------------------------------------------------------------------------- friendly messages
@pytest.mark.parametrize("make, task", [
    (lambda lab: views.TemperatureView(lab["model"], "7+5=", lambda *a, **k: lab["generate"](
        *a, sampler=_unfinished, **k)), "Task 2 (sample_with_temperature)"),
    (lambda lab: views.BetaView(lab["ref_first"], lab["ref_second"], lab["rewards"], _unfinished,
                                lab["kl_objective"]), "Task 4 (tilted_optimum and kl_objective)"),
    (lambda lab: views.BetaView(lab["ref_first"], lab["ref_second"], lab["rewards"], lab["tilted_optimum"],
                                _unfinished), "Task 4 (tilted_optimum and kl_objective)"),
    (lambda lab: views.KLEstimatorExperiment(lab["model"], "7+5=", _unfinished, n_samples=100),
     "Task 3 (kl_estimators)"),
    (lambda lab: views.SoftValueView(lab["ref_first"], lab["ref_second"], lab["rewards"], _unfinished,
                                     lab["tilted_optimum"]), "Task 5 (token_level_optimum)"),
    (lambda lab: views.LogprobTable(lab["model"], "7+5=", _unfinished, lab["sequence_logprob"]),
     "Task 1 (response_logprobs and sequence_logprob)"),
    (lambda lab: views.LogprobTable(lab["model"], "7+5=", lab["response_logprobs"], _unfinished),
     "Task 1 (response_logprobs and sequence_logprob)"),
], ids=["temperature", "beta_tilted", "beta_objective", "kl", "soft_values", "logprobs_1a", "logprobs_1b"])
def test_unfinished_task_prints_one_line(lab, capsys, make, task):
    with needs(task):
        make(lab).show()
    out = capsys.readouterr()
    assert out.out == f"Finish {task} first, then run this cell again.\n" and out.err == ""


def test_slider_reports_a_failing_function_in_its_caption(lab):
    armed = {"on": False}

    def fails_later(ref, rewards, beta):
        if armed["on"]:
            raise ValueError("overflow at large beta")
        return lab["tilted_optimum"](ref, rewards, beta)

    view = views.BetaView(lab["ref_first"], lab["ref_second"], lab["rewards"], fails_later, lab["kl_objective"])
    view.show()
    slider, note, _ = view.widget.children
    assert "E_pi*[r]" in note.value
    armed["on"] = True
    slider.value = 20.0
    assert "ValueError: overflow at large beta" in note.value and "beta = 20" in note.value


def test_show_draws_nothing_while_grading(lab, monkeypatch, capsys):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    view = views.TemperatureView(lab["model"], "7+5=", lab["generate"])
    assert view.show() is None and view.frame is None and not hasattr(view, "widget")
    assert capsys.readouterr().out == ""


def test_views_use_only_seeded_randomness(lab):
    torch.manual_seed(0)
    a = views.TemperatureView(lab["model"], "9+9=", lab["generate"]).prepare().samples(1.5)
    torch.manual_seed(1)
    b = views.TemperatureView(lab["model"], "9+9=", lab["generate"]).prepare().samples(1.5)
    assert a == b


def test_kl_estimators_on_both_sides_of_one_are_exact(lab):
    """KLEstimatorBothSides: exact (enumerated) spread of k1 and k3; k3 is the quieter one just above
    and below T = 1 and by far the noisier one at T = 0.4; the table and the plot render."""
    from course_utils.tinylm import load_sft

    view = views.KLEstimatorBothSides(load_sft(), "7+5=", lab["kl_estimators"]).prepare()
    rows = {r["T"]: r for r in view.rows}
    assert min(rows) < 0.5 and max(rows) > 2
    for t in (0.95, 1.05, 1.5):
        assert rows[t]["std"]["k3"] < rows[t]["std"]["k1"]
    assert rows[0.4]["std"]["k3"] > 100 * rows[0.4]["std"]["k1"]
    for r in view.rows:                                   # both estimators are unbiased: exact means
        assert r["mean"]["k1"] == pytest.approx(1.0, rel=1e-6) and r["mean"]["k3"] == pytest.approx(1.0, rel=1e-6)
    assert "0.40" in view.table() and view.figure().startswith(PNG)
    with needs("Task 3"):
        views.KLEstimatorBothSides(load_sft(), "7+5=", _unfinished).prepare()
        raise AssertionError("an unfinished Task 3 must stop the view")
