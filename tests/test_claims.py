"""The claims ledger (benchmarks/claims.py) cannot drift, and the exact facts of the toy it cites.

Every quote of the ledger must still be in its notebook, and every backing it names must exist (a
science criterion or a test). The sentences with a number or a comparison that the ledger does not
hold are reported (printed, and counted in `python -m benchmarks.claims`), not failed: task texts and
definitions need no figure. The tests below ``# exact facts`` compute, with no training, the facts of
the fixed SFT model that the notebooks state (exact sums over enumerable responses): the ledger cites them.
"""

import math

import numpy as np
import pytest
import torch

from benchmarks import claims  # noqa: E402
from benchmarks import science  # noqa: E402

from course_utils.tinylm import EOS, load_sft  # noqa: E402
from course_utils.twotoken import joint, two_token_logits, two_token_policy, two_token_rewards  # noqa: E402


def test_every_quote_is_in_its_notebook():
    gone = claims.missing()
    assert not gone, ("these quoted claims are no longer in their notebooks; update the ledger "
                      "(benchmarks/claims.py) with the new sentence and the figure that shows it:\n"
                      + "\n".join(f"  {c.where}: {c.quote!r}" for c in gone))


def test_every_backing_names_a_criterion_or_a_test():
    bad = claims.unknown_backings(science.criteria_by_name())
    assert not bad, "backings that name no science criterion and no test:\n" + "\n".join(
        f"  {c.where}: {b}  (for {c.quote[:60]!r})" for c, b in bad)


def test_every_claim_has_a_backing_and_one_entry():
    assert all(c.backed_by for c in claims.CLAIMS)
    keys = [(c.where, c.quote) for c in claims.CLAIMS]
    assert len(keys) == len(set(keys)), "a claim is in the ledger twice"


def test_the_drift_check_sees_a_changed_sentence(tmp_path):
    fake = claims.Claim("lab12", "the KL stays below one nat", ("lab12.kl_penalty.small_kl",))
    assert claims.missing([fake]) == [fake]


def test_a_claim_is_backed_only_by_a_test_that_ran_and_passed():
    """A test's def existing is not enough: after a run the test must be among those that passed."""
    real = [c for c in claims.CLAIMS if c.backed_by == (claims.T + "test_tinylm_has_about_14000_parameters",)]
    names = science.criteria_by_name()
    assert real and claims.backed(names, real) == [(real[0], True)]                      # before a run: named
    assert claims.backed(names, real, met=set(), tests_passed=set()) == [(real[0], False)]   # not run
    assert claims.backed(names, real, met=set(), tests_passed={real[0].backed_by[0]}) == [(real[0], True)]


def test_a_criterion_backs_a_claim_only_when_met_on_every_seed():
    c = [c for c in claims.CLAIMS if c.backed_by == ("lab12.reward_model.gold_order",)][0]
    names = science.criteria_by_name()
    assert claims.backed(names, [c], met=set(), tests_passed=set()) == [(c, False)]
    assert claims.backed(names, [c], met={"lab12.reward_model.gold_order"}, tests_passed=set()) == [(c, True)]


def test_a_measured_figure_backs_no_claim_on_its_own():
    names = science.criteria_by_name()
    timed = [c for c in claims.CLAIMS if claims.states_a_figure(c)]
    assert timed and not any(ok for _, ok in claims.backed(names, timed, met=set(names), tests_passed=set()))
    assert "measured figure" in claims.summary_line(claims.backed(names, timed))
    claim = next(c for c in claims.CLAIMS if not claims.states_a_figure(c))     # a run's exit status: the
    assert claims.all_backed([(t, False) for t in timed] + [(claim, True)])       # figures count apart,
    assert not claims.all_backed([(t, False) for t in timed] + [(claim, False)])  # a claim does not


def test_every_timing_sentence_of_the_ledger_is_checked_within_its_band():
    """A sentence backed by ``measured:bench.KEY`` quotes that figure and what a slow laptop takes (KEY.slow),
    each checked against benchmarks/results/bench.json by tests/test_figures.py (figures.BANDS)."""
    from benchmarks import figures
    banded = {(rel, key) for rel, _, key in figures.BANDS}
    timed = [c for c in claims.CLAIMS if any(b.startswith(claims.MEASURED + "bench.") for b in c.backed_by)]
    assert len({c.where for c in timed}) >= 4, "Lab 12, Lab 13, start here and Beyond PPO state their times"
    for c in timed:
        keys = {b[len(claims.MEASURED):] for b in c.backed_by if b.startswith(claims.MEASURED + "bench.")}
        assert {k for k in keys if k.endswith(".slow")} == {k + ".slow" for k in keys if not k.endswith(".slow")}, c
        assert {(claims.NOTEBOOKS[c.where], k) for k in keys} <= banded, f"no band checks {c.quote!r}"
    fake = claims.C("lab13", "Five runs: about a minute.", claims.MEASURED + "bench.no_such_figure")   # the control
    assert claims.unknown_backings(science.criteria_by_name(), [fake]) == [(fake, fake.backed_by[0])]


def test_the_ledger_runs_its_tests():
    passed = claims.run_tests([claims.T + "test_tinylm_has_about_14000_parameters",
                               claims.T + "test_no_such_test"])
    assert passed == {claims.T + "test_tinylm_has_about_14000_parameters"}


def test_report_the_sentences_the_ledger_lacks(capsys):
    rest = claims.unledgered()
    with capsys.disabled():
        print(f"\n{len(rest)} sentences with a number or a comparison are not in the claims ledger "
              f"(python -m benchmarks.claims --unledgered)")
    assert all(isinstance(s, str) and s for _, _, s in rest)


# ----------------------------------------------------------------------------- exact facts
@pytest.fixture(scope="module")
def sft():
    return load_sft()


@pytest.fixture(scope="module")
def lab11():
    """Lab 11's namespace: its reference solutions (course_staff.solutions)."""
    from course_staff.solutions import load_lab
    return load_lab("lab11")


def _pi(sft, temperature, prompt="7+5="):
    return joint(*two_token_policy(two_token_logits(sft, prompt), temperature))


def test_tinylm_has_about_14000_parameters(sft):
    n = sum(p.numel() for p in sft.parameters())
    assert 13_000 <= n <= 15_000, n


def test_sft_is_right_about_three_times_in_four(sft):
    from course_utils.response_tree import ResponseTree
    from course_utils.tree_optimum import policy_stats
    tree = ResponseTree.build()
    ref = tree.logprobs(sft)
    rewards = tree.rm_rewards(lambda counts: counts.sum(-1) * 0.0)
    stats = policy_stats(tree, ref, ref, rewards, 1.0)
    assert 0.70 <= stats.acc <= 0.80, f"exact accuracy of the SFT model {stats.acc:.3f}"
    assert stats.malformed > 0.1, "it sometimes answers with an empty response"


def test_sft_responses_average_about_2_2_tokens(sft):
    """Lab 12's Question 6 (model answer): in a batch of the SFT model, a response mean weighs a token of
    a 1-token response N / B = E[L] times its token-mean weight, a 3-token one E[L] / 3 times."""
    from course_utils.response_tree import ResponseTree, expectation, response_probs
    tree = ResponseTree.build()
    probs = response_probs(tree.logprobs(sft))
    length = [torch.full_like(p, d + 1.0) for d, p in enumerate(probs)]
    mean_length = float(expectation(probs, length).mean())
    assert 2.1 <= mean_length <= 2.25, f"exact mean response length of the SFT model {mean_length:.3f}"
    assert 0.65 <= mean_length / 3 <= 0.75


def test_each_prompt_has_22621_responses():
    # up to 4 tokens out of 13 (10 digits, +, =, <eos>), <eos> ending a response: complete responses
    # are sum_{n<4} 12^n ending in <eos>, plus 12^4 of length 4 without it... counted as the tree does
    from course_utils.response_tree import ResponseTree
    tree = ResponseTree.build(["7+5="])
    assert len(tree.answers()) == 22621


def test_the_blank_takes_about_a_quarter_at_t1(sft):
    pi = _pi(sft, 1.0)
    assert 0.2 <= pi[EOS].sum() <= 0.3, f"P(<eos> first | 7+5=) = {pi[EOS].sum():.3f}"


def test_wrong_digits_and_no_eos_appear_by_t3(sft):
    rewards = two_token_rewards("7+5=")
    right_or_blank = (rewards == 1.0)
    right_or_blank[EOS] = True
    other = lambda t: 1 - _pi(sft, t)[right_or_blank].sum()      # noqa: E731 -- wrong digits, no <eos>
    assert other(3.0) >= 0.3 and other(3.0) > 5 * other(1.0), (other(1.0), other(3.0))


def test_kl_levels_off_at_minus_log_ref_of_12(sft, lab11):
    """Lab 11: as beta falls, the KL of Lab 11's tilted optimum (its Task 4 solution) grows and levels off at
    -log pi_ref(12), the KL of pi_ref conditioned on the one right answer (the only reward-1 response)."""
    ref, rewards = _pi(sft, 1.0), two_token_rewards("7+5=")
    kls = []
    for beta in (1.0, 0.3, 0.1, 0.03, 0.01, 0.003):
        p, _ = lab11["tilted_optimum"](ref, rewards, beta)
        kls.append(float((p[p > 0] * np.log(p[p > 0] / ref[p > 0])).sum()))
    assert all(a <= b + 1e-12 for a, b in zip(kls, kls[1:])), "the KL grows as beta falls"
    limit = -math.log(ref[rewards == 1.0].sum())
    assert abs(kls[-1] - limit) < 0.01 and abs(limit - 0.33) < 0.02, (kls[-1], limit)


def test_soft_value_lies_between_its_limits(sft, lab11):
    """Lab 11: the soft value V(i) of Lab 11's token_level_optimum (its Task 5 solution) is a *soft* maximum:
    between the expected reward under pi_ref(. | i) and the largest reward pi_ref(. | i) reaches, near the
    largest for a small beta and near the expected reward for a large one."""
    first, second = two_token_policy(two_token_logits(sft, "7+5="), 1.0)
    rewards = two_token_rewards("7+5=")
    rows = first > 0
    mean = (second * rewards).sum(1)[rows]
    best = np.where(second > 0, rewards, -np.inf).max(1)[rows]
    for beta in (0.01, 0.1, 1.0, 10.0):
        v = lab11["token_level_optimum"](first, second, rewards, beta)[2][rows]
        assert np.all(v >= mean - 1e-9) and np.all(v <= best + 1e-9), beta
    assert np.abs(lab11["token_level_optimum"](first, second, rewards, 1e-3)[2][rows] - best).max() < 0.05
    assert np.abs(lab11["token_level_optimum"](first, second, rewards, 1e3)[2][rows] - mean).max() < 0.05


def test_greedy_sft_hides_its_blanks(sft):
    from tests.rollouts import greedy
    from course_utils.labeler import gold_score
    prompts = [f"{a}+{b}=" for a in range(10) for b in range(10)]
    out = greedy(sft, prompts)
    blank = (out["mask"].sum(1) == 1) & (out["ids"][:, out["prompt_len"]] == EOS)
    assert blank.sum() == 0, f"{int(blank.sum())} blank greedy answers"
    sampled = _pi(sft, 1.0)[EOS].sum()
    assert sampled > 0.1 and (gold_score(out) < 0).float().mean() < 0.1


def test_only_k2_in_a_loss_follows_the_gradient_of_the_kl(lab11):
    """Lab 11, Question 1.4's model answer: over y ~ pi, the gradient of k1 averages to 0, k2's to the
    gradient of KL(pi || pi_ref) and k3's to that of KL(pi_ref || pi). The estimators are Lab 11's solution
    (Task 3); the expectations and both KLs are exact sums over a four-outcome policy."""
    kl_estimators = lab11["kl_estimators"]
    logits = torch.tensor([1.0, 0.0, -1.0, 0.5], dtype=torch.float64, requires_grad=True)
    ref = torch.log_softmax(torch.tensor([0.0, 1.0, 0.0, -2.0], dtype=torch.float64), 0)

    def grad(f):
        return torch.autograd.grad(f(torch.log_softmax(logits, 0)), logits)[0]

    def mean_grad(i):                   # E_{y ~ pi}[grad k_i(y)]: the sampling weights carry no gradient
        return grad(lambda logp: (logp.exp().detach() * kl_estimators(logp, ref)[i]).sum())

    forward = grad(lambda logp: (logp.exp() * (logp - ref)).sum())          # grad KL(pi || pi_ref)
    reverse = grad(lambda logp: (ref.exp() * (ref - logp)).sum())           # grad KL(pi_ref || pi)
    assert forward.abs().max() > 0.05 and (forward - reverse).abs().max() > 0.05   # three different targets
    assert torch.allclose(mean_grad(0), torch.zeros(4, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(mean_grad(1), forward, atol=1e-12)
    assert torch.allclose(mean_grad(2), reverse, atol=1e-12)


@pytest.fixture(scope="module")
def kl_spreads(sft, lab11):
    """{T: (std k1 / KL, std k3 / KL)}: Lab 11's exact spread of one-sample k1 and k3 on the two-token toy, as
    the notebook's KLEstimatorBothSides view computes it with Lab 11's kl_estimators (its Task 3 solution),
    checked against the same spreads computed here from the estimators' definitions (every response enumerated)."""
    from course_utils.views.lab11 import KLEstimatorBothSides

    view = KLEstimatorBothSides(sft, "7+5=", lab11["kl_estimators"])
    view._prepare()
    ref = _pi(sft, 1.0)
    for row in view.rows:
        p = _pi(sft, row["T"])
        w, log_ratio = p[p > 0], np.log(p[p > 0]) - np.log(ref[p > 0])       # log pi_T(y) / pi_ref(y)
        kl = float((w * log_ratio).sum())
        for name, k in (("k1", log_ratio), ("k3", np.exp(-log_ratio) - 1 + log_ratio)):
            std = math.sqrt(float((w * (k - (w * k).sum()) ** 2).sum())) / kl
            assert row["std"][name] == pytest.approx(std, rel=1e-6), (row["T"], name, row["std"][name], std)
    return {r["T"]: (r["std"]["k1"], r["std"]["k3"]) for r in view.rows}


def test_k1_and_k3_spreads_cross_near_t_0_7(kl_spreads):
    """Lab 11, Question 1b: k3 is noisier than k1 below T ~ 0.7, quieter above (and on the flatter side)."""
    k3_noisier = {t: k3 > k1 for t, (k1, k3) in kl_spreads.items()}
    assert all(k3_noisier[t] for t in kl_spreads if t <= 0.7), {t: kl_spreads[t] for t in kl_spreads if t <= 0.7}
    assert not any(k3_noisier[t] for t in kl_spreads if t >= 0.75), {t: kl_spreads[t] for t in kl_spreads if t >= 0.75}
    k1, k3 = kl_spreads[0.7]
    assert 0.8 <= k1 / k3 < 1, f"at T = 0.7 the two spreads are close (k1 / k3 = {k1 / k3:.3f})"


def test_the_k1_k3_gap_at_t_0_8_0_6_and_0_4(kl_spreads):
    """Lab 11, Question 1b: k1 about twice as noisy at T = 0.8; k3 about 2.7x at 0.6; at 0.4 k3's std is about
    3e4 times the KL, k1's about 2: four orders of magnitude."""
    ratio = {t: k1 / k3 for t, (k1, k3) in kl_spreads.items()}
    assert 1.7 <= ratio[0.8] <= 2.2, f"std k1 / std k3 at T = 0.8: {ratio[0.8]:.2f}, not about 2"
    assert 2.6 <= 1 / ratio[0.6] <= 2.8, f"std k3 / std k1 at T = 0.6: {1 / ratio[0.6]:.2f}, not about 2.7"
    k1, k3 = kl_spreads[0.4]
    assert 2.5e4 <= k3 <= 3.5e4 and 1.8 <= k1 <= 2.5, f"at T = 0.4: std/KL of k1 {k1:.3g}, of k3 {k3:.3g}"
    assert 1e4 <= k3 / k1 < 1e5, f"k3 / k1 at T = 0.4 is {k3 / k1:.3g}, not four orders of magnitude"


def test_k3_cancels_most_of_k1s_noise_near_t1_and_part_above(kl_spreads):
    """Lab 11, Question 1b: for T > 1 k3's spread is below k1's everywhere, and less than half of it up to 1.2."""
    above = {t: k3 / k1 for t, (k1, k3) in kl_spreads.items() if t > 1}
    assert all(r < 1 for r in above.values()), above
    assert all(r < 0.5 for t, r in above.items() if t <= 1.2), above
    assert max(above.values()) > 0.5, "far above T = 1 the cancellation is only partial, as the answer says"


def _lab12_code(containing):
    """The source of every code cell of Lab 12 (definitions and explore cells alike) holding ``containing``."""
    import nbformat
    from course_staff.solutions import notebook_path
    nb = nbformat.read(str(notebook_path("lab12")), as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code" and containing in c.source]


def test_run_b_has_a_learning_rate_33_times_run_as():
    """Lab 12, Experiment 9: run B is RLHFConfig(**RUN_B), changing the lr only, to 33 times run A's default."""
    import re
    from course_utils.runs import RUN_B
    config, = _lab12_code("class RLHFConfig")
    default = float(re.search(r"^\s*lr: float = ([0-9.e-]+)", config, re.M).group(1))
    view, = _lab12_code("views.HealthSignals(")
    assert "RLHFConfig(**RUN_B)" in view, "Experiment 9's cell no longer builds run B from RUN_B"
    assert set(RUN_B) == {"lr"}, RUN_B
    assert round(RUN_B["lr"] / default) == 33, (default, RUN_B)


def test_no_cell_before_question_5_names_run_bs_setting():
    """Lab 12: Question 5 asks which setting run B changed, so no code cell before it names a field of RUN_B."""
    import nbformat
    from course_staff.solutions import notebook_path
    from course_utils.runs import RUN_B
    nb = nbformat.read(str(notebook_path("lab12")), as_version=4)
    q5 = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and "#### Question 5" in c.source)
    health = [c.source for c in nb.cells[:q5] if c.cell_type == "code" and "HealthSignals(" in c.source]
    assert health, "Experiment 9's cell is not before Question 5"
    for field in RUN_B:
        assert not any(f"{field}=" in s for s in health), f"Experiment 9's cell names run B's {field}"



def test_lab11_two_token_gap_is_around_1e_15(sft, lab11):
    """Lab 11's SoftValueView: the largest gap between the token-level pi* (Task 5) and the tilted pi*
    (Task 4), with the reference solution, is float64 rounding ("around 1e-15") at every beta of the slider."""
    from course_utils.views.lab11 import SoftValueView
    first, second = two_token_policy(two_token_logits(sft, "7+5="), 1.0)
    view = SoftValueView(first, second, two_token_rewards("7+5="), lab11["token_level_optimum"],
                         lab11["tilted_optimum"]).prepare()
    gaps = [view.max_gap(b) for b in view.betas]
    assert max(gaps) < 1e-13, f"largest gap {max(gaps):.2e}: not float64 rounding"


@pytest.mark.slow
def test_train_rlhf_returns_only_the_policy_and_the_history(sft):
    """Lab 12: `train_rlhf` keeps its critic to itself (it returns only the policy and the history)."""
    from course_staff.solutions import load_lab
    from course_utils.reward_model import DigitRM
    from course_utils.tinylm import TinyLM
    lab12 = load_lab("lab12")
    result = lab12["train_rlhf"](sft, DigitRM(), 0.0, lab12["RLHFConfig"](iters=1))
    assert isinstance(result, tuple) and len(result) == 2
    policy, history = result
    assert type(policy) is TinyLM and isinstance(history, dict)
    assert not any(isinstance(v, torch.nn.Module) for v in history.values()), "a model in the history"


def test_k1_is_negative_for_some_samples(sft):
    """Lab 12: k1 = log pi(y) - log pi_ref(y) is negative wherever pi puts less mass than pi_ref, which a
    policy sampled from does with positive probability; its mean under pi is the KL (the two-token toy,
    pi at T = 0.8 against pi_ref at T = 1, every response enumerated)."""
    pi, ref = _pi(sft, 0.8), _pi(sft, 1.0)
    support = pi > 0
    k1 = np.log(pi[support]) - np.log(ref[support])
    assert pi[support][k1 < 0].sum() > 0.05, "k1 < 0 on a share of the samples"
    kl = float((pi[support] * np.log(pi[support] / ref[support])).sum())
    assert float((pi[support] * k1).sum()) == pytest.approx(kl, rel=1e-12) and kl > 0


@pytest.mark.slow
def test_an_sft_answer_scores_about_0(sft):
    """Lab 12: after subtracting r_offset (the mean score of N_OFFSET SFT samples), fresh SFT answers
    score about 0: their mean is within a tenth of one answer's spread of 0."""
    import random
    from course_staff.solutions import load_lab
    from course_utils.reward_model import digit_counts
    from course_utils.tinylm import make_batch, sample
    from course_utils.world import make_world
    w = make_world(load_lab("lab12")["train_reward_model"], 0)
    prompts, _ = make_batch(2000, random.Random(99))
    with torch.no_grad():
        scores = w.rm(digit_counts(sample(sft, prompts, generator=torch.Generator().manual_seed(99)))) - w.rm_offset
    assert abs(scores.mean().item()) < 0.1 * scores.std().item(), (scores.mean().item(), scores.std().item())


# ----------------------------------------------------------------------------- a KL term in a loss, on the toy
class _ToyTable:
    """Lab 11's two-token toy (prompt 7+5=) as a table policy: the SFT model's logits at temperature T as free
    parameters, theta1 (V,) of the first token and theta2 (V, V) of the second after each first token (BOS and
    PAD -inf; after EOS the response has ended: no second token). pi_ref: the SFT model at T = 1. Every sum
    below runs over every allowed response: exact, nothing sampled."""

    def __init__(self, sft, temperature, ref_second_temperature=1.0):
        z = two_token_logits(sft, "7+5=")
        self.theta1 = torch.tensor(z.first / temperature, requires_grad=True)
        self.theta2 = torch.tensor(z.second / temperature, requires_grad=True)
        self.ref1 = torch.log_softmax(torch.tensor(z.first), 0)
        self.ref2 = torch.log_softmax(torch.tensor(z.second) / ref_second_temperature, 1)
        self.m1 = torch.isfinite(self.ref1)                                     # allowed first tokens
        self.m2 = self.m1[:, None] & (torch.arange(len(self.m1)) != EOS)[:, None] & torch.isfinite(self.ref2)

    def logp(self):
        """(log pi(y1) (V,), log pi(y2 | y1) (V, V)) as functions of theta."""
        return torch.log_softmax(self.theta1, 0), torch.log_softmax(self.theta2, 1)

    def tokens(self, f):
        """[(weight (k,), f(log pi (k,), log pi_ref (k,)))] for the tokens of the first and of the second state:
        the weight is each token's probability of being sampled at its place in a response (pi, no gradient)."""
        lp1, lp2 = self.logp()
        d1, d2 = lp1.exp().detach(), (lp1[:, None] + lp2).exp().detach()
        return [(d1[self.m1], f(lp1[self.m1], self.ref1[self.m1])), (d2[self.m2], f(lp2[self.m2], self.ref2[self.m2]))]

    def per_state(self, f):
        """sum over the states s (unweighted) of sum_y pi(y | s) f(...): each state's own expectation."""
        lp1, lp2 = self.logp()
        p1, p2 = lp1.exp().detach(), lp2.exp().detach()
        return (p1[self.m1] * f(lp1[self.m1], self.ref1[self.m1])).sum() + \
            (p2[self.m2] * f(lp2[self.m2], self.ref2[self.m2])).sum()

    def kl_of_responses(self):
        """KL(pi || pi_ref) of whole responses, exact: the KL of the first token plus, after each first token y1,
        pi(y1) times the KL of the second (forbidden entries filled with 0 first: no nan reaches the gradient)."""
        lp1, lp2 = self.logp()
        lp1, ref1 = lp1.masked_fill(~self.m1, 0), self.ref1.masked_fill(~self.m1, 0)
        lp2, ref2 = lp2.masked_fill(~self.m2, 0), self.ref2.masked_fill(~self.m2, 0)
        first = (self.m1 * lp1.exp() * (lp1 - ref1)).sum()
        second = (self.m2 * lp2.exp() * (lp2 - ref2)).sum(1)
        return first + (self.m1 * lp1.exp() * second).sum()

    def k1_in_the_reward(self, whole=False):
        """The policy-gradient surrogate of PPO's penalty: each sampled token's log pi times the k1 of its own and every
        later token of its response (the reward-to-go of -k1; ``whole``: of every token of the response, as Lab 13's
        kl_in="reward" puts it in the score), probabilities and returns without gradient."""
        lp1, lp2 = self.logp()
        l1, l2 = (lp1 - self.ref1).detach(), (lp2 - self.ref2).detach()
        p1, p2 = lp1.exp().detach(), lp2.exp().detach()
        later = torch.where(self.m2, p2 * l2, torch.zeros_like(l2)).sum(1)       # E[k1 of y2 | y1]
        go1 = torch.where(self.m1, l1 + later, torch.zeros_like(l1))
        go2 = l2 + l1[:, None] if whole else l2
        return (p1[self.m1] * lp1[self.m1] * go1[self.m1]).sum() + \
            ((p1[:, None] * p2)[self.m2] * lp2[self.m2] * go2[self.m2]).sum()

    def grad(self, value):
        return torch.cat([g.flatten() for g in torch.autograd.grad(value, (self.theta1, self.theta2))])


def _k(lab11, i):
    """Lab 11's estimator k_{i+1} (its Task 3 solution) as a function of (log pi, log pi_ref)."""
    return lambda logp, ref: lab11["kl_estimators"](logp, ref)[i]


def _reverse_kl(logp, ref):
    return ref.exp() * (ref - logp) / logp.exp().detach()      # summed against pi(y | s): KL(pi_ref || pi) at s


def _forward_kl(logp, ref):
    return logp.exp() * (logp - ref) / logp.exp().detach()     # summed against pi(y | s): KL(pi || pi_ref) at s


def test_on_the_toy_k3_in_a_loss_follows_the_reverse_kl_at_each_state(sft, lab11):
    """Lab 13's GRPO loss (and Lab 11's Question 1): k3's value, summed over a response's tokens sampled from
    pi, is unbiased for KL(pi || pi_ref) of the response; its gradient in a loss is, state by state, that of
    KL(pi_ref || pi) at that state (k2's that of KL(pi || pi_ref) there, k1's 0). pi: the SFT model at
    T = 0.8 on the two-token toy, a table of logits (_ToyTable), every expectation an exact sum."""
    toy = _ToyTable(sft, 0.8)
    k1, k2, k3 = (_k(lab11, i) for i in range(3))
    value = sum((w * k).sum() for w, k in toy.tokens(k3))
    assert value.item() == pytest.approx(toy.kl_of_responses().item(), rel=1e-10) and value.item() > 0.01
    reverse, forward = toy.grad(toy.per_state(_reverse_kl)), toy.grad(toy.per_state(_forward_kl))
    assert (reverse - forward).abs().max() > 1e-3, "the two KLs pull apart here (by 1e7 times the tolerance)"
    assert torch.allclose(toy.grad(toy.per_state(k3)), reverse, atol=1e-10)
    assert torch.allclose(toy.grad(toy.per_state(k2)), forward, atol=1e-10)
    assert toy.grad(toy.per_state(k1)).abs().max() < 1e-10


def test_on_the_toy_k1_in_the_reward_follows_the_gradient_of_the_kl(sft):
    """Lab 11 (Question 1's model answer) and Lab 13: k1 put in the reward, where the policy gradient multiplies it
    (with the k1 of the tokens after it: the reward-to-go; or, as Lab 13's kl_in="reward", of the whole response)
    by grad log pi, follows the gradient of KL(pi || pi_ref) of whole responses, exactly, whatever pi_ref says of
    either token."""
    for ref_t2 in (1.0, 1.5):                     # pi_ref of the second token: the SFT model, or it at T = 1.5
        toy = _ToyTable(sft, 0.8, ref_second_temperature=ref_t2)
        kl = toy.grad(toy.kl_of_responses())
        assert kl.abs().max() > 0.01 and torch.allclose(toy.grad(toy.k1_in_the_reward()), kl, atol=1e-10)
        assert torch.allclose(toy.grad(toy.k1_in_the_reward(whole=True)), kl, atol=1e-10)


def test_on_the_toy_no_token_pays_for_later_tokens_kl_with_k3_in_the_loss(sft, lab11):
    """Lab 13: k3 in the loss is not PPO's penalty: the gradient it gives the first token's logits is the same
    whatever the reference says about the second token (no token pays for the KL of the tokens after it),
    while that of k1 in the reward (PPO's penalty) moves with it."""
    k3 = _k(lab11, 2)
    first = {}
    for ref_t2 in (1.0, 1.5):
        toy = _ToyTable(sft, 0.8, ref_second_temperature=ref_t2)
        n1 = toy.theta1.numel()
        loss = sum((w * k).sum() for w, k in toy.tokens(k3))
        first[ref_t2] = toy.grad(loss)[:n1], toy.grad(toy.k1_in_the_reward())[:n1]
    (k3_first, ppo_first), (k3_first_other, ppo_first_other) = first[1.0], first[1.5]
    assert torch.allclose(k3_first, k3_first_other, atol=1e-12), "k3 in the loss: the first token pays nothing later"
    assert (ppo_first - ppo_first_other).abs().max() > 0.01, "PPO's penalty charges the first token for later KL"
    assert (k3_first - ppo_first).abs().max() > 1e-3, "k3 in the loss is not PPO's penalty (exact sums: 1e-3 is far)"


def test_a_rare_sample_makes_k3s_gradient_enormous_where_k2s_stays_moderate(sft):
    """Lab 11, Question 1b: once pi is much sharper than pi_ref (T = 0.4 on the two-token toy), a single rare
    sample makes k3 and its gradient (1 - w) grad log pi enormous, while k2 = l^2 / 2 grows like (log w)^2 and
    its gradient l grad log pi stays moderate: the exact spread of the gradient's factor under pi, and its
    largest value over the responses pi can write."""
    pi, ref = _pi(sft, 0.4), _pi(sft, 1.0)
    p, log_ratio = pi[pi > 0], np.log(pi[pi > 0]) - np.log(ref[pi > 0])
    factors = {"k2": log_ratio, "k3": 1 - np.exp(-log_ratio)}          # grad k = factor * grad log pi

    def std(f):
        return math.sqrt(float((p * (f - (p * f).sum()) ** 2).sum()))

    assert std(factors["k3"]) > 1e3 * std(factors["k2"]), {k: std(f) for k, f in factors.items()}
    assert np.abs(factors["k3"]).max() > 1e15 and np.abs(factors["k2"]).max() < 100
    assert (log_ratio ** 2 / 2).max() < 1e-15 * (np.exp(-log_ratio) - 1 + log_ratio).max()


def test_question_1s_token_gives_k1_about_minus_0_92_and_k3_about_0_58(lab11):
    """Lab 11, Question 1's model answer: pi = 0.2, pi_ref = 0.5 give k1 = log 0.4 ~ -0.92 and k3 = 1.5 - log 2.5
    ~ 0.58 (Lab 11's kl_estimators, its Task 3 solution)."""
    logp, ref = (torch.tensor([math.log(x)], dtype=torch.float64) for x in (0.2, 0.5))
    k1, _, k3 = (float(k) for k in lab11["kl_estimators"](logp, ref))
    assert round(k1, 2) == -0.92 and k1 == pytest.approx(math.log(0.4), rel=1e-12)
    assert round(k3, 2) == 0.58 and k3 == pytest.approx(1.5 - math.log(2.5), rel=1e-12)


def test_the_reverse_kl_keeps_pi_covering_pi_ref_and_charges_little_for_mass_pi_ref_rarely_writes(sft):
    """Lab 11, Question 1's model answer: KL(pi_ref || pi), at the first token of the two-token toy (pi_ref: the
    SFT model): moving 10% of the mass onto the token pi_ref writes least costs it about 0.1 nat where KL(pi ||
    pi_ref) charges several times that; taking the mass off the token pi_ref writes most costs it more than twice
    the other KL, and without bound as the mass left goes to 0 (the other KL stays nearly where it was)."""
    ref = torch.log_softmax(torch.tensor(two_token_logits(sft, "7+5=").first), 0)
    ref = ref[torch.isfinite(ref)].exp()

    def kls(pi):
        return float((ref * (ref / pi).log()).sum()), float((pi * (pi / ref).log()).sum())   # reverse, forward

    rare = torch.zeros_like(ref).index_fill_(0, ref.argmin(), 1.0)
    reverse, forward = kls(0.9 * ref + 0.1 * rare)
    assert ref.min() < 1e-3 and reverse < 0.11 and forward > 5 * reverse, (float(ref.min()), reverse, forward)
    top = ref.argmax()
    deeper = []
    for keep in (1e-3, 1e-6):                  # the share of its mass the token pi_ref writes most keeps
        dropped = ref.clone().index_fill_(0, top, float(ref[top]) * keep)
        deeper.append(kls(dropped / dropped.sum()))
    (reverse, forward), (reverse_deeper, forward_deeper) = deeper
    assert reverse > 2 * forward and reverse_deeper - reverse > 2 and forward_deeper - forward < 0.1, deeper


@pytest.fixture(scope="module")
def lab13():
    """Lab 13's namespace: its reference solutions (course_staff.solutions)."""
    from course_staff.solutions import load_lab
    return load_lab("lab13")


def test_a_token_mean_weighs_a_response_by_its_length(lab13):
    """Lab 13, Question 3's model answer: with Lab 13's grpo_loss (its Task 3 solution), the gradient a response
    gets under the token mean is L / E[L] times what it gets under the sequence mean, which gives every response
    the same weight and each of its tokens 1 / L (lengths 1, 2 and 4; beta 0, pi_old = pi: no clipping)."""
    mask = torch.tensor([[1.0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.float64)
    lengths = mask.sum(1)
    per_response = {}
    for aggregate in ("sequence", "token"):
        logp = torch.full((3, 4), -1.0, dtype=torch.float64, requires_grad=True)
        loss, _ = lab13["grpo_loss"](logp, logp.detach(), logp.detach(), torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64),
                                     mask, 0.2, 0.0, aggregate)
        grad, = torch.autograd.grad(loss, logp)
        per_response[aggregate] = grad.sum(1)
        if aggregate == "sequence":
            assert torch.allclose(grad.abs(), mask / (3 * lengths[:, None]), atol=1e-12), "1 / L per token"
    assert torch.allclose(per_response["token"] / per_response["sequence"], lengths / lengths.mean(), atol=1e-12)


def test_a_sharper_policy_ties_more_and_larger_groups_tie_less(sft, lab13):
    """Lab 13, Question 3's model answer: a group whose k scores tie gets advantages all 0 (Lab 13's
    group_advantages), and the chance that k samples tie under gold (the two-token toy, exact: the sum over gold's
    values of P(value)^k) grows as the policy sharpens (T = 1 -> 0.5) and falls with k."""
    advantages = lab13["group_advantages"](torch.full((1, 4), 0.3, dtype=torch.float64))
    assert torch.equal(advantages, torch.zeros(1, 4, dtype=torch.float64))
    rewards = two_token_rewards("7+5=")

    def tie(temperature, k):
        pi = _pi(sft, temperature)
        return sum(float(pi[rewards == g].sum()) ** k for g in (-1.0, 0.0, 1.0))

    for k in (2, 4, 8):
        assert tie(0.5, k) > tie(1.0, k) + 0.05, (k, tie(0.5, k), tie(1.0, k))
    assert tie(1.0, 2) > tie(1.0, 4) > tie(1.0, 8)
