"""The labs' lessons on one seed, so they cannot break silently between full `make science` runs.

Runs every science experiment marked ``smoke`` (benchmarks/science_lab*.py: Lab 11's KL estimators
and optimum, Lab 12's reward model, KL penalty and health signals; about 45 s of CPU) on seed 0, with
the reference solution, and checks each criterion and each of its negative controls. `make science` runs all of
them over 5 seeds.
"""

import pytest

from benchmarks import science  # noqa: E402

pytestmark = pytest.mark.slow

SEED = 0
SMOKE = [e for e in science.experiments() if e.smoke]


@pytest.fixture(scope="module")
def verdicts():
    results = science.run([SEED], [e.name for e in SMOKE])
    return {(v.experiment, v.criterion.name): v for v in science.judge(SMOKE, results)}


def test_the_smoke_set_covers_both_labs():
    assert {e.name.split(".")[0] for e in SMOKE} == {"lab11", "lab12"}


@pytest.mark.parametrize("key", [(e.name, c.name) for e in SMOKE for c in e.criteria], ids="{0[0]}.{0[1]}".format)
def test_criterion_holds_and_its_controls_fail(verdicts, key):
    v = verdicts[key]
    c = v.criterion
    assert v.met[0], (f"{key[0]}.{c.name} ({c.claim}) missed on seed {SEED}: {c.fmt.format(v.values[0])}, "
                      f"expected {c.threshold_text()}; the lesson no longer shows with the reference solution")
    for label, values in v.controls.items():
        assert not c.meets(values[0]), (
            f"{key[0]}.{c.name}: its negative control ({label}) meets it too: {c.fmt.format(values[0])} "
            f"{c.threshold_text()}, so the criterion does not test what it claims")
