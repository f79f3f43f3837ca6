"""The claims ledger: every quantitative or causal sentence the notebooks state as fact, quoted
verbatim, with the science criterion (benchmarks/science_*.py, over 5 seeds, each against a negative
control) or the test that shows it.

    python -m benchmarks.claims                 # the ledger's state: quotes found
    python -m benchmarks.claims --unledgered    # sentences with a number or a comparison the ledger lacks

A claim's ``backed_by`` names criteria as ``experiment.criterion`` (``lab12.kl_penalty.hack``), tests
as ``tests/file.py::test_name``, and figures of time or cost as ``measured:experiment.figure`` or
``measured:bench.figure`` (the measurement lane: stated with the machine that measured them, never a
criterion; a bench figure is quoted within its band, benchmarks/figures.py's BANDS). After a science run
a claim is *backed* when its quote is in its notebook, every criterion it names was met on every seed
with every control failing, and every test it names ran and passed in that run (``run_tests``); a
sentence backed by measured figures only is counted apart. `make science` prints ``claims: K/N
backed`` first (before the run: quotes found, backings named) and again with its closing lines.
tests/test_claims.py fails when a quote no longer appears in its notebook or a backing names nothing.

This module imports nothing of science.py: science.py passes it the criteria's names and the run's
results (the names of quoted figures of time come from benchmarks/quoted.py).

Quotes are matched with whitespace collapsed (a re-wrapped line is the same sentence); ``$...$`` is
kept as written. A quote may be a whole sentence or the clause of one that carries the claim.
"""

import argparse
import dataclasses
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.etree import ElementTree

from benchmarks import quoted
from course_staff.course import LABS, REPO

# the notebooks whose sentences the ledger holds: every lab's source, and the two companions
NOTEBOOKS = {**{lab: f"source/{lab}/{lab}.ipynb" for lab in LABS},
             "start": "notebooks/00_start_here.ipynb", "beyond": "notebooks/beyond_ppo.ipynb"}


@dataclasses.dataclass(frozen=True)
class Claim:
    where: str          # a key of NOTEBOOKS
    quote: str          # verbatim (whitespace collapsed when matched)
    backed_by: tuple    # "experiment.criterion" or "tests/file.py::test_name"


def C(where, quote, *backed_by):
    return Claim(where, quote, backed_by)


MEASURED = "measured:"            # a figure of the measurement lane (science_*.MEASURED), stated with its machine
T = "tests/test_claims.py::"          # exact facts of the toy, computed by tests/test_claims.py
H = "lab12.health."                  # Lab 12's Experiment 9 (benchmarks/science_lab12.py)
CLAIMS = (
    # ------------------------------------------------------------------ Lab 11
    C("lab11", "so it is right about 3 times in 4 and sometimes answers with an empty response",
      T + "test_sft_is_right_about_three_times_in_four"),
    C("lab11", "$k_2$ in a loss follows the gradient of $\\mathrm{KL}(\\pi_\\theta \\,\\|\\, \\pi_{\\text{ref}})$ at the state",
      "tests/test_claims.py::test_only_k2_in_a_loss_follows_the_gradient_of_the_kl"),
    C("lab11", "at $T = 0$ every sample is the same answer", "tests/test_twotoken.py::test_temperature_zero_is_one_hot"),
    C("lab11", "near $T = 1$ the empty response (`<eos>` first) takes about a quarter of the mass",
      T + "test_the_blank_takes_about_a_quarter_at_t1"),
    C("lab11", "by $T = 3$ wrong digits and answers without `<eos>` appear", T + "test_wrong_digits_and_no_eos_appear_by_t3"),
    C("lab11", "$k_1$ is unbiased — its mean is the KL — but a single sample of it can be negative, and it swings "
      "from sample to sample: it is noisy.", "lab11.kl_estimators.unbiased", "lab11.kl_estimators.k3_quiet"),
    C("lab11", "$k_2$ is never negative and, for nearby policies, much less noisy than $k_1$, but it is biased",
      "lab11.kl_estimators.k2_quiet", "lab11.kl_estimators.k2_biased"),
    C("lab11", r"$k_3 = k_1 + (w - 1)$ is unbiased too, never negative, and much less noisy for nearby policies.",
      "lab11.kl_estimators.unbiased", "lab11.kl_estimators.k3_quiet"),
    C("lab11", r"Expected: $k_1$ and $k_3$ have bias $\approx 0$ (up to sampling noise), $k_2$ does not once the "
      "policies drift apart; $k_3$'s spread is far below $k_1$'s when $\\pi$ is close to $\\pi_{\\text{ref}}$.",
      "lab11.kl_estimators.unbiased", "lab11.kl_estimators.k2_biased", "lab11.kl_estimators.k3_quiet"),
    C("lab11", r"$w - 1$ is a control variate that cancels most of $k_1$'s noise when $w \approx 1$.",
      "lab11.kl_estimators.k3_quiet"),
    C("lab11", r"$k_1$ in a loss pulls nowhere on average, whatever its value", T + "test_only_k2_in_a_loss_follows_the_gradient_of_the_kl"),
    C("lab11", r"$k_3$ in a loss follows the gradient of the *other* KL",
      "tests/test_beyond_ppo.py::test_k3_in_the_loss_follows_the_gradient_of_the_reverse_kl",
      "tests/test_claims.py::test_only_k2_in_a_loss_follows_the_gradient_of_the_kl"),
    C("lab11", r"$k_3$'s low variance makes it the better estimator to *report* the KL, not the better term to "
      "differentiate.", "lab11.kl_estimators.k3_quiet", T + "test_only_k2_in_a_loss_follows_the_gradient_of_the_kl"),
    C("lab11", r"which is largest, equal to $\beta \log Z$, exactly when $\pi = \pi^*$.", "lab11.optimum.best"),
    C("lab11", r"$1 \cdot \log \frac{1}{\pi_{\text{ref}}(\texttt{12})} = -\log \pi_{\text{ref}}(\texttt{12}) \approx 0.33$",
      T + "test_kl_levels_off_at_minus_log_ref_of_12"),
    C("lab11", "a *soft* maximum", T + "test_soft_value_lies_between_its_limits"),
    C("lab11", "which should be around $10^{-15}$",
      T + "test_lab11_two_token_gap_is_around_1e_15"),
    C("lab11", r"$k_3$ unbiased and quiet near $\pi_{\text{ref}}$ (Task 3)",
      "lab11.kl_estimators.unbiased", "lab11.kl_estimators.k3_quiet"),
    C("lab11", r"The two curves cross near $T \approx 0.7$: at $T = 0.8$ one sample of $k_1$ is still about twice as "
      r"noisy as one of $k_3$, at $T = 0.6$ $k_3$ is already about 2.7 times noisier, and at $T = 0.4$ its standard "
      r"deviation is about $3 \cdot 10^4$ times the KL, against about 2 for $k_1$: four orders of magnitude worse.",
      T + "test_k1_and_k3_spreads_cross_near_t_0_7", T + "test_the_k1_k3_gap_at_t_0_8_0_6_and_0_4"),
    C("lab11", r"then the control variate $w - 1$ cancels part of $k_1$'s noise (most of it near $T = 1$: $k_3$'s "
      r"spread is less than half of $k_1$'s up to $T = 1.2$).", T + "test_k3_cancels_most_of_k1s_noise_near_t1_and_part_above"),
    C("lab11", r"$k_3$ is the better estimator only near $\pi_{\text{ref}}$ or for flatter policies.",
      T + "test_k1_and_k3_spreads_cross_near_t_0_7", T + "test_k3_cancels_most_of_k1s_noise_near_t1_and_part_above"),
    C("lab11", r"reads the crossover (between $T = 0.6$ and $0.8$) and the size of the gap at $T = 0.4$ (orders of "
      r"magnitude, $k_3$ worse)", T + "test_k1_and_k3_spreads_cross_near_t_0_7", T + "test_the_k1_k3_gap_at_t_0_8_0_6_and_0_4"),
    C("lab11", r"$l = \log 0.2 - \log 0.5 = \log 0.4 \approx -0.92$, so $k_1 \approx -0.92$.",
      T + "test_question_1s_token_gives_k1_about_minus_0_92_and_k3_about_0_58"),
    C("lab11", r"With $w = \pi_{\text{ref}}/\pi = 2.5$: $k_3 = w - 1 - \log w = 1.5 - 0.92 \approx 0.58$.",
      T + "test_question_1s_token_gives_k1_about_minus_0_92_and_k3_about_0_58"),
    C("lab11", r"The gradient of $\mathrm{KL}(\pi_\theta \,\|\, \pi_{\text{ref}})$ also comes from $k_1$ put in the "
      r"*reward*, where the policy gradient multiplies it by $\nabla_\theta \log \pi_\theta$ (Lab 12 does this).",
      T + "test_on_the_toy_k1_in_the_reward_follows_the_gradient_of_the_kl"),
    C("lab11", r"Such responses are rarely sampled, but when one is, $k_3 \approx w$ grows *linearly* in $w$, while $k_1 = "
      r"-\log w$ grows only logarithmically: $k_3$ has a heavy tail",
      T + "test_a_rare_sample_makes_k3s_gradient_enormous_where_k2s_stays_moderate", T + "test_the_k1_k3_gap_at_t_0_8_0_6_and_0_4"),
    C("lab11", r"Once the policy is much sharper than its reference, a single rare sample can make $k_3$ (and its gradient) "
      r"enormous: the penalty becomes a high-variance, occasionally exploding term.",
      T + "test_a_rare_sample_makes_k3s_gradient_enormous_where_k2s_stays_moderate", T + "test_the_k1_k3_gap_at_t_0_8_0_6_and_0_4"),
    C("lab11", r"In a loss it is then safer to use $k_2 = \tfrac12 l^2$ (its mean gradient is that of $\mathrm{KL}(\pi_\theta "
      r"\,\|\, \pi_{\text{ref}})$, Question 1, and it grows only like $(\log w)^2$), $k_1$ in the *reward* as PPO does "
      r"(Lab 12), the exact per-token KL, or a clipped $w$ inside $k_3$ — not $k_1$ in the loss, whose mean gradient is 0 "
      r"(Question 1).", T + "test_only_k2_in_a_loss_follows_the_gradient_of_the_kl",
      T + "test_on_the_toy_k3_in_a_loss_follows_the_reverse_kl_at_each_state",
      T + "test_a_rare_sample_makes_k3s_gradient_enormous_where_k2s_stays_moderate",
      T + "test_on_the_toy_k1_in_the_reward_follows_the_gradient_of_the_kl"),
    C("lab11", r"$k_1$ remains the safer number to *report*, and the estimator's spread should be monitored.",
      T + "test_k1_and_k3_spreads_cross_near_t_0_7", T + "test_the_k1_k3_gap_at_t_0_8_0_6_and_0_4"),
    C("lab11", r"which keeps $\pi_\theta$ covering what $\pi_{\text{ref}}$ writes but charges little for mass on responses "
      r"$\pi_{\text{ref}}$ rarely writes",
      T + "test_the_reverse_kl_keeps_pi_covering_pi_ref_and_charges_little_for_mass_pi_ref_rarely_writes"),
    C("lab11", r"A single sample that $\pi_{\text{ref}}$ likes more than $\pi$ does has $l < 0$; on average such samples are "
      r"outweighed by the ones $\pi$ likes more (they are drawn more often, precisely because $\pi$ likes them).",
      T + "test_k1_is_negative_for_some_samples"),
    C("lab11", r"The target of KL-regularized RL, $\pi^* \propto \pi_{\text{ref}}\, e^{r/\beta}$, with $J(\pi^*) = \beta \log Z$ "
      r"(Task 4), built token by token with soft values (Task 5).", "lab11.optimum.best",
      T + "test_lab11_two_token_gap_is_around_1e_15"),
    C("lab11", r"In Lab 12 a learned reward model replaces the answer key and PPO climbs towards $\pi^*$.",
      "beyond.optima.ppo_near_opt"),
    # ------------------------------------------------------------------ Lab 12
    C("lab12", "It was trained by supervised fine-tuning (SFT) on sloppy demonstrations, so it is often right, sometimes "
      "wrong, and sometimes answers nothing at all.", T + "test_sft_is_right_about_three_times_in_four"),
    C("lab12", "Each run (120 iterations of 64 prompts) takes about 2.3 s of CPU on the course's test machine, about 5 s "
      "on an older laptop", MEASURED + "bench.ppo_run", MEASURED + "bench.ppo_run.slow"),
    C("lab12", "Reason: `DigitRM` is linear in the digit counts with every weight positive", "lab12.reward_model.sign"),
    C("lab12", "Once blanks are gone, the only way left to raise the RM score is to add digits, which the labeler does "
      "not want: gold falls.", "lab12.kl_penalty.hack", "lab12.hack.spams_heavy"),
    C("lab12", "What keeps a policy away is the KL penalty: with a larger $\\beta$, $e^{r/\\beta}$ is gentle and $\\pi^*$ "
      "stays close to $\\pi_{\\text{ref}}$, where the reward model was fitted and is right.",
      "beyond.optima.optimum_hacks", "lab12.improves.improves"),
    C("lab12", r"even a right answer beats a blank only with probability $\sigma(0.6) \approx 0.65$",
      "tests/test_prefs.py::test_plackett_luce_pairwise_probabilities"),
    C("lab12", "An accuracy of about 55% looks poor until you see the ceiling next to it",
      "lab12.reward_model.ceiling", "lab12.reward_model.as_counting"),
    C("lab12", "and yours is within about a point of the best possible.",
      "lab12.reward_model.ceiling"),
    C("lab12", "Against the gold order, the same model is right on about nine pairs out of ten.",
      "lab12.reward_model.gold_order"),
    C("lab12", "A model that simply counts digits (every weight 1) scores the same as yours, within about a point on "
      "both figures: on this labeler a linear digit-count model does no better than counting.",
      "lab12.reward_model.as_counting"),
    C("lab12", "What the fit does add is the sign (learned from the labeler, not assumed: a model fit on shuffled "
      "rankings gets weights of both signs and orders the gold pairs no better than a coin)",
      "lab12.reward_model.sign", "lab12.reward_model.gold_order"),
    C("lab12", "we subtract the mean score of SFT samples, $r_{\\text{offset}}$, so that an SFT answer scores about 0",
      T + "test_an_sft_answer_scores_about_0"),
    C("lab12", "is a single-sample estimate of the KL — Lab 11's $k_1$, unbiased, and negative for some samples.",
      "lab11.kl_estimators.unbiased", T + "test_k1_is_negative_for_some_samples"),
    C("lab12", "The RM score will go up steadily; the gold score will fall towards $-1$ (every answer malformed), "
      "perhaps after a short rise while blanks disappear.",
      "lab12.kl_penalty.hack", "lab12.hack.all_malformed", "lab12.hack.rises_first"),
    C("lab12", "1. Why does the gold score first *rise*, and then fall?", "lab12.hack.rises_first", "lab12.kl_penalty.hack"),
    C("lab12", "The KL to the SFT model climbs to tens of nats and levels off there.", "lab12.hack.kl_plateau"),
    C("lab12", "Both agree, so gold rises.", "lab12.hack.rises_first"),
    C("lab12", "Four copies of one digit and no `<eos>`", "lab12.hack.spams_heavy",
      "lab12.hack.all_malformed"),
    C("lab12", "The policy ends up giving (nearly) one response to every prompt, four copies of one digit",
      "lab12.hack.spams_heavy", "lab12.hack.kl_plateau"),
    C("lab12", "four digits without `<eos>`", "lab12.hack.all_malformed"),
    C("lab12", "So the KL levels off near the mean over the prompts of $-\\log \\pi_{\\text{ref}}(dddd \\mid x)$ "
      "(within a factor of 1.5: the policy is not quite a point mass, a few of its answers mix in other digits): tens "
      "of nats, because the SFT model almost never writes four equal digits, but finite", "lab12.hack.kl_plateau"),
    C("lab12", "so its score keeps rising while the truth falls", "lab12.kl_penalty.hack"),
    C("lab12", "the plateau — the policy collapses onto one response, so its KL levels off near $-\\log "
      "\\pi_{\\text{ref}}$ of that response", "lab12.hack.kl_plateau"),
    C("lab12", "the fall of gold to $-1$ — the answers are malformed for the labeler while the RM score keeps rising",
      "lab12.hack.all_malformed", "lab12.kl_penalty.hack"),
    C("lab12", "the rise — removing blanks improves both the RM score and the gold score.", "lab12.hack.rises_first"),
    C("lab12", "With $\\beta = 0.1$ the KL settles at a few tenths of a nat", "lab12.kl_penalty.small_kl"),
    C("lab12", "the malformed fraction drops, and the gold score *improves* over the SFT model.",
      "lab12.improves.fewer_malformed", "lab12.improves.improves"),
    C("lab12", "over the last third of training the KL stays a little above its target.", "lab12.controller.hovers"),
    C("lab12", "At $\\beta = 0.05$ the penalty is too weak and the policy drifts into the reward model's blind spot.",
      "lab12.ptx.keeps_and_gains", "lab12.kl_penalty.small_kl"),
    C("lab12", "so ptx keeps the SFT model's accuracy where the weak penalty alone lets the policy drift into the "
      "RM's blind spot.", "lab12.ptx.keeps_and_gains"),
    C("lab12", "the RM still pays for digits (here PPO-ptx still raises the RM score)", "lab12.ptx.keeps_and_gains"),
    C("lab12", "Yet it ends below plain PPO at $\\beta = 0.1$ (compare the plot's final gold scores: 0.1 to 0.3 lower "
      "over the course's five seeds)",
      "lab12.ptx.below_default"),
    C("lab12", "every run settles at its own KL, many nats at $\\beta = 0.05$ but a few tenths of a nat at $0.1$",
      "lab12.kl_penalty.small_kl"),
    C("lab12", "The RM score rises with $d$. The gold score first rises, peaks at a small distance, then falls to $-1$", "lab12.kl_penalty.hack", "lab12.hack.rises_first",
      "lab12.hack.all_malformed"),
    C("lab12", "at 0 (greedy) the SFT model hides its blanks; as the temperature rises, malformed answers appear.",
      T + "test_greedy_sft_hides_its_blanks"),
    C("lab12", "each prompt has exactly 22,621 possible responses", T + "test_each_prompt_has_22621_responses"),
    C("lab12", "the SFT model, where PPO started, has $J \\approx 0$ (the offset centres its scores, and its KL to "
      "itself is 0)", T + "test_an_sft_answer_scores_about_0"),
    C("lab12", "scores far below the SFT model on gold, as PPO does.", "beyond.optima.optimum_hacks"),
    C("lab12", "PPO, which lands near $\\pi^*$ (within a quarter of a nat of it at $\\beta = 0.1$, where its shortfall "
      "$J^* - J$ is a small fraction of $J^*$, about all there was to gain over the SFT model), simply did its job.",
      "beyond.optima.ppo_near_opt"),
    C("lab12", "Reward hacking is a property of the objective (a proxy reward with too little penalty), not a "
      "failure of the optimizer", "beyond.optima.optimum_hacks", "beyond.optima.ppo_near_opt"),
    C("lab12", "A reward model can be **as accurate as the labels allow** and still be a poor objective",
      "lab12.reward_model.ceiling", "lab12.kl_penalty.hack"),
    C("lab12", "The adaptive controller lets you set the penalty as a KL budget instead of a $\\beta$",
      "lab12.controller.reaches"),
    C("lab12", "Gold against $\\sqrt{\\mathrm{KL}}$ has a peak", "lab12.hack.rises_first", "lab12.hack.all_malformed"),
    C("lab12", "Task 5's loss is a *token mean*: in a batch of $N$ real tokens each token weighs $1/N$, so a response "
      "of $L$ tokens weighs $L/N$.", "tests/test_lab12_views.py::test_length_weights_of_a_known_batch"),
    C("lab12", "so that each response weighs $1/B$ and each of its tokens $1/(BL)$",
      "tests/test_lab12_views.py::test_length_weights_of_a_known_batch"),
    C("lab12", "In the SFT model's batches a token of a 1-token response (a blank) gets about 2.2 times its token-mean "
      "weight and a token of a 3-token response about 0.7 times", T + "test_sft_responses_average_about_2_2_tokens"),
    C("lab12", "the two means differ only when the lengths in a batch differ",
      "tests/test_lab12_views.py::test_length_weights_of_a_known_batch"),
    C("lab12", "On this toy neither needs estimating: every response of up to four tokens can be enumerated, so for a "
      "given policy $\\pi$ the course computes exactly, backwards from the complete responses,",
      "tests/test_lab12_views.py::test_exact_policy_values_match_monte_carlo"),
    C("lab12", "a cross-check of the exact values: at the exact optimum $\\pi^*$ of $\\beta = 0.1$, $V^{\\pi^*}$ computed "
      "the same way against the soft values of Lab 11", "tests/test_lab12_views.py::test_at_the_optimum_the_policy_value_is_the_soft_value"),
    C("lab12", "`train_rlhf` keeps its critic to itself (it returns only the policy and the history)",
      T + "test_train_rlhf_returns_only_the_policy_and_the_history"),
    C("lab12", "so with $V = V^\\pi$ that is exactly $Q^\\pi(x, y_{<t}, y_t)$",
      "tests/test_lab12_views.py::test_critic_view_looks_up_the_exact_values_of_each_token"),
    C("lab12", "the error that grows with $\\lambda$ is sampling noise, variance with no bias.",
      "tests/test_lab12_views.py::test_critic_view_looks_up_the_exact_values_of_each_token"),
    C("lab12", "it inherits the critic's errors: a bias (about 0.04 RMS here, the dashed line)", "lab12.critic.bias"),
    C("lab12", "The total is smallest at a large $\\lambda$, between 0.8 and 1 here, close to the default 0.95.",
      "lab12.critic.best_lambda"),
    C("lab12", "A better critic lowers the left end of the blue line, so the best $\\lambda$ moves towards 0",
      "lab12.critic.best_lambda"),
    C("lab12", "Run A is the default configuration; run B is the same with a learning rate 33 times larger.",
      T + "test_run_b_has_a_learning_rate_33_times_run_as"),
    C("lab12", "Why is run B's value loss nonetheless many times larger?", H + "value_loss"),
    C("lab12", "a few percent in run A (normal); in run B more than half at the first iteration, and still above 5% "
      "over the table's last third", H + "clip_normal", H + "clip_first"),
    C("lab12", "The KL to the SFT model jumps to several nats after a single update (run A stays at a few tenths of a "
      "nat): the policy leaves the reference at once.", H + "kl_jump", "lab12.kl_penalty.small_kl"),
    C("lab12", "The value loss is more than ten times run A's over the first ten iterations.", H + "value_loss"),
    C("lab12", "All three warn from the start, long before anything could be read off an outcome.",
      H + "clip_first", H + "kl_jump", H + "value_loss"),
    C("lab12", "Run B's final policy has a lower entropy than run A's: it explores less and has collapsed further "
      "onto a few answers.", H + "sharper"),
    C("lab12", "The first change is the learning rate, back towards run A's $3 \\cdot 10^{-4}$, where the clip fraction "
      "is a few percent", H + "clip_normal"),
    C("lab12", "run B's (over half at the first iteration, still above 5% at the end, where run A's is a few percent) "
      "means steps far beyond the trust region.", H + "clip_first", H + "clip_normal"),
    C("lab12", "(the KL jump to several nats after one update, or the value loss more than ten times run A's over the "
      "first iterations)", H + "kl_jump", H + "value_loss"),
    C("lab12", "the entropies (B's lower than A's: less exploration)", H + "sharper"),
    # ------------------------------------------------------------------ Lab 13
    C("lab13", "Five runs: about 17 s of CPU on the course's test machine, about 38 s on an older laptop.",
      MEASURED + "bench.lab13_experiment_1", MEASURED + "bench.lab13_experiment_1.slow"),
    C("lab13", r"its *value* is unbiased on tokens sampled from $\pi_\theta$",
      T + "test_on_the_toy_k3_in_a_loss_follows_the_reverse_kl_at_each_state", "lab11.kl_estimators.unbiased"),
    C("lab13", r"its *gradient*, Lab 11's Question 1 found, is on average that of $\mathrm{KL}(\pi_{\text{ref}}\,\|\,\pi_\theta)$ "
      r"at each sampled state", T + "test_on_the_toy_k3_in_a_loss_follows_the_reverse_kl_at_each_state",
      T + "test_only_k2_in_a_loss_follows_the_gradient_of_the_kl"),
    C("lab13", r"Second, $k_3$ in the loss is not PPO's penalty: its gradient is on average that of $\mathrm{KL}(\pi_{\text{ref}}"
      r"\,\|\,\pi_\theta)$ at each sampled state (Lab 11, Question 1), and no token pays for the KL of the tokens after it, "
      r"so it need not lead to $\pi^*_{RM}$ even on the reward's scale (Experiment 3 separates the two).",
      T + "test_on_the_toy_k3_in_a_loss_follows_the_reverse_kl_at_each_state",
      T + "test_on_the_toy_no_token_pays_for_later_tokens_kl_with_k3_in_the_loss", "lab13.grpo.mean_only_lands"),
    C("lab13", r'`kl_in="reward"` puts $\beta$' r"'s term inside the score, before the normalization, so it is scaled with the "
      r"reward, as PPO's KL penalty of the whole response: $J$ is again the objective (up to the same $1/L$ and std "
      r"weighting).", T + "test_on_the_toy_k1_in_the_reward_follows_the_gradient_of_the_kl", "lab13.grpo.lands"),
    C("lab13", r"even unscaled, $\beta k_3$ in the loss is not PPO's penalty of the same $J$ (its gradient is that of "
      r"$\mathrm{KL}(\pi_{\text{ref}}\,\|\,\pi_\theta)$ per state, and no token pays for the KL of later ones)",
      T + "test_on_the_toy_k3_in_a_loss_follows_the_reverse_kl_at_each_state",
      T + "test_on_the_toy_no_token_pays_for_later_tokens_kl_with_k3_in_the_loss", "lab13.grpo.mean_only_lands"),
    C("lab13", r"A token mean weighs a response by its length ($L/\mathbb{E}[L]$ relative to a response mean): long responses "
      r"get more of the gradient, whether their advantage is positive or negative; a response mean gives every response "
      r"the same weight and each of its tokens $1/L$.", T + "test_a_token_mean_weighs_a_response_by_its_length"),
    C("lab13", r"A policy that concentrates on one answer ties more often: $k$ samples all give an answer of probability $p$ "
      r"with probability $p^k$, and such a group's advantages are all 0: the reward gives it no gradient; so the share "
      r"grows if training sharpens the policy.", T + "test_a_sharper_policy_ties_more_and_larger_groups_tie_less"),
    C("lab13", r"It falls with $k$ ($p^k$ does), at the cost of $k$ samples per prompt.",
      T + "test_a_sharper_policy_ties_more_and_larger_groups_tie_less"),
    C("lab13", "With 2000 noisy rankings of SFT samples it need not get there: the pairs tell DPO nothing about responses "
      "the SFT model never writes, and it fits their noise (Experiment 2).", "beyond.dpo.overfit"),
    C("lab13", "GRPO with the KL in the reward lands next to $\\pi^*_{RM}$, as Lab 12's PPO does",
      "lab13.grpo.lands", "beyond.optima.ppo_near_opt"),
    C("lab13", "the policy walks off and does not land near $\\pi^*_{RM}$.", "lab13.grpo.lands"),
    C("lab13", "The gold score falls after the first epoch, while the held-out accuracy moves by less than a point",
      "beyond.dpo.overfit", "beyond.dpo.blind"),
    C("lab13", "With the KL in the score, both cells land near $\\pi^*_{RM}$ (within a quarter of a nat), scaled or not",
      "lab13.grpo.lands", "lab13.grpo.mean_only_lands"),
    C("lab13", "With $k_3$ in the loss the policy as written in Task 4 does not land near $\\pi^*_{RM}$, and without "
      "the std scaling it does not land near it either", "lab13.grpo.lands", "lab13.grpo.mean_only_lands"),
    # ------------------------------------------------------------------ start here
    C("start", "The whole notebook takes about 1.2 s of CPU on the course's test machine (about 2 s on an older laptop)",
      MEASURED + "bench.run_all_start_here", MEASURED + "bench.run_all_start_here.slow"),
    C("start", "a one-layer transformer of about 14 000 parameters", T + "test_tinylm_has_about_14000_parameters"),
    C("start", "So the SFT model adds well, but not perfectly.", "tests/test_sft.py::test_sft_adds_well_but_not_perfectly"),
    C("start", "You should see an exact accuracy somewhere between 0.5 and 0.9, and a few malformed answers.",
      "tests/test_sft.py::test_sft_adds_well_but_not_perfectly"),
    C("start", "Every random draw in the labs is seeded: running a cell again gives the same numbers.",
      "tests/test_lab11_views.py::test_views_use_only_seeded_randomness",
      "tests/test_tinylm.py::test_sample_is_reproducible_from_a_generator"),
    # ------------------------------------------------------------------ Beyond PPO
    C("beyond", "*Run All* reads them: about 8 s of CPU on the course's test machine, about 17 s on an older laptop.",
      MEASURED + "bench.run_all_beyond", MEASURED + "bench.run_all_beyond.slow"),
    C("beyond", "At $\\beta = 0.05$ the labeler's own optimum answers almost every prompt correctly (gold $\\ge +0.95$), "
      "while the reward model's optimum hacks, far below the SFT model's gold.",
      "beyond.optima.reward_limits", "beyond.optima.optimum_hacks"),
    C("beyond", "At $\\beta = 0.1$ PPO lands within a quarter of a nat of the reward model's optimum.",
      "beyond.optima.ppo_near_opt"),
    C("beyond", "At $\\beta = 0.05$, where PPO hacks the reward model, DPO keeps a good gold score; but at DPO's own KL, "
      "on the frontier of PPO's $\\beta$ sweep, PPO scores the same gold (within 0.1). DPO's lead at equal $\\beta$ is "
      "its smaller KL.", "beyond.dpo.on_frontier"),
    C("beyond", "At $\\beta = 0.1$ its gold score falls from the first epoch to the fourth, while its accuracy on "
      "held-out pairs moves by less than a point.", "beyond.dpo.overfit", "beyond.dpo.blind"),
    C("beyond", "off the score's scale, GRPO ends many nats from $\\pi^*_{RM}$ whichever the placement; with the KL in "
      "the reward *and* on the score's scale, it lands near $\\pi^*_{RM}$ — without a critic, in the same CPU time.",
      "beyond.grpo.reward_scaled_lands", "beyond.grpo.k3_scaled_stays", MEASURED + "beyond.budget.cpu_ratio"),
    C("beyond", "scale does not drift, but does not land near $\\pi^*_{RM}$ either.)",
      "beyond.grpo.reward_scaled_lands", "beyond.grpo.k3_scaled_stays"),
    C("beyond", "a gold score far below the SFT model's and one near $+1$ (the table above): many answers of the "
      "reward model's optimum are malformed", "beyond.optima.reward_limits", "beyond.optima.optimum_hacks"),
    C("beyond", "no optimizer recovers what the reward does not contain.", "beyond.optima.reward_limits"),
    C("beyond", "From the first epoch to the fourth, DPO's gold score falls while the accuracy on held-out pairs "
      "drifts by less than a point: the policy is fitting the labeler's noise.",
      "beyond.dpo.overfit", "beyond.dpo.blind"),
    C("beyond", "The held-out pairs barely see a fall of about 0.1 in the gold score, and early stopping on them would "
      "stop almost anywhere; read from the start, the SFT model, the same pairs do move by more than a point: what "
      "they can tell, DPO learns in its first epoch.", "beyond.dpo.overfit", "beyond.dpo.blind"),
    C("beyond", "At $\\beta = 0.05$ DPO is far above PPO at the same $\\beta$, where PPO hacks the reward model",
      "beyond.dpo.on_frontier"),
    C("beyond", "The penalty GRPO's gradient applies is the *other* KL.",
      "tests/test_beyond_ppo.py::test_k3_in_the_loss_follows_the_gradient_of_the_reverse_kl"),
    C("beyond", "**80 iterations, which cost about the CPU time of PPO's 120**", MEASURED + "beyond.budget.cpu_ratio"),
    C("beyond", "this, not the gradient of $k_3$, is what makes GRPO drift (below).",
      "beyond.grpo.reward_scaled_lands", "beyond.grpo.k3_scaled_stays"),
    C("beyond", "In the same CPU time, GRPO with $k_3$ in the loss leaves the SFT model far behind",
      "beyond.grpo.k3_scaled_stays", MEASURED + "beyond.budget.cpu_ratio"),
    C("beyond", "with the KL in the reward, GRPO's curves follow PPO's.", "beyond.grpo.reward_scaled_lands"),
    C("beyond", "off the score's scale, GRPO ends many nats from $\\pi^*_{RM}$ with $k_3$ in the loss *and* with the KL "
      "in the reward; on the score's scale, the KL in the reward lands near $\\pi^*_{RM}$, and $k_3$ in the loss does "
      "not drift but does not land there either. The drift comes from the scale.",
      "beyond.grpo.reward_scaled_lands", "beyond.grpo.k3_scaled_stays"),
    C("beyond", "The two budgets come out alike", MEASURED + "beyond.budget.cpu_ratio"),
    C("beyond", "PPO sits near $\\pi^*_{RM}$ (within a quarter of a nat at $\\beta = 0.1$) and so inherits whatever "
      "$\\pi^*_{RM}$ does: at $\\beta = 0.05$ that is the hack.", "beyond.optima.ppo_near_opt", "beyond.optima.optimum_hacks"),
    C("beyond", "yet compared with PPO at the same KL rather than at the same $\\beta$, its gold score is PPO's.",
      "beyond.dpo.on_frontier"),
    C("beyond", "GRPO with $k_3$ in the loss, as published, ends many nats from $\\pi^*_{RM}$; with the KL in the reward "
      "it lands near $\\pi^*_{RM}$, as PPO does.", "beyond.grpo.reward_scaled_lands", "beyond.grpo.k3_scaled_stays"),
    C("beyond", "PPO's shortfall is almost all the second: the reward model's optimum hacks at small $\\beta$.",
      "beyond.optima.ppo_near_opt", "beyond.optima.optimum_hacks"),
    C("beyond", "At a $\\beta$ where PPO hacks the reward model it keeps a good gold score, but compared at the same KL "
      "its gold score is PPO's; and it overfits the noisy rankings, which held-out rankings from the same labeler "
      "cannot tell.", "beyond.dpo.on_frontier", "beyond.dpo.overfit", "beyond.dpo.blind"),
    C("beyond", "with PPO's KL-penalized reward, normalized with the score, it lands near $\\pi^*_{RM}$ as PPO does, in "
      "the same CPU time.", "beyond.grpo.reward_scaled_lands", MEASURED + "beyond.budget.cpu_ratio"),
    C("beyond", "the 2 × 2 ablation pins the drift on that scale, not on the gradient of $k_3$",
      "beyond.grpo.reward_scaled_lands", "beyond.grpo.k3_scaled_stays"),
)


# ----------------------------------------------------------------------------- reading the notebooks
def _squash(text):
    return re.sub(r"\s+", " ", text).strip()


def markdown(where, root=REPO):
    """The notebook's markdown cells, each with whitespace collapsed: [(cell index, text)]."""
    nb = json.loads((Path(root) / NOTEBOOKS[where]).read_text())
    return [(i, _squash("".join(c["source"]))) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"]


def missing(claims=CLAIMS, root=REPO):
    """The claims whose quote is not (or no longer) in their notebook."""
    texts = {w: " ".join(t for _, t in markdown(w, root)) for w in NOTEBOOKS}
    return [c for c in claims if _squash(c.quote) not in texts[c.where]]


def is_test(backing):
    return "::" in backing


def is_measured(backing):
    return backing.startswith(MEASURED)


def states_a_figure(claim):
    """A sentence backed by measured figures only: it states a figure of the measurement lane and claims
    nothing, so it is never backed and counted apart."""
    return all(is_measured(b) for b in claim.backed_by)


def all_backed(states):
    """Is every claim of backed()'s ``states`` backed (the sentences that state a figure left out)?"""
    return all(ok for c, ok in states if not states_a_figure(c))


def cited_tests(claims=CLAIMS):
    """Every test the ledger names (pytest node ids), in order, once."""
    return list(dict.fromkeys(b for c in claims for b in c.backed_by if is_test(b)))


def test_exists(node_id, root=REPO):
    """Whether the test function ``path::name`` is defined."""
    path, name = node_id.split("::")
    f = Path(root) / path
    return f.exists() and re.search(rf"^def {re.escape(name)}\b", f.read_text(), re.M) is not None


def unknown_backings(names, claims=CLAIMS, root=REPO):
    """[(claim, backing)] of every backing that names no criterion of ``names``, no test function and no
    measured figure of ``names``' experiments."""
    experiments = {n.rsplit(".", 1)[0] for n in names}
    bad = []
    for c in claims:
        for b in c.backed_by:
            if is_test(b):
                if not test_exists(b, root):
                    bad.append((c, b))
            elif is_measured(b):
                name = b[len(MEASURED):]
                if not (name.startswith("beyond.budget.") or name in bench_figures()):
                    bad.append((c, b))
            elif b not in names:
                bad.append((c, b))
    return bad


def bench_figures():
    """The names of the figures of time that benchmarks/figures.py renders from benchmarks/results/bench.json
    ("bench.ppo_run", "bench.ppo_run.slow", ...): a timing sentence's ``measured:`` backings, each quoted
    within its band (figures.BANDS, tests/test_figures.py)."""
    return quoted.names()


def run_tests(node_ids, root=REPO):
    """Run the tests ``node_ids`` now (pytest, in a subprocess); returns the set of those that passed
    (a test that does not exist, fails, errs or skips is left out)."""
    node_ids = [n for n in node_ids if test_exists(n, root)]
    if not node_ids:
        return set()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "--no-stale-report", f"--junitxml={report}", *node_ids], cwd=root, stdout=subprocess.DEVNULL, check=False)
        if not report.exists():
            return set()
        passed = set()
        for case in ElementTree.parse(report).iter("testcase"):
            if not any(child.tag in ("failure", "error", "skipped") for child in case):
                path = case.get("classname", "").replace(".", "/") + ".py"
                passed.add(f"{path}::{case.get('name').split('[')[0]}")
        return passed


def backed(names, claims=CLAIMS, met=None, tests_passed=None, root=REPO):
    """[(claim, True/False)]. Before a run (``met`` None): the quote is in its notebook and every backing
    names a criterion, a test or a measured figure. After one: also every criterion named is in ``met``
    (met on every seed, every control failing) and every test named in ``tests_passed`` (ran and passed
    now). A measured figure (of time or cost) is stated with its machine and backs nothing on its own: a
    claim backed by measured figures only is never backed."""
    gone, bad = set(missing(claims, root)), {c for c, _ in unknown_backings(names, claims, root)}
    out = []
    for c in claims:
        ok = c not in gone and c not in bad and not states_a_figure(c)
        if ok and met is not None:
            ok = all(b in met for b in c.backed_by if not is_test(b) and not is_measured(b)) and \
                all(b in (tests_passed or set()) for b in c.backed_by if is_test(b))
        out.append((c, ok))
    return out


def summary_line(states):
    """``claims: K/N backed`` of backed()'s states (claims that state a measured figure only are counted apart)."""
    figures = [c for c, _ in states if states_a_figure(c)]
    k = sum(ok for _, ok in states)
    line = f"claims: {k}/{len(states) - len(figures)} backed"
    return line + (f" (and {len(figures)} sentences state a measured figure, not a claim)" if figures else "")


# ----------------------------------------------------------------------------- what the ledger lacks
NUMBER = re.compile(r"(?<![\w$\\{^_])\d+(?:[.,]\d+)?(?:\s*%)?(?![\w}])")
COMPARISON = re.compile(r"\b(more|less|fewer|than|below|above|higher|lower|larger|smaller|better|worse|rises?|"
                        r"falls?|grows?|drops?|climbs?|beats?|outweigh\w*|near(?:ly)?|far|close|about|"
                        r"because|so that|causes?|keeps?|never|always|every)\b", re.I)
SKIP_CELL = re.compile(r"^(#+ Task\b|#+ Concept check|\*\*Contract|<details>)")


def _strip_math(text):
    return re.sub(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`", " ", text)


def sentences(text):
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+(?=[A-Z*(\d])", text) if s.strip()]


def unledgered(claims=CLAIMS, root=REPO):
    """[(where, cell, sentence)] of the sentences in the notebooks' prose (task contracts, hints and concept
    checks left out: another file states and checks those) with a number or a comparison outside math and
    code, which no ledger quote overlaps."""
    quotes = {w: [_squash(c.quote) for c in claims if c.where == w] for w in NOTEBOOKS}
    found = []
    for where in NOTEBOOKS:
        for i, text in markdown(where, root):
            if SKIP_CELL.match(text):
                continue
            text = re.sub(r"<details>.*?</details>", " ", text)
            for s in sentences(text):
                plain = _strip_math(s)
                if not (NUMBER.search(plain) or COMPARISON.search(plain)):
                    continue
                if any(q in s or s in q for q in quotes[where]):
                    continue
                found.append((where, i, s))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--unledgered", action="store_true", help="list the sentences the ledger lacks")
    args = parser.parse_args(argv)
    for c in missing():
        print(f"MISSING  {c.where}: {c.quote!r}")
    rest = unledgered()
    if args.unledgered:
        for where, i, s in rest:
            print(f"{where} cell {i}: {s}")
    print(f"{len(rest)} sentences with a number or a comparison are not in the ledger "
          f"(python -m benchmarks.claims --unledgered lists them)")
    print("the backings of every claim are checked by benchmarks/science.py (first line) and tests/test_claims.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
