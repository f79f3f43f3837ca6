"""Lab 12's catalogue of likely mistakes ("mutants"), as data.

Each mutant is the instructor's solution of ONE task with a plausible student mistake spliced in
(string replacements in that solution cell). Graded by the real nbgrader, a mutant must lose points
on its own task's check cell and nowhere else (tests/test_mutants.py).
"""

from mutant import Mutant, mutant


def _m(task, name, *edits):
    return mutant(task, name, edits)


MUTANTS = [
    # Task 1: bt_loss
    _m("bt_loss", "bt_margin_reversed",
       ("-F.logsigmoid(r_chosen - r_rejected)", "-F.logsigmoid(r_rejected - r_chosen)")),
    _m("bt_loss", "bt_sum", ("(r_chosen - r_rejected).mean()", "(r_chosen - r_rejected).sum()")),
    _m("bt_loss", "bt_log_of_sigmoid",
       ("-F.logsigmoid(r_chosen - r_rejected)", "-torch.log(torch.sigmoid(r_chosen - r_rejected))")),
    _m("bt_loss", "bt_no_minus", ("return -F.logsigmoid", "return F.logsigmoid")),
    _m("bt_loss", "bt_item", ("(r_chosen - r_rejected).mean()", "(r_chosen - r_rejected).mean().item()")),
    # Task 2: ranking_to_pairs
    _m("ranking_to_pairs", "pairs_swapped", ("(ranking[i], ranking[j])", "(ranking[j], ranking[i])")),
    _m("ranking_to_pairs", "pairs_positions", ("(ranking[i], ranking[j])", "(i, j)")),
    _m("ranking_to_pairs", "pairs_self", ("range(i + 1, len(ranking))", "range(i, len(ranking))")),
    _m("ranking_to_pairs", "pairs_neighbours",
       ("range(i + 1, len(ranking))", "range(i + 1, min(i + 2, len(ranking)))")),
    _m("ranking_to_pairs", "pairs_loser_major",
       ("for i in range(len(ranking)):\n        for j in range(i + 1, len(ranking)):",
        "for j in range(len(ranking)):\n        for i in range(j):")),
    # Task 3: kl_penalized_rewards
    _m("kl_penalized_rewards", "rew_last_column",
       ("last = mask.sum(dim=1).long() - 1", "last = torch.full((mask.shape[0],), mask.shape[1] - 1)")),
    _m("kl_penalized_rewards", "rew_kl_sign", ("-beta * (logp - ref_logp)", "beta * (logp - ref_logp)")),
    _m("kl_penalized_rewards", "rew_unmasked",
       ("torch.where(mask > 0, -beta * (logp - ref_logp), torch.zeros_like(logp))", "-beta * (logp - ref_logp)")),
    _m("kl_penalized_rewards", "rew_score_everywhere",
       ("rewards[torch.arange(rewards.shape[0]), last] += score", "rewards += score[:, None] * mask")),
    _m("kl_penalized_rewards", "rew_off_by_one",
       ("mask.sum(dim=1).long() - 1", "mask.sum(dim=1).long() % mask.shape[1]")),
    # Task 4: gae_per_token
    _m("gae_per_token", "gae_value_leak", ("values = values * mask", "values = values * 1.0")),
    _m("gae_per_token", "gae_no_lambda", ("gamma * lam * next_adv", "gamma * next_adv")),
    _m("gae_per_token", "gae_returns_are_advantages",
       ("returns = (advantages + values) * mask", "returns = advantages")),
    _m("gae_per_token", "gae_forwards", ("reversed(range(T))", "range(T)")),
    _m("gae_per_token", "gae_no_gamma_bootstrap", ("gamma * next_value", "next_value")),
    # Task 5: ppo_rlhf_loss
    _m("ppo_rlhf_loss", "ppo_max", ("torch.min(unclipped, clipped)", "torch.max(unclipped, clipped)")),
    _m("ppo_rlhf_loss", "ppo_plain_mean",
       ("masked_mean(torch.min(unclipped, clipped), mask)", "torch.min(unclipped, clipped).mean()")),
    _m("ppo_rlhf_loss", "ppo_one_sided_clip_frac", ("((ratio - 1).abs() > clip_eps)", "((ratio - 1) > clip_eps)")),
    _m("ppo_rlhf_loss", "ppo_no_half", ("value_loss = 0.5 * masked_mean", "value_loss = masked_mean")),
    _m("ppo_rlhf_loss", "ppo_detached_ratio",
       ("ratio = torch.exp(logp - old_logp)", "ratio = torch.exp(logp - old_logp).detach()")),
    _m("ppo_rlhf_loss", "ppo_inverted_ratio", ("torch.exp(logp - old_logp)", "torch.exp(old_logp - logp)")),
    _m("ppo_rlhf_loss", "ppo_no_vf_coef",
       ("loss = policy_loss + vf_coef * value_loss", "loss = policy_loss + value_loss")),
]


# ----------------------------------------------------------------------------- correct variants
def _v(task, name, body, first_line):
    """Another correct formulation: ``body`` returns before the solution's ``first_line`` runs."""
    return mutant(task, name, ((first_line, body + first_line),))


VARIANTS = [
    _v("bt_loss", "ok_softplus", "    return F.softplus(r_rejected - r_chosen).mean()\n",
       "    return -F.logsigmoid("),
    _v("bt_loss", "ok_bce_with_logits",
       "    return F.binary_cross_entropy_with_logits(r_chosen - r_rejected, torch.ones_like(r_chosen))\n",
       "    return -F.logsigmoid("),
    _v("ranking_to_pairs", "ok_combinations",
       "    import itertools\n    return list(itertools.combinations(ranking, 2))\n", "    pairs = []"),
    _v("kl_penalized_rewards", "ok_one_hot",
       "    last = F.one_hot(mask.sum(1).long() - 1, mask.shape[1])\n"
       "    kl = torch.where(mask.bool(), -beta * (logp - ref_logp), torch.zeros_like(logp))\n"
       "    return kl + last * score[:, None]\n",
       "    rewards = torch.where("),
    _v("gae_per_token", "ok_shifted_values",
       "    v = values * mask\n"
       "    v_next = torch.cat([v[:, 1:], torch.zeros_like(v[:, :1])], dim=1)\n"
       "    deltas = rewards + gamma * v_next - v\n"
       "    adv = torch.zeros_like(rewards)\n"
       "    running = torch.zeros(rewards.shape[0])\n"
       "    for t in range(rewards.shape[1] - 1, -1, -1):\n"
       "        running = mask[:, t] * (deltas[:, t] + gamma * lam * running)\n"
       "        adv[:, t] = running\n"
       "    return adv, (adv + v) * mask\n",
       "    B, T = rewards.shape"),
    _v("ppo_rlhf_loss", "ok_max_of_negatives_explicit_mean",
       "    rho = (logp - old_logp).exp()\n"
       "    m = mask.float()\n"
       "    pg = torch.max(-rho * advantages, -rho.clamp(1 - clip_eps, 1 + clip_eps) * advantages)\n"
       "    pl = (pg * m).sum() / m.sum()\n"
       "    vl = 0.5 * (((values - returns) ** 2) * m).sum() / m.sum()\n"
       "    cf = ((((rho - 1).abs() > clip_eps).float()) * m).sum() / m.sum()\n"
       "    return pl + vf_coef * vl, {\"policy_loss\": float(pl), \"value_loss\": float(vl), \"clip_frac\": float(cf)}\n",
       "    ratio = torch.exp("),
]

__all__ = ["MUTANTS", "VARIANTS"]
