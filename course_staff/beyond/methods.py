"""Beyond PPO's methods: Lab 12's PPO and Lab 13's DPO and GRPO, on Lab 12's world of any seed.

Staff-only, like its notebook (notebooks/beyond_ppo.ipynb). Every method is a lab's reference solution,
loaded with ``lab(name)`` (course_staff.solutions.load_lab): PPO is Lab 12's ``train_rlhf``; DPO and GRPO
are Lab 13's ``train_dpo`` and ``train_grpo``, with Lab 13's ``DPOConfig`` and ``GRPOConfig`` (their
defaults are Lab 13's). This module adds only what the notebook needs beyond the labs:

    world = make_world(seed=0)                  # Lab 12's world of a seed (Lab 13's is seed 0, saved as data)
    seen = as_lab13(world)                      # the same world as Lab 13 sees it: its pairs, score(out)
    policy, hist = ppo_on(world, beta)                               # Lab 12's train_rlhf at this beta
    policy, hist = dpo_on(world, lab("lab13")["DPOConfig"]())        # Lab 13's train_dpo, its defaults
    policy, hist = grpo_on(world, lab("lab13")["GRPOConfig"](), kl_scaled=True)     # Lab 13's train_grpo

Each run's history also holds "wall" and "cpu", its seconds of wall-clock and of CPU time (one thread: the
CPU time is the wall-clock time of a quiet machine); GRPO's also "cpu_at", the CPU seconds after each
iteration. ``kl_scaled`` is the one factor of GRPO's 2 x 2 ablation that Lab 13 lacks: whether beta's
term is on the score's scale, divided by the group's std with the score (see ``grpo_on``).
"""

import contextlib
import dataclasses
import inspect
import random
import time

import torch

from course_staff.edition import build_lab13_world
from course_staff.solutions import load_lab
from course_utils import lab13_world, world
from course_utils.world import N_PROMPTS

_LABS = {}


def lab(name):
    """The namespace of a lab's reference solution, loaded once per process.

    Loading runs the lab's cells, some of which sample: the random states of torch and of Python are
    restored afterwards, so a run that loads a lab half-way is the same run as one that does not.
    """
    if name not in _LABS:
        state = random.getstate()
        with torch.random.fork_rng():
            _LABS[name] = load_lab(name)
        random.setstate(state)
    return _LABS[name]


def k3(logp, ref_logp):
    """Lab 11's k3 estimator of KL(pi || pi_ref) per token (its reference ``kl_estimators``)."""
    return lab("lab11")["kl_estimators"](logp, ref_logp)[2]


class Clock:
    """Wall-clock and CPU seconds since it was made: ``clock.read() -> {"wall": s, "cpu": s}``."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self):
        return {"wall": time.perf_counter() - self.wall, "cpu": time.process_time() - self.cpu}


@contextlib.contextmanager
def one_thread():
    """Run torch on one thread inside the block: the model is so small that more threads are slower,
    and results are bit-identical only for a fixed thread count."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# ----------------------------------------------------------------------------- Lab 12's world, and Lab 13's view of it
def make_world(seed=0, n_prompts=N_PROMPTS, kappa=None):
    """Lab 12's world of ``seed`` (``course_utils.world``; seed 0 is the notebook's), its reward model
    fit by the reference ``train_reward_model``. ``kappa`` is the labeler's confidence."""
    return world.make_world(lab("lab12")["train_reward_model"], seed, n_prompts=n_prompts, kappa=kappa)


def as_lab13(world):
    """Lab 12's ``world`` as Lab 13's drivers see it: a ``course_utils.lab13_world.World`` (sft, rm,
    rm_offset, score(out), train_pairs, held_pairs, the rankings; no PPO curves), its pairs made from the
    world's rankings as ``make lab13-data`` makes them (Lab 12's ranking_to_pairs, pairs of two identical
    responses left out: their DPO margin is 0 whatever the policy)."""
    to_pairs = lab("lab12")["ranking_to_pairs"]
    (train_pairs, train_rankings), (held_pairs, held_rankings) = (
        lab13_world._part(build_lab13_world._part(data, to_pairs)) for data in (world.train_data, world.held_out))
    return lab13_world.World(world.sft, world.rm, world.rm_offset, train_pairs, held_pairs, train_rankings,
                             held_rankings, ppo_curves=None)


def timed(train, *args, **kwargs):
    """``train(*args, **kwargs) -> (policy, history)``, with history["wall"] and history["cpu"] its seconds."""
    clock = Clock()
    policy, hist = train(*args, **kwargs)
    hist.update(clock.read())
    return policy, hist


# ----------------------------------------------------------------------------- PPO: Lab 12's train_rlhf
def ppo_on(world, beta, **overrides):
    """Lab 12's train_rlhf at this beta, with its defaults (120 iterations of 64 prompts) unless
    overridden, seeded by the world's seed."""
    ns = lab("lab12")
    cfg = ns["RLHFConfig"](**{"beta": beta, "seed": world.seed, **overrides})
    return timed(ns["train_rlhf"], world.sft, world.rm, world.rm_offset, cfg)


# ----------------------------------------------------------------------------- DPO: Lab 13's train_dpo
def dpo_on(world, cfg, after=None):
    """Lab 13's train_dpo on the pairs of the world's rankings (``as_lab13``), with Lab 13's DPOConfig
    ``cfg``; its history also holds "pairs", how many pairs it trained on."""
    lab13 = as_lab13(world)
    policy, hist = timed(lab("lab13")["train_dpo"], lab13, cfg, after)
    hist["pairs"] = len(lab13.train_pairs["rows"])
    return policy, hist


# ----------------------------------------------------------------------------- GRPO: Lab 13's train_grpo
class GroupScaledBeta(float):
    """beta on the score's scale, for k3 in Lab 13's grpo_loss: a float (beta itself, wherever the config
    or a progress bar reads it) that, multiplied with k3 (N, n), weighs response i's row by
    beta / (the std of its group's scores + group_advantages' eps): what the score's group normalization
    divides by. ``watching(score_fn)`` is score_fn that sets those stds from each iteration's scores
    (Lab 13's grpo_iteration scores a rollout before its first loss)."""

    def __new__(cls, beta, k):
        self = super().__new__(cls, beta)
        self.k, self.weights = k, None
        return self

    def watching(self, score_fn):
        eps = inspect.signature(lab("lab13")["group_advantages"]).parameters["eps"].default

        def scored(out):
            scores = score_fn(out)
            std = scores.view(-1, self.k).std(1, keepdim=True) + eps                  # (B, 1)
            self.weights = (float(self) / std).expand(-1, self.k).reshape(-1, 1)      # (B k, 1)
            return scores
        return scored

    def __mul__(self, other):
        return self.weights * other if torch.is_tensor(other) else float(self) * other

    __rmul__ = __mul__


def cell(cfg, score_fn, kl_scaled=None):
    """(Lab 13's GRPOConfig, score function) that run one cell of the 2 x 2 with Lab 13's train_grpo:
    where the KL goes (``cfg.kl_in``) x whether beta's term is on the score's scale (``kl_scaled``; None:
    as Lab 13 has it, which is as published: "reward" on the scale, the penalized score normalized as a
    whole; "loss" off it, beta k3 against advantages of unit size). The other two cells:
    "reward" off the scale: the score normalized on its own, then beta's term subtracted from it (Lab 13's
    "reward" subtracts it before its group statistics: with scale=False these only centre it again);
    "loss" on the scale: beta k3 divided by the group's std, as the score (``GroupScaledBeta``).
    Without std scaling (``cfg.scale`` False) nothing is divided and the factor changes nothing."""
    if kl_scaled is None or kl_scaled == (cfg.kl_in == "reward") or not cfg.scale:
        return cfg, score_fn
    if cfg.kl_in == "reward":
        normalized = lambda out: lab("lab13")["group_advantages"](score_fn(out).view(-1, cfg.k)).flatten()  # noqa: E731
        return dataclasses.replace(cfg, scale=False), normalized
    beta = GroupScaledBeta(cfg.beta, cfg.k)
    return dataclasses.replace(cfg, beta=beta), beta.watching(score_fn)


def grpo_on(world, cfg, kl_scaled=None):
    """Lab 13's train_grpo from the world's SFT model, scored by its reward model minus the offset, with
    Lab 13's GRPOConfig ``cfg`` and the cell ``kl_scaled`` of the 2 x 2 (``cell``). Each iteration draws
    the prompts train_rlhf draws at the same iteration (make_batch with a random.Random(seed)). Its
    history also holds "cpu_at", the CPU seconds after each iteration."""
    lab13 = as_lab13(world)
    cfg, score_fn = cell(cfg, lab13.score, kl_scaled)
    clock = Clock()
    policy, hist = timed(lab("lab13")["train_grpo"], lab13, cfg, score_fn,
                         after=lambda policy: clock.read()["cpu"], after_every=1)
    hist["cpu_at"] = hist.pop("after")
    return policy, hist


__all__ = ["N_PROMPTS", "lab", "k3", "Clock", "one_thread", "make_world", "as_lab13", "timed", "ppo_on",
           "dpo_on", "GroupScaledBeta", "cell", "grpo_on"]
