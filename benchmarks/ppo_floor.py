"""The floor of one PPO run: the forward and backward passes of Lab 12's ``train_rlhf``, nothing else.

    python -m benchmarks.ppo_floor            # one PPO run and its floor, interleaved, medians of 3
    python -m benchmarks.ppo_floor --repeats 5

One PPO run of ``RLHFConfig()`` (120 iterations x 64 prompts, 4 epochs) makes these passes of the
one-layer TinyLM in each iteration (B = 64 prompts, T = 4 response tokens):

    sampling   the prompt pass (B, 5) and T - 1 one-position passes on cached keys and values
    scoring    the policy's, the reference's and the critic's passes over the rollout (B, 8), no gradient
    epochs     4 times: the policy's and the critic's passes over the rollout with gradient, and one
               backward pass through both

The policy's and the critic's first epoch reuse their scoring pass: a TinyLM keeps its last pass without
gradient, and the next pass, if it asks for a gradient on the same ids and unchanged weights, runs only
the backward (``TinyLM._causal_pass``). The floor calls the model as the run does, so its first epoch
reuses the scoring pass too and epochs 2-4 run in full, as in the run (where a step has changed the
weights): it does not count forward passes the run no longer makes (its weights never change, but a
kept pass serves the next pass only).

The floor makes exactly these passes, on token ids drawn once beforehand, with a plain sum of the
outputs as the loss: no token is drawn, no mask, reward, advantage or loss is computed, no optimizer
steps, nothing is logged. ``one PPO run / floor`` is what the loop costs beyond the model's own
arithmetic (both on the model as course_utils computes it, so a faster forward pass speeds both).
The floor's **fixed cost** is the same passes on one prompt instead of 64: what its operations cost
whatever their size (dispatch, allocation, autograd), the part that less arithmetic cannot remove.
Judged on this process's CPU seconds (one thread), as bench.py's figures are.
"""

import argparse
import os
import statistics
import sys
import time

import torch

from course_utils.ppo_helpers import ValueModel
from course_utils.tinylm import MAX_NEW, PROMPT_LEN, VOCAB_SIZE, TinyLM, extending, load_sft


def passes(cfg):
    """(iterations, prompts, epochs) of one PPO run of ``cfg`` (an RLHFConfig)."""
    return cfg.iters, cfg.batch, cfg.epochs


def floor_run(sft, iters=120, batch=64, epochs=4, seed=0):
    """The forward and backward passes of one PPO run (see the module's docstring), nothing else."""
    g = torch.Generator().manual_seed(seed)
    policy, ref, critic = TinyLM(), TinyLM(), ValueModel(sft)
    policy.load_state_dict(sft.state_dict())
    ref.load_state_dict(sft.state_dict())
    ref.requires_grad_(False)
    ids = torch.randint(0, VOCAB_SIZE - 2, (iters, batch, PROMPT_LEN + MAX_NEW), generator=g)   # no BOS/PAD ids
    positions = torch.arange(PROMPT_LEN + MAX_NEW)
    for it in range(iters):
        seq = ids[it]
        with torch.no_grad():                                          # sampling: prompt, then one position a step
            attention = [extending([]) for _ in range(policy.n_layers)]
            policy(seq[:, :PROMPT_LEN], attention=attention, last=1)
            for t in range(MAX_NEW - 1):
                col = PROMPT_LEN + t
                policy(seq[:, col:col + 1], positions=positions[col:col + 1], attention=attention)
            policy(seq[:, :-1], last=MAX_NEW)                          # scoring: old log-probs, reference, values
            ref(seq[:, :-1], last=MAX_NEW)
            critic.body.scalar_head(seq[:, :-1], critic.head_weights, last=MAX_NEW)
        for _ in range(epochs):                                        # the PPO epochs: forward and backward
            loss = (policy(seq[:, :-1], last=MAX_NEW).sum()
                    + critic.body.scalar_head(seq[:, :-1], critic.head_weights, last=MAX_NEW).sum())
            loss.backward()
    return policy


def measure(repeats=3, lab=None, sft=None, rm=None, rm_offset=None):
    """{"ppo": [CPU s], "ppo_wall": [...], "floor": [CPU s], "floor_wall": [...], "fixed": [CPU s], "hist":
    the last run's history}: one PPO run of the notebook's RLHFConfig(), its floor and the floor's fixed
    cost (its passes on one prompt), interleaved ``repeats`` times (so that a slow stretch of a shared
    machine slows all three)."""
    from course_staff.solutions import load_lab

    if lab is None:
        lab = load_lab("lab12")
    sft = sft or load_sft()
    if rm is None:
        from course_utils.evaluation import sft_offset
        from course_utils.prefs import ranked_data
        from course_utils.world import K, N_OFFSET, N_PROMPTS, NOTEBOOK
        rm = lab["train_reward_model"](ranked_data(sft, N_PROMPTS, k=K, seed=NOTEBOOK.rankings), seed=0)
        rm_offset = sft_offset(rm, sft, n=N_OFFSET, seed=NOTEBOOK.offset)
    cfg = lab["RLHFConfig"]()
    iters, batch, epochs = passes(cfg)
    out = {"ppo": [], "ppo_wall": [], "floor": [], "floor_wall": [], "fixed": [], "hist": None}
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        _, out["hist"] = lab["train_rlhf"](sft, rm, rm_offset, cfg)
        out["ppo"].append(time.process_time() - c0)
        out["ppo_wall"].append(time.perf_counter() - t0)
        c0, t0 = time.process_time(), time.perf_counter()
        floor_run(sft, iters, batch, epochs)
        out["floor"].append(time.process_time() - c0)
        out["floor_wall"].append(time.perf_counter() - t0)
        c0 = time.process_time()
        floor_run(sft, iters, 1, epochs)
        out["fixed"].append(time.process_time() - c0)
    out["cfg"] = cfg
    return out


def multiple(m):
    """One PPO run as a multiple of its floor: the ratio of the two medians."""
    return statistics.median(m["ppo"]) / statistics.median(m["floor"])


def main(argv=None):
    parser = argparse.ArgumentParser(description="one PPO run of Lab 12 as a multiple of its floor")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    load_start = os.getloadavg()[0]
    m = measure(args.repeats)
    cfg = m["cfg"]
    fmt = lambda xs: " ".join(f"{x:.2f}" for x in xs)
    print(f"torch {torch.__version__}, kernels {torch.backends.cpu.get_cpu_capability()}, "
          f"{torch.get_num_threads()} thread(s), {os.cpu_count()} cores, load average {load_start:.1f} at the start "
          f"and {os.getloadavg()[0]:.1f} at the end (a load above the core count slows both figures)")
    print(f"one PPO run ({cfg.iters} x {cfg.batch}), CPU: {statistics.median(m['ppo']):.2f} s [{fmt(m['ppo'])}]")
    print(f"its floor (the same passes only), CPU: {statistics.median(m['floor']):.2f} s [{fmt(m['floor'])}]")
    print(f"its fixed cost (the same passes on 1 prompt), CPU: {statistics.median(m['fixed']):.2f} s "
          f"[{fmt(m['fixed'])}]")
    print(f"one PPO run = {multiple(m):.2f} x floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
