"""Lab 13's table: its tasks with their check cells and likely mistakes (and, once written, its questions).

Each mistake is the instructor's solution of ONE row with a plausible student mistake spliced in (string
replacements in that solution cell). Graded by the real nbgrader, it must lose points on its own row's
check cells and nowhere else, and the check's message must name the mistake (``says``); each variant is
another correct formulation that must keep full marks (tests/test_mutants.py, tests/test_mistakes.py).
"""

from course_staff.testbed.lab_tables import Lab, Mistake as M, Question, task


def _v(name, body, first_line):
    """Another correct formulation: ``body`` returns before the solution's ``first_line`` runs."""
    return M(name, ((first_line, body + first_line),))


# the parts of Tasks 3 and 4: each check cell judges one part given the student's own other parts, so a
# mistake may lose points only in the parts it names
LOSS, TOKEN, STATS = ("test_grpo_loss",), ("test_grpo_loss_token",), ("test_grpo_loss_stats",)
ROLL, UPDATE = ("test_grpo_iteration",), ("test_grpo_iteration_update",)

MARGINS = "margins = beta * ((logp_chosen - ref_chosen) - (logp_rejected - ref_rejected))"
DPO_LOSS = "loss = -F.logsigmoid(margins).mean()"
STD = "scores.std(dim=1, keepdim=True)"
SURROGATE = "torch.min(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv)"
TERMS = "torch.where(real, surrogate - beta * k3, torch.zeros_like(logp))"
GROUPS = "group_advantages(scores.view(len(prompts), k), cfg.scale)"

TABLE = Lab("lab13", tasks=(
    task("dpo_loss", mistakes=(
        M("dpo_no_beta", ((MARGINS, MARGINS.replace("beta * ", "")),), "beta is missing"),
        M("dpo_swapped", ((MARGINS, "margins = beta * ((logp_rejected - ref_rejected) - (logp_chosen - ref_chosen))"),),
          "chosen and rejected are swapped"),
        M("dpo_no_reference", ((MARGINS, "margins = beta * (logp_chosen - logp_rejected)"),), "the reference is missing"),
        M("dpo_reference_swapped", ((MARGINS, "margins = beta * ((logp_chosen - ref_rejected) - (logp_rejected - ref_chosen))"),),
          "the reference log-probs are swapped"),
        M("dpo_log_of_sigmoid", ((DPO_LOSS, "loss = -torch.log(torch.sigmoid(margins)).mean()"),), "underflows"),
        M("dpo_sum", ((DPO_LOSS, "loss = -F.logsigmoid(margins).sum()"),), "summed, not averaged"),
        M("dpo_no_minus", ((DPO_LOSS, "loss = F.logsigmoid(margins).mean()"),), "the minus sign is missing"),
        M("dpo_item", ((DPO_LOSS, "loss = -F.logsigmoid(margins).mean().item()"),), "expected the loss as a scalar tensor"),
        M("dpo_beta_fixed", ((MARGINS, MARGINS.replace("beta * ", "0.1 * ")),), "beta was not used"),
    ), variants=(
        _v("ok_softplus", "    margins = beta * (logp_chosen - logp_rejected - ref_chosen + ref_rejected)\n"
                          "    return F.softplus(-margins).mean(), margins\n", "    " + MARGINS),
        _v("ok_bce_with_logits",
           "    z = beta * ((logp_chosen - logp_rejected) - (ref_chosen - ref_rejected))\n"
           "    return F.binary_cross_entropy_with_logits(z, torch.ones_like(z)), z\n", "    " + MARGINS),
    )),
    task("group_advantages", mistakes=(
        M("adv_population_std", ((STD, "scores.std(dim=1, keepdim=True, correction=0)"),), "divides by k, not k - 1"),
        M("adv_no_eps", ((STD + " + eps)", STD + ")"),), "add eps to the standard deviation"),
        M("adv_batch_std", ((STD, "scores.std()"),), "the standard deviation is the whole batch's"),
        M("adv_batch_mean", (("scores - scores.mean(dim=1, keepdim=True)", "scores - scores.mean()"),),
          "the mean is the whole batch's"),
        M("adv_scale_ignored", (("    if not scale:\n        return centred\n", ""),), "scale was not used"),
        M("adv_eps_fixed", ((STD + " + eps)", STD + " + 1e-6)"),), "eps was not used"),
        M("adv_eps_in_variance", ((STD + " + eps)", "scores.var(dim=1, keepdim=True) + eps).sqrt()"),),
          "eps is added to the variance"),
        M("adv_in_place", (("centred = scores - scores.mean(dim=1, keepdim=True)",
                            "centred = scores.sub_(scores.mean(dim=1, keepdim=True))"),), "must not change its input"),
    ), variants=(
        _v("ok_explicit_std",
           "    d = scores - scores.mean(1).unsqueeze(1)\n"
           "    if scale:\n"
           "        d = d / (((d ** 2).sum(1, keepdim=True) / (scores.shape[1] - 1)).sqrt() + eps)\n"
           "    return d\n", "    centred = scores - "),
    )),
    task("grpo_loss", ("test_grpo_loss", "test_grpo_loss_token", "test_grpo_loss_stats"), mistakes=(
        M("grpo_no_clip", ((SURROGATE, "ratio * adv"),), "the ratio is not clipped", parts=LOSS),
        M("grpo_max", ((SURROGATE, SURROGATE.replace("torch.min", "torch.max")),), "max instead of min", parts=LOSS),
        M("grpo_k3_other_kl", (("to_ref = ref_logp - logp", "to_ref = logp - ref_logp"),), "k3 estimates the other KL",
          parts=LOSS + STATS),
        M("grpo_kl_sign", (("surrogate - beta * k3", "surrogate + beta * k3"),), "the KL term has the wrong sign", parts=LOSS),
        M("grpo_mean_over_columns", (("per_token.sum(dim=1) / mask.sum(dim=1)", "per_token.sum(dim=1) / mask.shape[1]"),),
          "divides by all T columns", parts=LOSS),
        M("grpo_means_swapped", (('if aggregate == "sequence":', 'if aggregate == "token":'),
                                 ('elif aggregate == "token":', 'elif aggregate == "sequence":')),
          "this is the token mean", parts=LOSS + TOKEN),
        M("grpo_ratio_without_exp", (("ratio = torch.exp(logp - old_logp)", "ratio = logp - old_logp"),),
          "the ratio is not exponentiated", parts=LOSS + STATS),
        M("grpo_unmasked", ((TERMS, "surrogate - beta * k3"),), "padding counts", parts=LOSS + TOKEN),
        M("grpo_token_over_columns", (("per_token.sum() / mask.sum()", "per_token.mean()"),),
          "the token mean divides by every column", parts=TOKEN),
        M("grpo_detached_ratio", (("ratio = torch.exp(logp - old_logp)", "ratio = torch.exp(logp - old_logp).detach()"),),
          "built from logp with torch operations", parts=LOSS),
        M("grpo_beta_fixed", (("surrogate - beta * k3", "surrogate - 0.04 * k3"),), "beta was not used", parts=LOSS),
        M("grpo_clip_eps_fixed", (("torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)", "torch.clamp(ratio, 0.8, 1.2)"),),
          "clip_eps was not used", parts=LOSS),
        M("grpo_clip_frac_padding", (("((ratio - 1).abs() > clip_eps)[real]", "((ratio - 1).abs() > clip_eps)"),),
          "padding is counted in the clip fraction", parts=STATS),
        M("grpo_clip_frac_one_sided", (("(ratio - 1).abs() > clip_eps", "(ratio - 1) > clip_eps"),),
          "only ratios above 1 + eps", parts=STATS),
        M("grpo_clip_frac_eps_fixed", (("(ratio - 1).abs() > clip_eps", "(ratio - 1).abs() > 0.2"),),
          "clip_eps was not used in the clip fraction", parts=STATS),
        M("grpo_k3_padding", (('"k3": k3[real].mean().item()', '"k3": k3.mean().item()'),),
          "padding is counted in the mean k3", parts=STATS),
    ), variants=(
        _v("ok_expm1_masked_mean",
           "    rho = (logp - old_logp).exp()\n"
           "    a = advantages.unsqueeze(1)\n"
           "    s = torch.minimum(rho * a, rho.clamp(1 - clip_eps, 1 + clip_eps) * a)\n"
           "    lr = logp - ref_logp\n"
           "    k3 = torch.expm1(-lr) + lr\n"
           "    m = mask.to(logp.dtype)\n"
           "    if aggregate == 'token':\n"
           "        obj = masked_mean(s - beta * k3, m)\n"
           "    else:\n"
           "        obj = (((s - beta * k3) * m).sum(-1) / m.sum(-1)).mean()\n"
           "    cf = masked_mean(((rho - 1).abs() > clip_eps).to(logp.dtype), m)\n"
           "    return -obj, {'k3': masked_mean(k3, m).item(), 'clip_frac': cf.item()}\n",
           "    ratio = torch.exp("),
        _v("ok_max_of_negatives_per_row",
           "    rows = []\n"
           "    for i in range(logp.shape[0]):\n"
           "        n = int(mask[i].sum())\n"
           "        rho = torch.exp(logp[i, :n] - old_logp[i, :n])\n"
           "        pg = torch.max(-rho * advantages[i], -torch.clamp(rho, 1 - clip_eps, 1 + clip_eps) * advantages[i])\n"
           "        k3 = torch.exp(ref_logp[i, :n] - logp[i, :n]) - 1 - (ref_logp[i, :n] - logp[i, :n])\n"
           "        rows.append((pg + beta * k3, k3, ((rho - 1).abs() > clip_eps).float()))\n"
           "    flat = [torch.cat([r[j] for r in rows]) for j in range(3)]\n"
           "    loss = flat[0].mean() if aggregate == 'token' else torch.stack([r[0].mean() for r in rows]).mean()\n"
           "    return loss, {'k3': flat[1].mean().item(), 'clip_frac': flat[2].mean().item()}\n",
           "    ratio = torch.exp("),
    )),
    task("grpo_iteration", ("test_grpo_iteration", "test_grpo_iteration_update"), mistakes=(
        M("loop_prompts_tiled", (("[p for p in prompts for _ in range(k)]", "prompts * k"),), "the prompts are tiled",
          parts=ROLL),
        M("loop_sampled_from_ref", (("out = sample(policy,", "out = sample(ref,"),), "sampled from the reference",
          parts=ROLL),
        M("loop_old_logp_every_step", (("        logp = sequence_logprobs(policy, out)\n",
                                        "        with torch.no_grad():\n"
                                        "            old_logp = sequence_logprobs(policy, out)\n"
                                        "        logp = sequence_logprobs(policy, out)\n"),),
          "recomputed at every step", parts=ROLL + UPDATE),
        M("loop_old_logp_with_grad", (("    with torch.no_grad():\n        old_logp = sequence_logprobs(policy, out)\n",
                                       "    old_logp = sequence_logprobs(policy, out)\n    with torch.no_grad():\n"),),
          "old log-probs carry the gradient", parts=ROLL + UPDATE),
        M("loop_ref_from_policy", (("ref_logp = sequence_logprobs(ref, out)", "ref_logp = sequence_logprobs(policy, out)"),),
          "use the reference model", parts=ROLL + UPDATE),
        M("loop_batch_is_one_group", ((GROUPS, "group_advantages(scores.view(1, -1), cfg.scale)"),),
          "the whole batch is one group", parts=ROLL),
        M("loop_groups_are_columns", ((GROUPS, "group_advantages(scores.view(k, len(prompts)).T, cfg.scale)"),),
          "the groups are columns", parts=ROLL),
        M("loop_scale_ignored", ((GROUPS, "group_advantages(scores.view(len(prompts), k))"),), "cfg.scale was not used",
          parts=ROLL),
        M("loop_no_zero_grad", (("        optimizer.zero_grad()\n", ""),), "the gradients accumulate", parts=UPDATE),
        M("loop_zero_grad_after_backward", (("        optimizer.zero_grad()\n        loss.backward()\n",
                                             "        loss.backward()\n        optimizer.zero_grad()\n"),),
          "found no gradient", parts=UPDATE),
        M("loop_no_grad_clip", (("        torch.nn.utils.clip_grad_norm_(policy.parameters(), cfg.max_grad_norm)\n", ""),),
          "the gradient is not clipped", parts=UPDATE),
        M("loop_one_step_short", (("range(cfg.epochs)", "range(cfg.epochs - 1)"),), "expected cfg.epochs", parts=UPDATE),
        M("loop_aggregate_ignored", (("cfg.beta,\n                                     cfg.aggregate)", "cfg.beta)"),),
          "cfg.aggregate was not used", parts=UPDATE),
    ), variants=(
        _v("ok_other_order",
           "    B, k = len(prompts), cfg.k\n"
           "    rollout = sample(policy, [prompts[i // k] for i in range(B * k)])\n"
           "    old = sequence_logprobs(policy, rollout).detach()\n"
           "    with torch.no_grad():\n"
           "        to_ref = sequence_logprobs(ref, rollout)\n"
           "    sc = score_fn(rollout)\n"
           "    adv = torch.cat([group_advantages(sc[i * k:(i + 1) * k][None], scale=cfg.scale)[0] for i in range(B)])\n"
           "    losses, stats = [], []\n"
           "    for epoch in range(cfg.epochs):\n"
           "        optimizer.zero_grad()\n"
           "        loss, st = grpo_loss(sequence_logprobs(policy, rollout), old, to_ref, adv, rollout['mask'],\n"
           "                             clip_eps=cfg.clip_eps, beta=cfg.beta, aggregate=cfg.aggregate)\n"
           "        loss.backward()\n"
           "        torch.nn.utils.clip_grad_norm_(policy.parameters(), max_norm=cfg.max_grad_norm)\n"
           "        optimizer.step()\n"
           "        losses.append(float(loss))\n"
           "        stats.append(st)\n"
           "    return dict(out=rollout, scores=sc, advantages=adv, old_logp=old, ref_logp=to_ref, losses=losses,\n"
           "                stats=stats)\n", "    k = cfg.k"),
    )),
), questions=(
    Question("answer_frontier"),
    Question("answer_dpo_epochs"),
    Question("answer_grpo"),
))
