"""The shipped reference curves (course_utils/data/lab12_reference_curves.json) still match the code.

Lab 12 overlays these curves in grey on a student's own sweep; they are made by
benchmarks/make_reference_curves.py. This test redoes what that script does for one configuration
(the notebook's default run: beta 0.1, PPO seed 0), with the same functions, and compares: the
reward model and the training configuration recorded in the file's meta, then every iteration of
the run. Runs are bit-identical for a fixed torch version and thread count, so any difference means
the notebook, course_utils or the SFT checkpoint changed since the file was made.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import make_reference_curves as reference  # noqa: E402

from course_staff.solutions import load_lab  # noqa: E402
from course_utils.views.lab12 import load_reference_curves  # noqa: E402

pytestmark = pytest.mark.slow

BETA, SEED = 0.1, 0
FIX = "rerun `python benchmarks/make_reference_curves.py` and commit the file"


@pytest.fixture(scope="module")
def made():
    lab = load_lab("lab12")
    return lab, reference.reference_cache(lab)


@pytest.fixture(scope="module")
def shipped():
    ref = load_reference_curves()
    assert ref is not None, f"the reference curves are missing: {FIX}"
    return ref


def test_meta_matches_how_the_runs_are_made(made, shipped):
    meta = reference.reference_meta(*made)
    for key, value in meta.items():
        stored = shipped["meta"].get(key)
        if key in ("rm_weights", "rm_offset"):
            same = stored == pytest.approx(value, abs=2e-6)
        else:
            same = stored == value
        assert same, f"reference curves: meta[{key!r}] is {stored!r} in the file, {value!r} now: {FIX}"


def test_the_default_run_matches_its_reference_curve(made, shipped):
    now = reference.reference_run(*made, BETA, SEED)
    stored = shipped["runs"][BETA][reference.SEEDS.index(SEED)]
    for key in reference.KEYS:
        assert len(now[key]) == len(stored[key]), f"{key}: {len(stored[key])} iterations stored, {len(now[key])} now"
        diffs = [abs(a - b) for a, b in zip(now[key], stored[key])]
        worst = max(range(len(diffs)), key=diffs.__getitem__)
        assert diffs[worst] <= 1e-4, (
            f"reference curves drifted: {key} at iteration {worst} of beta {BETA}, seed {SEED} is "
            f"{stored[key][worst]} in the file but {now[key][worst]} from the code now: {FIX}")
