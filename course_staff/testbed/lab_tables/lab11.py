"""Lab 11's table: its tasks with their check cells and likely mistakes, concept checks and questions.

A mistake is the instructor's solution of ONE row with a plausible student mistake spliced in
(string replacements in that solution cell). Graded by the real nbgrader, it must lose points on its
own row's check cells and nowhere else, and the check's message must name the mistake (``says``). A
variant is another correct way to write a function (cross_entropy instead of log_softmax + gather,
Gumbel-max sampling, logaddexp, nansum, ..., some of them emitting numpy warnings): it must keep full
marks (tests/test_mutants.py).
"""

from course_staff.testbed.lab_tables import Concept, Lab, Mistake as M, Question, task


def _v(name, body, old):
    """A variant replacing the whole solution body (from its first line ``old`` to the end)."""
    return M(name, ((old, body),))


# the parts of Tasks 4 and 5: each check cell judges one part (given the student's own other parts), so a
# mistake may lose points only in the parts it names
PI, LOG_Z, TO_INPUTS = ("test_tilted_optimum",), ("test_tilted_optimum_log_z",), ("test_tilted_optimum_inputs",)
SOFT, POLICY, TL_INPUTS = (("test_token_level_optimum",), ("test_token_level_optimum_policy",),
                           ("test_token_level_optimum_inputs",))

TABLE = Lab("lab11", tasks=(
    task("response_logprobs", mistakes=(
        M("rl_no_shift", (("logits[:, prompt_len - 1:-1]", "logits[:, prompt_len:]"),), "no shift"),
        M("rl_softmax", (("F.log_softmax(", "F.softmax("),), "softmax instead of log_softmax"),
        M("rl_raw_logits", (("F.log_softmax(logits[:, prompt_len - 1:-1], dim=-1)", "logits[:, prompt_len - 1:-1]"),),
          "without log_softmax"),
        M("rl_softmax_over_positions", (("dim=-1)", "dim=1)"),), "over the positions"),
        M("rl_fixed_prompt_len", (("logits[:, prompt_len - 1:-1]", "logits[:, 4:-1]"), ("ids[:, prompt_len:]", "ids[:, 5:]")),
          "shape"),
        M("rl_detached", (("return logp.gather", "return logp.detach().gather"),), "no gradient"),
    ), variants=(
        _v("ok_cross_entropy",
           '    return -F.cross_entropy(logits[:, prompt_len - 1:-1].transpose(1, 2), ids[:, prompt_len:],\n'
           '                            reduction="none")\n    logp = F.log_softmax(',
           "    logp = F.log_softmax("),
        _v("ok_take_along_dim_logsumexp",
           "    z = logits[:, prompt_len - 1:-1]\n"
           "    logp = z - torch.logsumexp(z, dim=-1, keepdim=True)\n"
           "    return torch.take_along_dim(logp, ids[:, prompt_len:, None], dim=-1)[..., 0]\n"
           "    logp = F.log_softmax(", "    logp = F.log_softmax("),
    )),
    task("sequence_logprob", mistakes=(
        M("seq_times_mask", (("torch.where(real, tok_logp, torch.zeros_like(tok_logp))", "(tok_logp * mask)"),),
          "multiplying by the mask"),
        M("seq_no_mask", (("torch.where(real, tok_logp, torch.zeros_like(tok_logp))", "tok_logp"),), "no mask"),
        M("seq_mean", ((".sum(dim=-1)", ".mean(dim=-1)"),), "the mean over tokens"),
        M("seq_float_condition", (("real = mask.bool()", "real = mask"),), "bool condition"),
        # converts only the float32 mask the visible checks pass: a float64 mask reaches torch.where as is
        M("seq_float32_mask_only", (("real = mask.bool()", "real = mask.bool() if mask.dtype == torch.float32 else mask"),),
          "floats of any dtype"),
        M("seq_keepdim", ((".sum(dim=-1)", ".sum(dim=-1, keepdim=True)"),), "shape"),
        M("seq_in_place", (("torch.where(real, tok_logp, torch.zeros_like(tok_logp))", "tok_logp.masked_fill_(~real, 0.0)"),),
          "must not change its inputs"),
    ), variants=(
        _v("ok_masked_fill", "    return tok_logp.masked_fill(~mask.bool(), 0.0).sum(-1)\n    real = mask.bool()",
           "    real = mask.bool()"),
        _v("ok_nansum_where", "    keep = mask > 0\n    return torch.where(keep, tok_logp, 0.0).sum(dim=1)\n    real = mask.bool()",
           "    real = mask.bool()"),
    )),
    task("sample_with_temperature", mistakes=(
        M("swt_no_greedy", (("    if temperature == 0:\n        return logits.argmax(dim=-1)\n", ""),), "dividing by T = 0"),
        M("swt_times_T", (("logits / temperature", "logits * temperature"),), "multiplied by T"),
        M("swt_ignores_T", (("logits / temperature", "logits"),), "temperature was ignored"),
        M("swt_no_generator", (("generator=generator", "generator=None"),), "generator was not passed"),
        M("swt_fixed_seed", (("generator=generator", "generator=torch.Generator().manual_seed(0)"),), "a fixed seed"),
        M("swt_no_squeeze", ((".squeeze(-1)", ""),), "drop that axis"),
        M("swt_int_zero_is_a_temperature", (("    if temperature == 0:\n", "    if isinstance(temperature, float) and temperature == 0:\n"),),
          "the int 0 means greedy too"),
        M("swt_first_row_for_all", (("F.softmax(logits / temperature, dim=-1)",
                                     "F.softmax(logits[:1] / temperature, dim=-1).expand_as(logits)"),),
          "drawn from the first row's distribution"),
        M("swt_greedy_dim0", (("logits.argmax(dim=-1)", "logits.argmax(dim=0)"),), "the last axis"),
        M("swt_naive_softmax", (("F.softmax(logits / temperature, dim=-1)",
                                 "torch.exp(logits / temperature) / torch.exp(logits / temperature).sum(-1, keepdim=True)"),),
          "overflows"),
    ), variants=(
        _v("ok_gumbel_max",
           "    if temperature <= 0:\n        return torch.argmax(logits, -1)\n"
           "    u = torch.rand(logits.shape, generator=generator).clamp_min(1e-20)\n"
           "    return (logits / temperature - torch.log(-torch.log(u))).argmax(-1)\n"
           "    if temperature == 0:", "    if temperature == 0:"),
        _v("ok_float64_probs",
           "    if temperature == 0:\n        return logits.max(dim=-1).indices\n"
           "    probs = torch.exp(torch.log_softmax(logits.double() / temperature, dim=-1))\n"
           "    return torch.multinomial(probs, 1, replacement=True, generator=generator)[:, 0]\n"
           "    if temperature == 0:", "    if temperature == 0:"),
    )),
    task("kl_estimators", mistakes=(
        M("kl_flipped", (("logp - ref_logp", "ref_logp - logp"),), "flipped"),
        M("kl_k1_ratio", (("k1 = log_ratio", "k1 = log_ratio.exp()"),), "the ratio"),
        M("kl_k2_no_half", (("log_ratio ** 2 / 2", "log_ratio ** 2"),), "without the / 2"),
        M("kl_k3_flipped", (("torch.expm1(-log_ratio) + log_ratio", "torch.expm1(log_ratio) - log_ratio"),),
          "exp(l) - 1 - l"),
        M("kl_k3_sign", (("torch.expm1(-log_ratio) + log_ratio", "torch.expm1(-log_ratio) - log_ratio"),),
          "sign of the last l"),
    ), variants=(
        _v("ok_naive_exp",
           "    l = logp - ref_logp\n    return l, 0.5 * l * l, torch.exp(-l) - 1 + l\n    log_ratio = logp - ref_logp",
           "    log_ratio = logp - ref_logp"),
        _v("ok_ratio_form",
           "    r = torch.exp(ref_logp - logp)\n    return logp - ref_logp, (logp - ref_logp).pow(2) / 2, (r - 1) - torch.log(r)\n"
           "    log_ratio = logp - ref_logp", "    log_ratio = logp - ref_logp"),
    )),
    task("tilted_optimum", PI + LOG_Z + TO_INPUTS, mistakes=(
        # pi_star and log_Z come from the same log-weights: a mistake in those costs both outputs
        M("to_times_beta", (("rewards / beta", "rewards * beta"),), "exp(r * beta)", parts=PI + LOG_Z),
        M("to_no_max", (("np.exp(scores - top)", "np.exp(scores)"), ("float(top + np.log(total))", "float(np.log(total))")),
          "log space", parts=PI + LOG_Z),
        M("to_log_eps", (("np.log(ref_probs)", "np.log(ref_probs + 1e-12)"),), "eps", parts=PI + LOG_Z),
        M("to_no_ref", (("np.log(ref_probs) + rewards / beta", "rewards / beta"),), "pi_ref was left out",
          parts=PI + LOG_Z),
        M("to_log_z_without_max", (("float(top + np.log(total))", "float(np.log(total))"),), "add the max back",
          parts=LOG_Z),
        M("to_not_normalized", (("pi_star = weights / total", "pi_star = weights"),), "not normalized", parts=PI),
        M("to_max_of_rewards", (("top = scores.max()", "top = (rewards / beta).max()"),), "not the largest reward",
          parts=PI + LOG_Z),
        M("to_beta_fixed", (("rewards / beta", "rewards / 1.0"),), "beta was not used", parts=PI + LOG_Z),
        M("to_log_in_place", (("np.log(ref_probs) + rewards / beta", "np.log(ref_probs, out=ref_probs) + rewards / beta"),),
          "must not change its inputs in place", parts=TO_INPUTS),
    ), variants=(
        _v("ok_logaddexp_with_warnings",          # np.log(0) warns: must not cost points
           "    s = np.log(ref_probs) + rewards / beta\n    log_Z = np.logaddexp.reduce(s, axis=None)\n"
           "    return np.exp(s - log_Z), float(log_Z)\n    with np.errstate(", "    with np.errstate("),
        _v("ok_where_masked",
           "    ok = ref_probs > 0\n    s = np.full(ref_probs.shape, -np.inf)\n"
           "    s[ok] = np.log(ref_probs[ok]) + rewards[ok] / beta\n    m = s[ok].max()\n"
           "    w = np.where(ok, np.exp(s - m), 0.0)\n    return w / w.sum(), m + np.log(w.sum())\n"
           "    with np.errstate(", "    with np.errstate("),
    )),
    task("kl_objective", mistakes=(
        M("ko_reversed_kl", (("support = probs > 0", "support = ref_probs > 0"),
                             ("p * (np.log(p) - np.log(q))", "q * (np.log(q) - np.log(p))")), "reversed"),
        M("ko_zero_log_zero", (("support = probs > 0", "support = probs >= 0"),), "0 log 0"),
        M("ko_plus_kl", (("- beta * kl", "+ beta * kl"),), "+ beta * KL"),
        M("ko_no_beta", (("- beta * kl", "- kl"),), "not multiplied by beta"),
        M("ko_kl_over_beta", (("- beta * kl", "- kl / beta"),), "KL / beta"),
    ), variants=(
        _v("ok_nansum_with_warnings",             # 0 * log 0 = nan dropped by nansum
           "    terms = probs * np.log(probs / ref_probs)\n"
           "    return float((probs * rewards).sum() - beta * np.nansum(terms))\n    support = probs > 0",
           "    support = probs > 0"),
        _v("ok_where",
           "    safe_p = np.where(probs > 0, probs, 1.0)\n    safe_q = np.where(probs > 0, ref_probs, 1.0)\n"
           "    kl = np.sum(np.where(probs > 0, probs * np.log(safe_p / safe_q), 0.0))\n"
           "    return np.sum(probs * rewards) - beta * kl\n    support = probs > 0", "    support = probs > 0"),
    )),
    task("token_level_optimum", SOFT + POLICY + TL_INPUTS, mistakes=(
        M("tl_expected_value", (("beta * np.logaddexp.reduce(log_second + rewards / beta, axis=1)",
                                 "np.sum(second * rewards, axis=1)"),), "expected reward", parts=SOFT),
        # exp(r * beta) everywhere: in the soft values and in the policy's formulas
        M("tl_times_beta", (("/ beta", "* beta"),), "exp(r * beta)", parts=SOFT + POLICY),
        M("tl_first_not_tilted", (("np.exp(log_first + (V - V0) / beta)", "first"),), "not re-weighted", parts=POLICY),
        M("tl_naive_logsumexp", (("np.logaddexp.reduce(log_second + rewards / beta, axis=1)",
                                  "np.log(np.sum(second * np.exp(rewards / beta), axis=1))"),), "stable log-sum-exp",
          parts=SOFT + POLICY),      # an overflowed V(i) leaves row i of the policy 0 or nan
        M("tl_no_beta_factor", (("V = beta * np.logaddexp", "V = np.logaddexp"),), "without the factor beta", parts=SOFT),
        M("tl_V0_log_Z", (("V0 = float(beta * np.logaddexp.reduce(", "V0 = float(np.logaddexp.reduce("),),
          "log Z instead of beta log Z", parts=SOFT),
        M("tl_row_max_of_rewards", (("V = beta * np.logaddexp.reduce(log_second + rewards / beta, axis=1)",
                                     "top = rewards.max(axis=1)\n"
                                     "    V = top + beta * np.log(np.sum(second * np.exp((rewards - top[:, None]) / beta), axis=1))"),),
          "not the largest reward", parts=SOFT + POLICY),   # V(1) underflows to -inf: row 1 of the policy too
        M("tl_log_in_place", (("np.log(first), np.log(second)", "np.log(first), np.log(second, out=second)"),),
          "must not change its inputs in place", parts=TL_INPUTS),
    ), variants=(
        _v("ok_max_subtraction",
           "    with np.errstate(divide='ignore'):\n        ls, lf = np.log(second), np.log(first)\n"
           "    a = ls + rewards / beta\n    m = a.max(axis=1, keepdims=True)\n"
           "    V = beta * (m[:, 0] + np.log(np.exp(a - m).sum(axis=1)))\n"
           "    b = lf + V / beta\n    V0 = beta * (b.max() + np.log(np.exp(b - b.max()).sum()))\n"
           "    return np.exp(lf + (V - V0) / beta), np.exp(ls + (rewards - V[:, None]) / beta), V, V0\n"
           "    with np.errstate(", "    with np.errstate("),
    )),
), concepts=(
    Concept("concept_entropy_limit", mistakes=(
        M("cc_entropy_first_token_only", (("return np.log(n) + (n - 1) / n * np.log(n)", "return np.log(n)"),),
          "is not within 0.05"),)),
    Concept("concept_kl_limit", mistakes=(
        M("cc_limit_best_only", (("best_mass = 0.719 + 0.028 + 0.018", "best_mass = 0.719"),), "is not within 0.02"),)),
), questions=(
    Question("answer_kl_signs"),
    Question("answer_kl_sharp"),
    Question("answer_objective_identity"),
    Question("answer_beta_limit"),
))
