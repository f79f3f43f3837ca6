"""What Lab 12's experiments train, each thing once: the reward model and its offset, then PPO runs.

    runs = RunCache(sft)                          # the notebook's setup cell: trains nothing
    runs.fit_reward_model(train_reward_model)     # Part A: the RM and its offset (forgets old runs)
    runs.use(train_rlhf)                          # Part B: the training loop (forgets old runs)
    policy, history = runs.run(RLHFConfig(beta=0.0))      # trained once, then from the cache
    results = runs.run_all([RLHFConfig(), RLHFConfig(beta=0.0)])   # the new ones side by side
    sweep = runs.sweep(RLHFConfig())              # {beta: (policy, history)} over SWEEP_BETAS

The lab's own functions do the work; this module only remembers their results, so re-drawing a
plot never re-trains. Runs not trained yet that a cell needs together (``run_all``, ``sweep``) train
side by side, one process each, on the laptop's cores (``course_utils.parallel``: the same results
as one after another; serial while grading). What waits for an unfinished part raises ``checks.Unfinished``, which the
notebook's ``needs(...)`` turns into "Finish ... first".

The sweep every consumer of the runs shares (views, benchmarks, reference curves) is here:
``SWEEP_BETAS``. What train_rlhf logs per iteration (``METRICS``) is ``course_utils.evaluation``'s;
the reward model's world (data sizes, seeds) is ``course_utils.world``'s.
"""

import dataclasses

from course_utils.explore import Unfinished
from course_utils.evaluation import METRICS
from course_utils.parallel import run_all
from course_utils.world import make_world

SWEEP_BETAS = (0.0, 0.05, 0.07, 0.1, 0.2)                        # the beta sweep of Experiments 5, 6, 8
# Experiment 9's run B: the RLHFConfig fields it changes from run A's defaults. Defined here, not in the
# notebook's cell, so that no cell's source answers Question 5 (which setting did run B change?).
RUN_B = {"lr": 1e-2}
PART_A = "Part A (Tasks 1 and 2, then the cell that fits the reward model)"


class RunCache:
    """The reward model, its offset, and one ``train_fn(sft, rm, rm_offset, cfg)`` run per config.

    Attributes: ``sft`` (the starting policy and KL reference), ``world`` (Lab 12's world, None until
    ``fit_reward_model``), ``rm`` and ``rm_offset`` (the world's, None until then), ``runs``
    ({config key: (policy, history)}).
    """

    def __init__(self, sft_model):
        self.sft, self.world, self.rm, self.rm_offset = sft_model, None, None, None
        self.train_fn = None
        self.runs = {}

    def fit_reward_model(self, train_fn):
        """Build the notebook's world (``world.make_world``) with ``train_fn`` as its train_reward_model,
        from ``sft``; returns its reward model."""
        self.world, self.rm, self.rm_offset = None, None, None
        world = make_world(train_fn, sft=self.sft)
        self.world, self.rm, self.rm_offset = world, world.rm, world.rm_offset
        self.runs.clear()
        return world.rm

    def reward(self):
        """(rm, rm_offset), or ``Unfinished`` while Part A has made no reward model."""
        if self.rm is None:
            raise Unfinished(PART_A)
        return self.rm, self.rm_offset

    def use(self, train_fn):
        """Train PPO runs with ``train_fn`` (the lab's train_rlhf) from now on; forgets earlier runs."""
        self.train_fn = train_fn
        self.runs.clear()

    @staticmethod
    def key(cfg):
        return tuple(sorted(dataclasses.asdict(cfg).items()))

    def run(self, cfg):
        """(policy, history) of the run with configuration ``cfg`` (trained on first use)."""
        rm, rm_offset = self.reward()
        if self.train_fn is None:
            raise RuntimeError("no training loop yet: run the cell with runs.use(train_rlhf) first")
        return self.run_all([cfg])[0]

    def run_all(self, cfgs, workers=None):
        """[(policy, history)] of each configuration of ``cfgs``: the ones not trained yet are trained
        side by side (``parallel.run_all``, up to ``workers`` processes), each with its progress bar."""
        rm, rm_offset = self.reward()
        if self.train_fn is None:
            raise RuntimeError("no training loop yet: run the cell with runs.use(train_rlhf) first")
        todo = list({self.key(c): c for c in cfgs if self.key(c) not in self.runs}.values())

        def keep(i, result):
            self.runs[self.key(todo[i])] = result

        run_all(self.train_fn, [(self.sft, rm, rm_offset, c) for c in todo], workers=workers, on_result=keep)
        return [self.runs[self.key(c)] for c in cfgs]

    def sweep(self, base_cfg, betas=SWEEP_BETAS, workers=None):
        """{beta: (policy, history)}: ``base_cfg`` at each beta (``run_all``)."""
        cfgs = [dataclasses.replace(base_cfg, beta=b) for b in betas]
        return dict(zip(betas, self.run_all(cfgs, workers)))


__all__ = ["METRICS", "SWEEP_BETAS", "RUN_B", "RunCache"]
