"""What Lab 13's experiments train, each run once, with the lab's own drivers, and their exact referee.

    runs = Lab13Runs(world)                             # trains nothing, judges nothing yet
    policy = runs.policy(train_dpo, DPOConfig(beta=0.1))            # trained once, then from the cache
    policy, hist = runs.run(train_dpo, DPOConfig(beta=0.1))         # hist["after"]: a copy per evaluation
    results = runs.run_all([(train_dpo, DPOConfig()), (train_grpo, GRPOConfig())])   # new ones side by side
    runs.referee                                        # a course_utils.referee.Referee of the world (built once)

A driver is any ``driver(world, cfg, after=None) -> (policy, history)``, e.g. the lab's ``train_dpo`` and
``train_grpo``; ``after`` is passed a function that keeps a copy of the policy at each evaluation (a
TinyLM is small). Re-drawing a view never re-trains. Runs that a view needs together and that are not
trained yet (``run_all``) train side by side, one process each, on the laptop's cores
(``course_utils.parallel``: the same results as one after another, as each driver seeds its own run;
serial while grading).
"""

import copy
import dataclasses

from course_utils.parallel import run_all
from course_utils.referee import Referee


def snapshot(policy):
    """A frozen copy of a policy as it is now. A copy, not a new TinyLM: making one draws its initial
    weights from torch's random state, and a run that keeps snapshots must sample what one without does."""
    return copy.deepcopy(policy).requires_grad_(False)


class Lab13Runs:
    """The world, one run per (driver, configuration), and the referee (built on first use)."""

    def __init__(self, world):
        self.world, self.runs, self._referee = world, {}, None

    @property
    def referee(self):
        if self._referee is None:
            self._referee = Referee(self.world.sft, self.world.rm, self.world.rm_offset)
        return self._referee

    @staticmethod
    def key(driver, cfg):
        return getattr(driver, "__qualname__", repr(driver)), tuple(sorted(dataclasses.asdict(cfg).items()))

    def run(self, driver, cfg):
        """(policy, history) of ``driver(world, cfg, after=snapshot)``, trained on first use: history["after"]
        holds a copy of the policy at each of the driver's evaluations (each epoch of DPO)."""
        k = self.key(driver, cfg)
        if k not in self.runs:
            self.runs[k] = self._train(driver, cfg)
        return self.runs[k]

    def run_all(self, specs, workers=None):
        """[(policy, history)] of each (driver, cfg) of ``specs``, as ``run`` gives them: the ones not
        trained yet are trained side by side (``parallel.run_all``, up to ``workers`` processes)."""
        specs = [tuple(spec) for spec in specs]
        todo = list({self.key(*spec): spec for spec in specs if self.key(*spec) not in self.runs}.values())

        def keep(i, result):
            self.runs[self.key(*todo[i])] = result

        run_all(self._train, todo, workers=workers, on_result=keep)
        return [self.runs[self.key(*spec)] for spec in specs]

    def _train(self, driver, cfg):
        return driver(self.world, cfg, after=snapshot)

    def policy(self, driver, cfg):
        """The trained policy of ``driver(world, cfg)``."""
        return self.run(driver, cfg)[0]


__all__ = ["snapshot", "Lab13Runs"]
