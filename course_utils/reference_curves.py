"""The course's reference sweep of Lab 12: train_rlhf's histories over SWEEP_BETAS and a few seeds,
shipped as plain JSON (data only, no code) and drawn grey behind a student's runs (CurveExplorer).

    ref = load_reference_curves()       # {"meta": {...}, "runs": {beta: [history per seed]}}, or None

Made by ``python -m benchmarks.make_reference_curves`` (which writes REFERENCE_PATH).
"""

import json
from pathlib import Path

REFERENCE_PATH = Path(__file__).resolve().parent / "data" / "lab12_reference_curves.json"


def load_reference_curves(path=REFERENCE_PATH):
    """The course's reference sweep (data only): {"meta": {...}, "runs": {beta: [history per seed]}}
    with float keys; None if the file is missing."""
    path = Path(path)
    if not path.exists():
        return None
    raw = json.loads(path.read_text())
    return {"meta": raw["meta"], "runs": {float(b): runs for b, runs in raw["runs"].items()}}


__all__ = ["REFERENCE_PATH", "load_reference_curves"]
