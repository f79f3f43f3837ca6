"""Lab 12's catalogue of likely mistakes ("mutants"), as data.

Each mutant is the instructor's solution of ONE task with a plausible student mistake spliced in
(string replacements in that solution cell). Graded by the real nbgrader, a mutant must lose points
on its own task's check cell and nowhere else (tests/test_lab12_mutants.py).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    task_grade_id: str          # the check cell that must catch it, e.g. "test_bt_loss"
    solution_grade_id: str      # the solution cell it edits, e.g. "bt_loss_solution"
    name: str                   # a short name (also the simulated student's id)
    edits: tuple                # ((old, new), ...) replacements in the solution text

    @property
    def student(self):
        return f"m_{self.name}"


def _m(task, name, *edits):
    return Mutant(f"test_{task}", f"{task}_solution", name, tuple(edits))


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

__all__ = ["Mutant", "MUTANTS"]
