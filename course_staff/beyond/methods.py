"""Beyond PPO: DPO and GRPO on Lab 12's toy, from the same SFT model, rankings and reward model.

Staff-only, like its notebook (notebooks/beyond_ppo.ipynb): it runs Lab 12's reference solution
(``train_rlhf``, ``train_reward_model``, ``ranking_to_pairs``) and Lab 11's (``kl_estimators``: k3).

    world = make_world(seed=0)                         # Lab 12's SFT model, rankings, RM and offset
    policy, hist = train_ppo(world, beta=0.1)          # Lab 12's own train_rlhf
    policy, hist = train_dpo(world, DPOConfig(beta=0.1))
    policy, hist = train_grpo(world, GRPOConfig(beta=0.1))

DPO, Rafailov et al. (2023), "Direct Preference Optimization: Your Language Model is Secretly a
Reward Model". The KL-regularized optimum pi* = pi_ref exp(r / beta) / Z, solved for the reward,
r = beta log(pi* / pi_ref) + beta log Z, put into the Bradley-Terry likelihood of a pair (Z cancels):

    L_DPO = -mean over pairs of log sigmoid(beta [log pi(y_w)/pi_ref(y_w) - log pi(y_l)/pi_ref(y_l)])

GRPO, Shao et al. (2024), "DeepSeekMath". k responses per prompt; response i's advantage is its score
normalized within its group, (r_i - mean r) / std r, on every one of its tokens; no critic; the KL
penalty is not in the reward but in the loss, as Lab 11's per-token estimator k3 of KL(pi || pi_ref):

    L_GRPO = -mean over responses of mean over its tokens of
             [min(rho_t A, clip(rho_t, 1 - eps, 1 + eps) A) - beta k3_t],    k3 = pi_ref/pi - 1 - log(pi_ref/pi)

Every run returns (policy, history); history["wall"] and history["cpu"] are its seconds of wall-clock
and of CPU time (one thread: the CPU time is the wall-clock time of a quiet machine).
"""

import contextlib
import math
import random
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from course_staff.solutions import load_lab
from course_utils import world
from course_utils.evaluation import METRICS, pair_accuracy, response_metrics
from course_utils.reward_model import digit_counts
from course_utils.runtime import progress
from course_utils.tinylm import TinyLM, make_batch, sample, sequence_logprobs
from course_utils.world import N_PROMPTS, World     # Beyond PPO's world is Lab 12's

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


# ----------------------------------------------------------------------------- Lab 12's world
def make_world(seed=0, n_prompts=N_PROMPTS, kappa=None):
    """Lab 12's world of ``seed`` (``course_utils.world``; seed 0 is the notebook's), its reward model
    fit by the reference ``train_reward_model``. ``kappa`` is the labeler's confidence."""
    return world.make_world(lab("lab12")["train_reward_model"], seed, n_prompts=n_prompts, kappa=kappa)


def _copy(model, trainable=True):
    clone = TinyLM()
    clone.load_state_dict(model.state_dict())
    clone.requires_grad_(trainable)
    return clone


# ----------------------------------------------------------------------------- PPO: Lab 12's train_rlhf
def train_ppo(world, beta, **overrides):
    """Lab 12's train_rlhf at this beta, with its defaults (120 iterations of 64 prompts) unless
    overridden, seeded by the world's seed."""
    ns = lab("lab12")
    cfg = ns["RLHFConfig"](**{"beta": beta, "seed": world.seed, **overrides})
    clock = Clock()
    policy, hist = ns["train_rlhf"](world.sft, world.rm, world.rm_offset, cfg)
    hist.update(clock.read())
    return policy, hist


# ----------------------------------------------------------------------------- DPO
@dataclass
class DPOConfig:
    beta: float = 0.1
    epochs: int = 4           # passes over the pairs
    batch: int = 256          # pairs per Adam step
    lr: float = 3e-4          # PPO's policy learning rate
    eval_every: int = None    # Adam steps between two evaluations (None: once per epoch)
    seed: int = 0


def preference_pairs(data):
    """The labeler's pairs of ranked data (Lab 12's ranking_to_pairs), as two rollouts.

    Returns (winners, losers), rollout dicts of the N pairs (ids (N, 9), prompt_len, mask (N, 4)).
    Pairs of two identical responses are left out: their DPO margin is 0 whatever the policy.
    """
    to_pairs = lab("lab12")["ranking_to_pairs"]
    w, l = [], []
    for i, d in enumerate(data):
        k = d["out"]["ids"].shape[0]
        for a, b in to_pairs(d["ranking"]):
            w.append(i * k + a)
            l.append(i * k + b)
    ids = torch.cat([d["out"]["ids"] for d in data])
    mask = torch.cat([d["out"]["mask"] for d in data])
    w, l = torch.tensor(w), torch.tensor(l)
    keep = (ids[w] != ids[l]).any(1)
    L = data[0]["out"]["prompt_len"]
    return tuple({"ids": ids[j[keep]], "prompt_len": L, "mask": mask[j[keep]]} for j in (w, l))


def dpo_loss(logp_w, logp_l, ref_w, ref_l, beta):
    """DPO's loss from sequence log-probs (N,) of the policy and of the reference, winners and losers.

    Returns (loss, margins): the mean of -log sigmoid(margins), and margins (N,), the winner's implicit
    reward beta log(pi / pi_ref) minus the loser's.
    """
    margins = beta * ((logp_w - ref_w) - (logp_l - ref_l))
    return -F.logsigmoid(margins).mean(), margins


@torch.no_grad()
def implicit_reward_fit(policy, ref, data, beta):
    """(accuracy, mean DPO loss) of the implicit reward beta log(pi / pi_ref) on the pairs of data."""
    win, lose = preference_pairs(data)
    seq = lambda model, out: sequence_logprobs(model, out).sum(1)
    loss, margins = dpo_loss(seq(policy, win), seq(policy, lose), seq(ref, win), seq(ref, lose), beta)
    return pair_accuracy(margins), loss.item()


def train_dpo(world, cfg=DPOConfig(), after=None):
    """DPO on the pairs of world.train_data, with the SFT model as the reference.

    Every ``cfg.eval_every`` Adam steps (default: every epoch) and at the end, the history records the
    implicit reward's accuracy and DPO loss on the training and the held-out pairs, and what
    ``after(policy)`` returns (history["after"]; e.g. exact figures on the response tree).
    """
    torch.manual_seed(cfg.seed)
    policy, ref = _copy(world.sft), _copy(world.sft, trainable=False)
    win, lose = preference_pairs(world.train_data)
    n = win["ids"].shape[0]
    with torch.no_grad():
        ref_w, ref_l = sequence_logprobs(ref, win).sum(1), sequence_logprobs(ref, lose).sum(1)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    batches = [idx for _ in range(cfg.epochs) for idx in torch.randperm(n).split(cfg.batch)]
    every = cfg.eval_every or math.ceil(n / cfg.batch)
    hist = {k: [] for k in ("step", "train_acc", "train_loss", "held_acc", "held_loss", "after")}
    clock = Clock()
    for step, idx in enumerate(progress(batches, desc=f"DPO, beta {cfg.beta:g}"), start=1):
        both = {"ids": torch.cat([win["ids"][idx], lose["ids"][idx]]), "prompt_len": win["prompt_len"],
                "mask": torch.cat([win["mask"][idx], lose["mask"][idx]])}
        seq = sequence_logprobs(policy, both).sum(1)                          # (2 n_batch,)
        loss, _ = dpo_loss(seq[:len(idx)], seq[len(idx):], ref_w[idx], ref_l[idx], cfg.beta)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % every == 0 or step == len(batches):
            hist["step"].append(step)
            for name, data in (("train", world.train_data), ("held", world.held_out)):
                acc, held_loss = implicit_reward_fit(policy, ref, data, cfg.beta)
                hist[f"{name}_acc"].append(acc)
                hist[f"{name}_loss"].append(held_loss)
            if after is not None:
                hist["after"].append(after(policy))
    hist.update(clock.read(), pairs=n)
    return policy, hist


# ----------------------------------------------------------------------------- GRPO
@dataclass
class GRPOConfig:
    iters: int = 80           # PPO's CPU budget: 120 PPO iterations cost about as much as 80 of these
    batch: int = 64           # prompts per iteration: the prompts PPO draws at the same iteration
    k: int = 4                # responses per prompt (the group)
    beta: float = 0.1         # weight of the k3 penalty in the loss
    clip_eps: float = 0.2
    epochs: int = 4           # full-batch steps per batch, as PPO
    lr: float = 3e-4
    scale: bool = True        # divide by the group's std (Shao et al.); False: subtract the mean only
    kl_in: str = "loss"       # "loss": beta k3 per token in the loss (Shao et al.); "reward": as PPO,
                              # score - beta log(pi_old(y) / pi_ref(y)) before the group statistics
    seed: int = 0


def group_advantages(scores, scale=True, eps=1e-6):
    """GRPO's advantages: each score minus its group's mean, divided by the group's std if ``scale``.

    scores (B, k) -> (B, k). A group of k equal scores gets advantage 0 (it holds no signal).
    """
    centred = scores - scores.mean(1, keepdim=True)
    return centred / (scores.std(1, keepdim=True) + eps) if scale else centred


def grpo_loss(logp, old_logp, ref_logp, adv, mask, clip_eps, beta):
    """GRPO's loss: the clipped surrogate with one advantage per response, minus beta k3, averaged
    over each response's tokens, then over the responses.

    logp (N, T) with gradient; old_logp, ref_logp (N, T); adv (N,); mask (N, T).
    Returns (loss, stats), stats = {"k3": mean k3 per real token, "clip_frac"}.
    """
    ratio = torch.exp(logp - old_logp)
    a = adv[:, None]
    surrogate = torch.min(ratio * a, ratio.clamp(1 - clip_eps, 1 + clip_eps) * a)
    penalty = k3(logp, ref_logp)
    per_token = torch.where(mask > 0, surrogate - beta * penalty, torch.zeros_like(logp))
    loss = -(per_token.sum(1) / mask.sum(1)).mean()
    real = mask > 0
    return loss, {"k3": penalty[real].mean().item(),
                  "clip_frac": ((ratio - 1).abs() > clip_eps)[real].float().mean().item()}


def train_grpo(world, cfg=GRPOConfig()):
    """GRPO with the reward model (minus the offset) as the score of each response.

    Each iteration draws the prompts train_rlhf draws at the same iteration (make_batch with a
    random.Random(seed)), samples k responses to each and takes ``epochs`` full-batch steps. The
    history logs what train_rlhf logs (rm, gold, kl: the sampled sequence KL to the SFT model, acc,
    malformed, digits), plus k3, clip_frac and the CPU seconds so far (``cpu_at``).
    """
    torch.manual_seed(cfg.seed)
    gen = random.Random(cfg.seed)
    policy, ref = _copy(world.sft), _copy(world.sft, trainable=False)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.lr)
    hist = {k: [] for k in (*METRICS, "k3", "clip_frac", "cpu_at")}
    clock = Clock()
    name = "GRPO" if cfg.scale else "GRPO (mean only)"
    for _ in progress(range(cfg.iters), desc=f"{name}, beta {cfg.beta:g}"):
        prompts, _ = make_batch(cfg.batch, gen)
        out = sample(policy, [p for p in prompts for _ in range(cfg.k)])
        mask = out["mask"]
        with torch.no_grad():
            old_logp = sequence_logprobs(policy, out)
            ref_logp = sequence_logprobs(ref, out)
            score = world.rm(digit_counts(out)) - world.rm_offset
            kl_seq = ((old_logp - ref_logp) * mask).sum(1)                       # (N,)
            total = score - cfg.beta * kl_seq if cfg.kl_in == "reward" else score
            adv = group_advantages(total.view(cfg.batch, cfg.k), cfg.scale).flatten()
        loss_beta = cfg.beta if cfg.kl_in == "loss" else 0.0
        for _ in range(cfg.epochs):
            loss, stats = grpo_loss(sequence_logprobs(policy, out), old_logp, ref_logp, adv, mask,
                                    cfg.clip_eps, loss_beta)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
            opt.step()
        with torch.no_grad():
            hist["rm"].append(score.mean().item())
            hist["kl"].append(kl_seq.mean().item())
            for name, values in response_metrics(out).items():
                hist[name].append(values.mean().item())
            hist["k3"].append(stats["k3"])
            hist["clip_frac"].append(stats["clip_frac"])
            hist["cpu_at"].append(clock.read()["cpu"])
    hist.update(clock.read())
    return policy, hist


__all__ = ["N_PROMPTS", "lab", "k3", "Clock", "one_thread", "World", "make_world", "train_ppo", "DPOConfig", "preference_pairs",
           "dpo_loss", "pair_accuracy", "implicit_reward_fit", "train_dpo", "GRPOConfig", "group_advantages",
           "grpo_loss", "train_grpo"]
