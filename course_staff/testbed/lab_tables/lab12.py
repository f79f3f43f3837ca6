"""Lab 12's table: its tasks with their check cells and likely mistakes, concept checks and questions.

Each mistake is the instructor's solution of ONE row with a plausible student mistake spliced in
(string replacements in that solution cell). Graded by the real nbgrader, it must lose points on its
own row's check cells and nowhere else, and the check's message must name the mistake (``says``);
each variant is another correct formulation that must keep full marks (tests/test_mutants.py).
"""

from course_staff.testbed.lab_tables import Concept, Lab, Mistake as M, Question, task


def _v(name, body, first_line):
    """Another correct formulation: ``body`` returns before the solution's ``first_line`` runs."""
    return M(name, ((first_line, body + first_line),))


# the parts of Tasks 3, 4 and 5: each check cell judges one part given the student's own other parts, so a
# mistake may lose points only in the parts it names
PENALTY, SCORE = ("test_kl_penalized_rewards",), ("test_kl_penalized_rewards_score",)
REW_INPUTS = ("test_kl_penalized_rewards_inputs",)
ADV, RET, INPUTS = ("test_gae_per_token",), ("test_gae_per_token_returns",), ("test_gae_per_token_inputs",)
POLICY, VALUE, CLIP = ("test_ppo_rlhf_loss",), ("test_ppo_rlhf_loss_value",), ("test_ppo_rlhf_loss_clip_frac",)

TABLE = Lab("lab12", tasks=(
    task("bt_loss", mistakes=(
        M("bt_margin_reversed", (("-F.logsigmoid(r_chosen - r_rejected)", "-F.logsigmoid(r_rejected - r_chosen)"),),
          "the margin is reversed"),
        M("bt_sum", (("(r_chosen - r_rejected).mean()", "(r_chosen - r_rejected).sum()"),), "summed, not averaged"),
        M("bt_log_of_sigmoid", (("-F.logsigmoid(r_chosen - r_rejected)",
                                 "-torch.log(torch.sigmoid(r_chosen - r_rejected))"),), "use F.logsigmoid(z)"),
        M("bt_no_minus", (("return -F.logsigmoid", "return F.logsigmoid"),), "the minus sign is missing"),
        M("bt_item", (("(r_chosen - r_rejected).mean()", "(r_chosen - r_rejected).mean().item()"),),
          "expected a scalar tensor"),
    ), variants=(
        _v("ok_softplus", "    return F.softplus(r_rejected - r_chosen).mean()\n", "    return -F.logsigmoid("),
        _v("ok_bce_with_logits",
           "    return F.binary_cross_entropy_with_logits(r_chosen - r_rejected, torch.ones_like(r_chosen))\n",
           "    return -F.logsigmoid("),
    )),
    task("ranking_to_pairs", mistakes=(
        M("pairs_swapped", (("(ranking[i], ranking[j])", "(ranking[j], ranking[i])"),), "winner and loser are swapped"),
        M("pairs_positions", (("(ranking[i], ranking[j])", "(i, j)"),), "these are positions"),
        M("pairs_self", (("range(i + 1, len(ranking))", "range(i, len(ranking))"),), "paired with itself"),
        M("pairs_neighbours", (("range(i + 1, len(ranking))", "range(i + 1, min(i + 2, len(ranking)))"),),
          "only neighbouring positions"),
        M("pairs_loser_major", (("for i in range(len(ranking)):\n        for j in range(i + 1, len(ranking)):",
                                 "for j in range(len(ranking)):\n        for i in range(j):"),),
          "ordered by the loser's position"),
    ), variants=(
        _v("ok_combinations", "    import itertools\n    return list(itertools.combinations(ranking, 2))\n", "    pairs = []"),
    )),
    task("kl_penalized_rewards", ("test_kl_penalized_rewards", "test_kl_penalized_rewards_score",
                                  "test_kl_penalized_rewards_inputs"), mistakes=(
        M("rew_last_column", (("last = mask.sum(dim=1).long() - 1", "last = torch.full((mask.shape[0],), mask.shape[1] - 1)"),),
          "added in the last column", parts=SCORE),
        M("rew_kl_sign", (("-beta * (logp - ref_logp)", "beta * (logp - ref_logp)"),), "the KL term has the wrong sign", parts=PENALTY),
        M("rew_unmasked", (("torch.where(mask > 0, -beta * (logp - ref_logp), torch.zeros_like(logp))",
                            "-beta * (logp - ref_logp)"),), "the KL term is not masked", parts=PENALTY),
        M("rew_score_everywhere", (("rewards[torch.arange(rewards.shape[0]), last] += score",
                                    "rewards += score[:, None] * mask"),), "at every real token", parts=SCORE),
        M("rew_off_by_one", (("mask.sum(dim=1).long() - 1", "mask.sum(dim=1).long() % mask.shape[1]"),),
          "one position too far right", parts=SCORE),
        M("rew_in_place", (("rewards = torch.where(mask > 0, -beta * (logp - ref_logp), torch.zeros_like(logp))",
                            "rewards = logp.copy_(torch.where(mask > 0, -beta * (logp - ref_logp), torch.zeros_like(logp)))"),),
          "do not change the inputs in place", parts=REW_INPUTS),
        M("rew_beta_fixed", (("-beta * (logp - ref_logp)", "-0.1 * (logp - ref_logp)"),), "beta was not used", parts=PENALTY),
    ), variants=(
        _v("ok_one_hot",
           "    last = F.one_hot(mask.sum(1).long() - 1, mask.shape[1])\n"
           "    kl = torch.where(mask.bool(), -beta * (logp - ref_logp), torch.zeros_like(logp))\n"
           "    return kl + last * score[:, None]\n", "    rewards = torch.where("),
    )),
    task("gae_per_token", ("test_gae_per_token", "test_gae_per_token_returns", "test_gae_per_token_inputs"),
         mistakes=(
        M("gae_value_leak", (("values = values * mask", "values = values * 1.0"),), "leaked in", parts=ADV),
        M("gae_no_mask", (("values = values * mask", "values = values * 1.0"),
                           ("next_adv = (delta + gamma * lam * next_adv) * mask[:, t]", "next_adv = delta + gamma * lam * next_adv"),
                           ("returns = (advantages + values) * mask", "returns = advantages + values")),
          "the mask was not used", parts=ADV + RET),
        M("gae_skips_last_column", (("reversed(range(T))", "reversed(range(T - 1))"),), "the loop skips the last column",
          parts=ADV),
        M("gae_no_lambda", (("gamma * lam * next_adv", "gamma * next_adv"),), "lambda is missing", parts=ADV),
        M("gae_returns_are_advantages", (("returns = (advantages + values) * mask", "returns = advantages"),),
          "the returns are the advantages", parts=RET),
        M("gae_forwards", (("reversed(range(T))", "range(T)"),), "runs forwards", parts=ADV),
        M("gae_no_gamma_bootstrap", (("gamma * next_value", "next_value"),), "gamma is missing", parts=ADV),
        M("gae_in_place", (("values = values * mask", "values = values.mul_(mask)"),), "do not change the inputs in place", parts=INPUTS),
        M("gae_lam_fixed", (("gamma * lam * next_adv", "gamma * 0.95 * next_adv"),), "lam was not used", parts=ADV),
        M("gae_gamma_fixed", (("gamma * next_value", "1.0 * next_value"), ("gamma * lam", "1.0 * lam")),
          "gamma was not used", parts=ADV),
    ), variants=(
        _v("ok_shifted_values",
           "    v = values * mask\n"
           "    v_next = torch.cat([v[:, 1:], torch.zeros_like(v[:, :1])], dim=1)\n"
           "    deltas = rewards + gamma * v_next - v\n"
           "    adv = torch.zeros_like(rewards)\n"
           "    running = torch.zeros(rewards.shape[0])\n"
           "    for t in range(rewards.shape[1] - 1, -1, -1):\n"
           "        running = mask[:, t] * (deltas[:, t] + gamma * lam * running)\n"
           "        adv[:, t] = running\n"
           "    return adv, (adv + v) * mask\n", "    B, T = rewards.shape"),
    )),
    task("ppo_rlhf_loss", ("test_ppo_rlhf_loss", "test_ppo_rlhf_loss_value", "test_ppo_rlhf_loss_clip_frac"),
         mistakes=(
        M("ppo_max", (("torch.min(unclipped, clipped)", "torch.max(unclipped, clipped)"),), "max instead of min", parts=POLICY),
        M("ppo_only_clipped", (("masked_mean(torch.min(unclipped, clipped), mask)", "masked_mean(clipped, mask)"),),
          "only the clipped term", parts=POLICY),
        M("ppo_clamp_swapped", (("torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)", "torch.clamp(ratio, 1 + clip_eps, 1 - clip_eps)"),),
          "clamp with its bounds swapped", parts=POLICY),
        M("ppo_clipped_advantage", (("torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages",
                                     "ratio * torch.clamp(advantages, 1 - clip_eps, 1 + clip_eps)"),),
          "the advantage clipped instead of the ratio", parts=POLICY),
        M("ppo_plain_mean", (("masked_mean(torch.min(unclipped, clipped), mask)", "torch.min(unclipped, clipped).mean()"),),
          "a plain mean over all positions", parts=POLICY),
        M("ppo_one_sided_clip_frac", (("((ratio - 1).abs() > clip_eps)", "((ratio - 1) > clip_eps)"),),
          "only ratios above 1 + eps", parts=CLIP),
        M("ppo_no_half", (("value_loss = 0.5 * masked_mean", "value_loss = masked_mean"),), "the factor 1/2 is missing", parts=VALUE),
        M("ppo_detached_ratio", (("ratio = torch.exp(logp - old_logp)", "ratio = torch.exp(logp - old_logp).detach()"),),
          "no gradient reaches logp", parts=POLICY),
        # the clipped term's value with the unclipped ratio's gradient (straight through): every value is right,
        # and tokens past the clip still get a gradient
        M("ppo_clip_passes_gradient", (("torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * advantages",
                                        "(ratio + (torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) - ratio).detach()) "
                                        "* advantages"),),
          "against the slope of your own policy loss", parts=POLICY),
        M("ppo_inverted_ratio", (("torch.exp(logp - old_logp)", "torch.exp(old_logp - logp)"),), "the ratio is inverted", parts=POLICY),
        M("ppo_no_vf_coef", (("loss = policy_loss + vf_coef * value_loss", "loss = policy_loss + value_loss"),),
          "vf_coef is missing", parts=VALUE),
        M("ppo_clip_eps_fixed", (("torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)", "torch.clamp(ratio, 0.8, 1.2)"),),
          "clip_eps was not used", parts=POLICY),
        M("ppo_clip_frac_eps_fixed", (("(ratio - 1).abs() > clip_eps", "(ratio - 1).abs() > 0.2"),),
          "clip_eps was not used in the clip fraction", parts=CLIP),
        M("ppo_vf_coef_fixed", (("loss = policy_loss + vf_coef * value_loss", "loss = policy_loss + 0.5 * value_loss"),),
          "vf_coef was not used", parts=VALUE),
    ), variants=(
        _v("ok_max_of_negatives_explicit_mean",
           "    rho = (logp - old_logp).exp()\n"
           "    m = mask.float()\n"
           "    pg = torch.max(-rho * advantages, -rho.clamp(1 - clip_eps, 1 + clip_eps) * advantages)\n"
           "    pl = (pg * m).sum() / m.sum()\n"
           "    vl = 0.5 * (((values - returns) ** 2) * m).sum() / m.sum()\n"
           "    cf = ((((rho - 1).abs() > clip_eps).float()) * m).sum() / m.sum()\n"
           "    return pl + vf_coef * vl, {\"policy_loss\": float(pl), \"value_loss\": float(vl), \"clip_frac\": float(cf)}\n",
           "    ratio = torch.exp("),
    )),
), concepts=(
    Concept("concept_shift", mistakes=(
        M("cc_shift_scale", (('unchanged_by_a_shift = {"a", "d"}', 'unchanged_by_a_shift = {"a", "b", "d"}'),), "is not the set"),)),
    Concept("concept_clip", mistakes=(
        M("cc_clip_above", (('past_the_clip = {"a", "d"}', 'past_the_clip = {"a", "c"}'),), "is not the set"),)),
), questions=(
    Question("answer_exp1_predict"),
    Question("answer_exp1_explain"),
    Question("answer_ptx"),
    Question("answer_optimum_hacks"),
    Question("answer_health"),
    Question("answer_length"),
    Question("answer_gae_lambda"),
))
