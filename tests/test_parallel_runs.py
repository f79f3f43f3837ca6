"""Lab 12's independent runs side by side (course_utils/parallel.py, RunCache.run_all): the same
results as one after another, bit for bit; a notebook's own (unpicklable) functions; an error raised
as without workers; serial while grading; a progress bar per run."""

import dataclasses
import os

import pytest
import torch

from course_staff.solutions import load_lab
from course_utils import parallel, runtime
from course_utils.prefs import DigitRM
from course_utils.runs import RunCache
from course_utils.tinylm import load_sft
from tests.requirements import missing

@pytest.fixture
def fork():
    if not parallel.can_fork():
        missing("fork", "no fork on this system: runs are serial")


needs_fork = pytest.mark.usefixtures("fork")


@pytest.fixture(scope="module")
def lab():
    return load_lab("lab12")


def digit_rm(weight=0.3):
    rm = DigitRM()
    with torch.no_grad():
        rm.w.fill_(weight)
    return rm


def small_configs(lab):
    cfg = lab["RLHFConfig"](iters=6, batch=16)
    return [dataclasses.replace(cfg, beta=b) for b in (0.0, 0.1)] + [dataclasses.replace(cfg, beta=0.05, ptx_coef=1.0)]


def cache(lab):
    runs = RunCache(load_sft())
    runs.rm, runs.rm_offset = digit_rm(), 0.4          # a reward model without Part A's training
    runs.use(lab["train_rlhf"])
    return runs


@needs_fork
def test_two_workers_give_the_serial_runs_bit_for_bit(lab):
    cfgs = small_configs(lab)
    serial = cache(lab).run_all(cfgs, workers=1)
    side_by_side = cache(lab).run_all(cfgs, workers=2)
    for (p1, h1), (p2, h2) in zip(serial, side_by_side):
        assert h1 == h2                                                  # every logged float, exactly
        s1, s2 = p1.state_dict(), p2.state_dict()
        assert s1.keys() == s2.keys()
        assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert serial[0][1] != serial[1][1]          # control: different configs do differ


@needs_fork
def test_runs_happen_in_other_processes_and_a_local_function_works():
    here = os.getpid()

    def where(x):                                # defined here: not picklable, as a notebook's function
        return os.getpid(), x * x

    out = parallel.run_all(where, [(i,) for i in range(4)], workers=2)
    assert [x for _, x in out] == [0, 1, 4, 9]
    assert all(pid != here for pid, _ in out)
    assert len({pid for pid, _ in out}) == 4     # one process per run


def test_serial_while_grading_and_with_one_worker(monkeypatch):
    here = os.getpid()
    assert {pid for pid in parallel.run_all(lambda: os.getpid(), [()] * 3, workers=1)} == {here}
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert {pid for pid in parallel.run_all(lambda: os.getpid(), [()] * 3, workers=2)} == {here}
    monkeypatch.delenv("NBGRADER_EXECUTION")
    monkeypatch.setenv(parallel.ENV, "1")                      # what the grading sandbox sets
    assert parallel.worker_count() == 1
    assert {pid for pid in parallel.run_all(lambda: os.getpid(), [()] * 3)} == {here}


def test_worker_count_default_and_override(monkeypatch):
    monkeypatch.delenv(parallel.ENV, raising=False)
    assert parallel.worker_count() == max(1, min(parallel.MAX_WORKERS, parallel.cores()))
    monkeypatch.setenv(parallel.ENV, "3")
    assert parallel.worker_count() == 3
    assert parallel.worker_count(2) == 2


@needs_fork
def test_an_error_is_raised_here_as_without_workers():
    calls = []

    def task(i):
        calls.append(i)                          # in this process only when run here
        if i == 1:
            raise NotImplementedError("Task 3")
        return i

    kept = {}
    with pytest.raises(NotImplementedError, match="Task 3"):
        parallel.run_all(task, [(0,), (1,), (2,)], workers=2, on_result=kept.__setitem__)
    assert calls == [1]                          # only the failed job ran again here, where it raised
    assert kept == {0: 0, 2: 2}                  # the others are kept


@needs_fork
def test_unfinished_training_loop_reaches_needs(lab):
    from course_utils.checks import needs

    def unfinished(*args):
        raise NotImplementedError

    runs = cache(lab)
    runs.use(unfinished)
    with needs("Tasks 3, 4 and 5") as _:
        runs.run_all(small_configs(lab), workers=2)
    assert runs.runs == {}


@needs_fork
def test_a_progress_bar_per_run(monkeypatch):
    seen = []
    monkeypatch.setattr(parallel, "_progress", lambda bars, i, desc, total, n: seen.append((i, desc, total, n)))

    def loop(name, steps):
        return sum(1 for _ in runtime.progress(range(steps), desc=name))

    assert parallel.run_all(loop, [("a", 3), ("b", 5)], workers=2) == [3, 5]
    assert sorted(seen) == [(0, "a", 3, n) for n in (1, 2, 3)] + [(1, "b", 5, n) for n in range(1, 6)]


def test_the_grading_sandbox_runs_serially(monkeypatch):
    from course_staff.grading import sandbox

    monkeypatch.setattr(sandbox, "bwrap", lambda: "bwrap")      # the command only: nothing is started
    args = sandbox.bwrap_command(["python", "-m", "ipykernel_launcher"], {}, "/tmp/g", "/tmp/j", {})
    i = args.index(parallel.ENV)
    assert args[i - 1:i + 2] == ["--setenv", parallel.ENV, "1"]


# ----------------------------------------------------------------------------- Lab 13 (Lab13Runs.run_all)
@pytest.fixture(scope="module")
def lab13():
    return load_lab("lab13")


def small_world(lab13, n=256):
    """Lab 13's world with its first ``n`` training and held-out pairs: a DPO epoch in a second."""
    def head(pairs):
        return {side: {"ids": pairs[side]["ids"][:n], "mask": pairs[side]["mask"][:n],
                       "prompt_len": pairs[side]["prompt_len"]} for side in ("chosen", "rejected")}
    world = lab13["world"]
    return dataclasses.replace(world, train_pairs=head(world.train_pairs), held_pairs=head(world.held_pairs))


def lab13_specs(lab13):
    dpo, grpo = lab13["DPOConfig"](epochs=2, batch=64), lab13["GRPOConfig"](iters=3, batch=8)
    return [(lab13["train_dpo"], dpo), (lab13["train_dpo"], dataclasses.replace(dpo, beta=0.2)),
            (lab13["train_grpo"], grpo), (lab13["train_grpo"], dataclasses.replace(grpo, kl_in="reward"))]


def same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@needs_fork
def test_lab13_runs_side_by_side_are_the_serial_runs_bit_for_bit(lab13):
    from course_utils.lab13_runs import Lab13Runs

    specs = lab13_specs(lab13)
    world = small_world(lab13)
    serial = Lab13Runs(world).run_all(specs, workers=1)
    side_by_side = Lab13Runs(world).run_all(specs, workers=2)
    for (p1, h1), (p2, h2) in zip(serial, side_by_side):
        assert same_weights(p1, p2)
        assert {k: v for k, v in h1.items() if k != "after"} == {k: v for k, v in h2.items() if k != "after"}
        assert len(h1["after"]) == len(h2["after"]) > 0                     # a copy per evaluation, each the same
        assert all(same_weights(a, b) for a, b in zip(h1["after"], h2["after"]))
    assert not same_weights(serial[0][0], serial[1][0])        # control: the betas' runs do differ
    assert serial[2][1]["score"] != serial[3][1]["score"]


@needs_fork
def test_lab13_runs_are_kept_and_not_trained_again(lab13):
    from course_utils.lab13_runs import Lab13Runs

    runs = Lab13Runs(small_world(lab13))
    calls = []

    def counted(world, cfg, after=None):
        calls.append(os.getpid())
        return lab13["train_dpo"](world, cfg, after=after)

    cfg = lab13["DPOConfig"](epochs=1, batch=64)
    first = runs.run_all([(counted, cfg), (counted, dataclasses.replace(cfg, beta=0.2))], workers=2)
    assert calls == []                                          # both ran in workers: nothing here
    again = runs.run_all([(counted, cfg)], workers=2)
    assert again[0] is first[0] and runs.run(counted, cfg) is first[0] and calls == []
