"""The shipped reference curves (course_utils/data/lab12_reference_curves.json) still come from the
code, on any machine.

Lab 12 overlays these curves in grey on a student's own sweep; benchmarks/make_reference_curves.py
makes them. The slow tests redo the notebook's default run (beta 0.1, PPO seed 0) with the same
functions and compare it as tests/reference_drift.py explains: the reward model at a float32
relative tolerance, the first iterations one by one, the end of the run within the reference seeds'
band. The same code on another CPU passes; a one-line change to the training (GAE's lambda) fails.
The fast tests check the comparison itself on made-up curves.
"""

import pytest

from tests import reference_drift as drift

ITERS = 30


def curve(value=0.5, slope=0.0, n=ITERS):
    return {k: [round(value + slope * i, 4) for i in range(n)] for k in drift.reference.KEYS}


SEEDS = [curve(0.50), curve(0.52), curve(0.47)]


def test_the_same_curve_passes():
    assert drift.run_problems(curve(0.50), SEEDS, 0) == []


def test_a_last_bit_difference_in_the_kl_passes_and_a_real_one_fails():
    now = curve(0.50)
    now["kl"][3] += 7e-4                      # the largest early KL difference seen between two CPUs
    assert drift.run_problems(now, SEEDS, 0) == []
    now["kl"][3] += 1e-2
    assert any("kl at iteration 3" in p for p in drift.run_problems(now, SEEDS, 0))


def test_an_early_change_in_a_sampled_metric_fails():
    now = curve(0.50)
    now["gold"][drift.EARLY - 1] += 1 / 64     # one response of 64 scored differently
    assert any("gold at iteration" in p for p in drift.run_problems(now, SEEDS, 0))


def test_late_divergence_within_the_seed_band_passes_outside_fails():
    now = curve(0.50)
    for it in range(drift.EARLY, ITERS):      # another machine: its own way after the early iterations
        now["gold"][it] = 0.46 + 0.001 * it
    assert drift.run_problems(now, SEEDS, 0) == []
    for it in range(drift.EARLY, ITERS):
        now["gold"][it] = 0.80
    assert any("gold over the last third" in p for p in drift.run_problems(now, SEEDS, 0))


def test_reward_model_weights_compare_relative_to_their_float32_scale():
    meta = {"rm_weights": [0.288832, 0.5], "rm_offset": 0.37}
    assert drift.meta_problems({"rm_weights": [0.288829, 0.5], "rm_offset": 0.37}, meta) == []
    assert drift.meta_problems({"rm_weights": [0.2889, 0.5], "rm_offset": 0.37}, meta)


@pytest.mark.slow
def test_the_file_records_where_it_was_made():
    made_on = drift.shipped()["meta"].get("made on")
    assert made_on and {"processor", "capability", "threads", "torch"} <= set(made_on), \
        f"the reference curves do not record the machine that made them: {drift.FIX}"


@pytest.mark.slow
def test_the_default_run_matches_its_reference_curve():
    problems = drift.default_run_problems()
    assert not problems, "the reference curves drifted from the code:\n  " + "\n  ".join(problems) + f"\n{drift.FIX}"


@pytest.mark.slow
def test_a_one_line_change_to_gae_fails_the_check():
    """The control: GAE's lambda 0.95 -> 0.9 (RLHFConfig's default, one line) is caught in the
    first iterations."""
    problems = drift.default_run_problems(early_only=True, lam=0.9)
    assert problems, "a run with GAE's lambda 0.9 instead of 0.95 matches the reference curve: the check is blind"
