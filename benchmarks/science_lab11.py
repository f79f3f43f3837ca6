"""Lab 11's lessons as science experiments (see science.py), with Lab 11's reference solution.

Both experiments work on the enumerable two-token toy (course_utils.twotoken): every response to a
prompt is listed, so exact KLs and exact objectives are known and only the sampling is random.

kl_estimators   pi_ref = the SFT model at T = 1, pi = the same model at temperature T. From n draws
                y ~ pi: each estimator's bias (as a z-score: bias / its standard error) and its spread
                (std of one sample) relative to the exact KL. Nearby policies (T = 0.9, 1.1) show the
                known order: k1 and k3 unbiased, k2 biased, k3's spread far below k1's. A sharpened
                far policy (T = 0.4) shows where k3's advantage ends: pi_ref / pi = exp(-l) is huge on
                the rare draws where pi_ref is much likelier than pi, and k3 = exp(-l) - 1 + l with it.
optimum         J(pi*) >= J(pi) for random policies pi (Dirichlet draws on pi_ref's support,
                pi_ref tilted at random betas, and small random moves of both), for several betas.
"""

import functools

import numpy as np
import torch

from course_staff.solutions import load_lab
from course_utils.tinylm import load_sft
from course_utils.twotoken import joint, two_token_logits, two_token_policy, two_token_rewards

from benchmarks.criteria import Criterion, Experiment, short

PROMPT = "7+5="
N_DRAWS = 200_000                 # samples per policy: the standard error of a bias is std / sqrt(N_DRAWS)
NEAR = (0.9, 1.1)                 # temperatures of the nearby policies (KL about 0.005)
NEARER = (0.999, 1.001)           # k2_biased's control: policies a hundred times nearer (k2's bias is third order)
FAR = 0.4                         # a sharpened far policy (KL about 0.19)
GRID = (0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3)    # where k3's spread overtakes k1's, for the record
# "bias ~ 0 up to sampling noise": |bias| within 4 standard errors of the mean of N_DRAWS draws (an unbiased
# estimator exceeds that once in 15 000); "biased": beyond them
MAX_Z = 4.0
# "much less noisy", "cancels most of k1's noise": one sample's std below half of k1's (most of it cancelled)
SPREAD_MAX = 0.5
OPT_PROMPTS = ("7+5=", "3+4=")
OPT_BETAS = (0.03, 0.1, 0.3, 1.0, 3.0)
N_RANDOM = 200                    # random policies of each kind, per prompt and beta


@functools.lru_cache(maxsize=1)
def lab():
    return load_lab("lab11")


@functools.lru_cache(maxsize=4)
def logits(prompt):
    return two_token_logits(load_sft(), prompt)


# ----------------------------------------------------------------------------- KL estimators
def estimator_stats(kl_estimators, temperature, gen, n=N_DRAWS, draw_from_ref=False):
    """{k1, k2, k3: (z of the bias, std / KL)} for pi = the model at ``temperature``, pi_ref at T = 1.

    ``draw_from_ref`` is the control: the draws come from pi_ref instead of pi, so the estimators
    no longer average to KL(pi || pi_ref).
    """
    ref = joint(*two_token_policy(logits(PROMPT), 1.0)).ravel()
    p = joint(*two_token_policy(logits(PROMPT), temperature)).ravel()
    support = p > 0                                            # pi_T never leaves pi_ref's support
    kl = float((p[support] * np.log(p[support] / ref[support])).sum())
    draws = torch.multinomial(torch.from_numpy(ref if draw_from_ref else p), n, replacement=True, generator=gen)
    ks = kl_estimators(torch.log(torch.from_numpy(p))[draws], torch.log(torch.from_numpy(ref))[draws])
    stats = {}
    for name, k in zip(("k1", "k2", "k3"), ks):
        k = np.asarray(k, dtype=float)
        stats[name] = ((k.mean() - kl) / (k.std() / np.sqrt(n)), k.std() / kl)
    return stats


def run_kl_estimators(seed):
    est = lab()["kl_estimators"]
    gen = torch.Generator().manual_seed(seed)
    n = short(N_DRAWS)
    near = [estimator_stats(est, t, gen, n) for t in NEAR]
    near_from_ref = [estimator_stats(est, t, gen, n, draw_from_ref=True) for t in NEAR]
    nearer = [estimator_stats(est, t, gen, n) for t in NEARER]
    grid = {t: estimator_stats(est, t, gen, n) for t in GRID}
    far = grid[FAR]
    spread = lambda s: s["k3"][1] / s["k1"][1]                          # noqa: E731 -- k3's std over k1's
    overtaken = [t for t in GRID if spread(grid[t]) >= 1]
    return {
        "unbiased_z": max(abs(s[k][0]) for s in near for k in ("k1", "k3")),
        "unbiased_z_from_ref": max(abs(s[k][0]) for s in near_from_ref for k in ("k1", "k3")),
        "k2_bias_z": min(abs(s["k2"][0]) for s in near),
        "k2_bias_z_nearer": min(abs(s["k2"][0]) for s in nearer),
        "k2_spread_near": max(s["k2"][1] / s["k1"][1] for s in near),
        "k2_spread_far": far["k2"][1] / far["k1"][1],
        "k3_spread_near": max(spread(s) for s in near),
        "k3_spread_far": spread(far),
        "k3_overtaken_below_T": max(overtaken) if overtaken else float("nan"),
        "inputs": {"unbiased_z": {"draws from": "pi"}, "unbiased_z_from_ref": {"draws from": "pi_ref"},
                   "k2_bias_z": {"T": NEAR}, "k2_bias_z_nearer": {"T": NEARER},
                   **{f"k{i}_spread_near": {"T": NEAR} for i in (2, 3)},
                   **{f"k{i}_spread_far": {"T": FAR} for i in (2, 3)}},
    }


KL_ESTIMATORS = Experiment("lab11.kl_estimators", run_kl_estimators, smoke=True, criteria=(
    Criterion("unbiased", "near: max |bias| / its stderr of k1, k3", "unbiased_z", MAX_Z, above=False,
              mechanism="draws from", controls=(("the draws come from pi_ref, not pi", "unbiased_z_from_ref"),),
              fmt="{:.1f}"),
    # "k2 does not [average to the KL] once the policies drift apart": the drift is the mechanism
    Criterion("k2_biased", "near: |bias| / its stderr of k2", "k2_bias_z", MAX_Z, mechanism="T",
              controls=((f"policies a hundred times nearer (T = {NEARER[0]:g}, {NEARER[1]:g})", "k2_bias_z_nearer"),),
              fmt="{:.1f}"),
    Criterion("k2_quiet", "near: k2's std / k1's", "k2_spread_near", SPREAD_MAX, above=False, mechanism="T",
              controls=((f"a far policy (T = {FAR})", "k2_spread_far"),), fmt="{:.2f}"),
    Criterion("k3_quiet", "near: k3's std / k1's", "k3_spread_near", SPREAD_MAX, above=False, mechanism="T",
              controls=((f"a far policy (T = {FAR})", "k3_spread_far"),), fmt="{:.2f}"),
))


# ----------------------------------------------------------------------------- the optimum
def random_policies(ref, rewards, rng, n=N_RANDOM):
    """(3n, V*V) policies on pi_ref's support: Dirichlet draws, pi_ref tilted at log-uniform random
    betas in [0.01, 100], and each of those moved a little (mixed 1% with a Dirichlet draw)."""
    support = ref > 0
    dirichlet = np.zeros((n, ref.size))
    dirichlet[:, support] = rng.dirichlet(np.full(support.sum(), 0.3), size=n)
    betas = 10 ** rng.uniform(-2, 2, size=n)
    scores = np.where(support, np.log(np.where(support, ref, 1)), -np.inf) + rewards[None] / betas[:, None]
    tilted = np.exp(scores - scores.max(1, keepdims=True))
    tilted /= tilted.sum(1, keepdims=True)
    near = 0.99 * np.concatenate([tilted[: n // 2], dirichlet[: n - n // 2]]) + 0.01 * dirichlet[rng.permutation(n)]
    return np.concatenate([dirichlet, tilted, near])


def optimum_gap(pi, policies, ref, rewards, beta, kl_objective):
    """min over ``policies`` of J(pi) - J(policy): >= 0 when no policy beats pi."""
    shape = ref.shape
    j = kl_objective(pi.reshape(shape), ref, rewards, beta)
    return min(j - kl_objective(q.reshape(shape), ref, rewards, beta) for q in policies)


def run_optimum(seed):
    tilted_optimum, kl_objective = lab()["tilted_optimum"], lab()["kl_objective"]
    rng = np.random.default_rng(seed)
    gaps, control = [], []
    for prompt in OPT_PROMPTS:
        ref = joint(*two_token_policy(logits(prompt), 1.0))
        rewards = two_token_rewards(prompt)
        policies = random_policies(ref.ravel(), rewards.ravel(), rng, short(N_RANDOM))
        for beta in OPT_BETAS:
            pi_star, _ = tilted_optimum(ref, rewards, beta)
            wrong, _ = tilted_optimum(ref, rewards, 2 * beta)
            gaps.append(optimum_gap(pi_star, policies, ref, rewards, beta, kl_objective))
            control.append(optimum_gap(wrong, policies, ref, rewards, beta, kl_objective))
    return {"optimum_gap": min(gaps), "optimum_gap_wrong_beta": min(control),
            "inputs": {"optimum_gap": {"tilted at": "beta"}, "optimum_gap_wrong_beta": {"tilted at": "2 beta"}}}


OPTIMUM = Experiment("lab11.optimum", run_optimum, smoke=True, criteria=(
    # "largest exactly when pi = pi*": no random policy beats pi*, up to float64 rounding of J (1e-9)
    Criterion("best", "min over random pi of J(pi*) - J(pi)", "optimum_gap", -1e-9, mechanism="tilted at",
              controls=(("pi* tilted at 2 beta instead of beta", "optimum_gap_wrong_beta"),), fmt="{:+.0e}"),
))

EXPERIMENTS = [KL_ESTIMATORS, OPTIMUM]
