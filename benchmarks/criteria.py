"""What a science experiment is (science.py runs them; science_lab11/12/beyond.py define them).

An *experiment* is ``run_seed(seed) -> {figure: float}`` and the *criteria* read from those figures.
A criterion names one figure, a threshold that follows from the sentence it backs, and one or more
*negative controls*: the same figure after an ablation of exactly the mechanism the sentence names
(the controller's sign flipped, the rankings shuffled, the KL penalty at another beta, ...).

Every experiment also reports the *inputs* of each figure: ``run_seed`` returns under the key
"inputs" a dict {figure: {input: value}} (which beta, which reward model, which rankings...). A
control must differ from its criterion in exactly the criterion's ``mechanism`` input (inputs whose
name starts with "seed" are nuisance inputs, ignored), which tests/test_science.py checks on every
smoke run: a control that changes something else, or more, fails there.

``SHORT``: the factor by which a smoke run shortens every training run (set by science.run).
"""

import dataclasses
from typing import Callable

SHORT = 1            # 1: full runs (make science); 4 in the smoke runs of make test


def short(n, least=1):
    """``n`` iterations, epochs or draws, divided by SHORT in a smoke run (at least ``least``)."""
    return max(least, n // SHORT)


@dataclasses.dataclass(frozen=True)
class Criterion:
    """One claim, read from an experiment's figures.

    ``key`` is the figure; the claim is met when it is >= threshold (``above``) or <= threshold.
    ``controls`` pairs a label with the key of the same figure under a negative control; each
    control must fail the threshold, and differ from the criterion in the input ``mechanism`` only.
    """
    name: str
    claim: str
    key: str
    threshold: float
    controls: tuple                    # ((label, key), ...)
    mechanism: str = ""                # the input every control changes, and nothing else
    above: bool = True
    fmt: str = "{:.3f}"

    def meets(self, value):
        return value >= self.threshold if self.above else value <= self.threshold

    def threshold_text(self):
        return f"{'>=' if self.above else '<='} {self.fmt.format(self.threshold)}"


@dataclasses.dataclass(frozen=True)
class Experiment:
    """``run_seed(seed) -> {key: float, "inputs": {key: {input: value}}}`` and the criteria read from it.

    ``smoke``: cheap enough at full length (well under a minute of CPU for one seed) for the capability
    matrix (tests/verdicts.py), which compares its full-length verdicts across CPU kernels and threads.
    """
    name: str
    run_seed: Callable
    criteria: tuple
    smoke: bool = False


def changed_inputs(inputs, key, control_key):
    """The names of the inputs in which figure ``control_key`` differs from figure ``key`` (nuisance
    inputs, named seed..., left out)."""
    a, b = inputs[key], inputs[control_key]
    return {k for k in set(a) | set(b) if not k.startswith("seed") and a.get(k) != b.get(k)}
