"""Lab 11's catalogue of likely mistakes ("mutants") and of other correct answers ("variants"), as data.

A mutant is the instructor's solution of ONE task with a plausible student mistake spliced in
(string replacements in that solution cell). Graded by the real nbgrader, it must lose points on
its own task's check cell and nowhere else, and the check's message should name the mistake
(``says``: a piece of the error message). A variant is another correct way to write a function
(cross_entropy instead of log_softmax + gather, Gumbel-max sampling, logaddexp, nansum, ...,
some of them emitting numpy warnings): it must keep full marks (tests/test_mutants.py).
"""

from mutant import Mutant, mutant


_m = mutant


MUTANTS = [
    # Task 1a: response_logprobs
    _m("response_logprobs", "rl_no_shift", [("logits[:, prompt_len - 1:-1]", "logits[:, prompt_len:]")],
       "no shift"),
    _m("response_logprobs", "rl_softmax", [("F.log_softmax(", "F.softmax(")], "softmax instead of log_softmax"),
    _m("response_logprobs", "rl_raw_logits",
       [("F.log_softmax(logits[:, prompt_len - 1:-1], dim=-1)", "logits[:, prompt_len - 1:-1]")],
       "without log_softmax"),
    _m("response_logprobs", "rl_softmax_over_positions", [("dim=-1)", "dim=1)")], "over the positions"),
    _m("response_logprobs", "rl_fixed_prompt_len",
       [("logits[:, prompt_len - 1:-1]", "logits[:, 4:-1]"), ("ids[:, prompt_len:]", "ids[:, 5:]")], "shape"),
    _m("response_logprobs", "rl_detached", [("return logp.gather", "return logp.detach().gather")],
       "no gradient"),
    # Task 1b: sequence_logprob
    _m("sequence_logprob", "seq_times_mask",
       [("torch.where(real, tok_logp, torch.zeros_like(tok_logp))", "(tok_logp * mask)")],
       "multiplying by the mask"),
    _m("sequence_logprob", "seq_no_mask", [("torch.where(real, tok_logp, torch.zeros_like(tok_logp))", "tok_logp")],
       "no mask"),
    _m("sequence_logprob", "seq_mean", [(".sum(dim=-1)", ".mean(dim=-1)")], "the mean over tokens"),
    _m("sequence_logprob", "seq_float_condition", [("real = mask.bool()", "real = mask")], "mask.bool()"),
    _m("sequence_logprob", "seq_keepdim", [(".sum(dim=-1)", ".sum(dim=-1, keepdim=True)")], "shape"),
    # Task 2: sample_with_temperature
    _m("sample_with_temperature", "swt_no_greedy",
       [("    if temperature == 0:\n        return logits.argmax(dim=-1)\n", "")], "dividing by T = 0"),
    _m("sample_with_temperature", "swt_times_T", [("logits / temperature", "logits * temperature")],
       "multiplied by T"),
    _m("sample_with_temperature", "swt_ignores_T", [("logits / temperature", "logits")],
       "temperature was ignored"),
    _m("sample_with_temperature", "swt_no_generator", [("generator=generator", "generator=None")],
       "generator was not passed"),
    _m("sample_with_temperature", "swt_fixed_seed",
       [("generator=generator", "generator=torch.Generator().manual_seed(0)")], "a fixed seed"),
    _m("sample_with_temperature", "swt_no_squeeze", [(".squeeze(-1)", "")], "squeeze it"),
    _m("sample_with_temperature", "swt_greedy_dim0", [("logits.argmax(dim=-1)", "logits.argmax(dim=0)")],
       "argmax(dim=-1)"),
    # Task 3: kl_estimators
    _m("kl_estimators", "kl_flipped", [("logp - ref_logp", "ref_logp - logp")], "flipped"),
    _m("kl_estimators", "kl_k1_ratio", [("k1 = log_ratio", "k1 = log_ratio.exp()")], "the ratio"),
    _m("kl_estimators", "kl_k2_no_half", [("log_ratio ** 2 / 2", "log_ratio ** 2")], "without the / 2"),
    _m("kl_estimators", "kl_k3_flipped", [("torch.expm1(-log_ratio) + log_ratio", "torch.expm1(log_ratio) - log_ratio")],
       "exp(l) - 1 - l"),
    _m("kl_estimators", "kl_k3_sign", [("torch.expm1(-log_ratio) + log_ratio", "torch.expm1(-log_ratio) - log_ratio")],
       "sign of the last l"),
    # Task 4: tilted_optimum
    _m("tilted_optimum", "to_times_beta", [("rewards / beta", "rewards * beta")], "exp(r * beta)"),
    _m("tilted_optimum", "to_no_max",
       [("np.exp(scores - top)", "np.exp(scores)"), ("float(top + np.log(total))", "float(np.log(total))")],
       "log space"),
    _m("tilted_optimum", "to_log_eps", [("np.log(ref_probs)", "np.log(ref_probs + 1e-12)")], "eps"),
    _m("tilted_optimum", "to_no_ref", [("np.log(ref_probs) + rewards / beta", "rewards / beta")],
       "pi_ref was left out"),
    _m("tilted_optimum", "to_log_z_without_max", [("float(top + np.log(total))", "float(np.log(total))")],
       "add the max back"),
    _m("tilted_optimum", "to_not_normalized", [("pi_star = weights / total", "pi_star = weights")],
       "not normalized"),
    # Task 4: kl_objective
    _m("kl_objective", "ko_reversed_kl",
       [("support = probs > 0", "support = ref_probs > 0"),
        ("p * (np.log(p) - np.log(q))", "q * (np.log(q) - np.log(p))")], "reversed"),
    _m("kl_objective", "ko_zero_log_zero", [("support = probs > 0", "support = probs >= 0")], "0 log 0"),
    _m("kl_objective", "ko_plus_kl", [("- beta * kl", "+ beta * kl")], "+ beta * KL"),
    _m("kl_objective", "ko_no_beta", [("- beta * kl", "- kl")], "not multiplied by beta"),
    _m("kl_objective", "ko_kl_over_beta", [("- beta * kl", "- kl / beta")], "KL / beta"),
    # Task 5: token_level_optimum
    _m("token_level_optimum", "tl_expected_value",
       [("beta * np.logaddexp.reduce(log_second + rewards / beta, axis=1)", "np.sum(second * rewards, axis=1)")],
       "expected reward"),
    _m("token_level_optimum", "tl_times_beta", [("/ beta", "* beta")], "exp(r * beta)"),
    _m("token_level_optimum", "tl_first_not_tilted", [("np.exp(log_first + (V - V0) / beta)", "first")],
       "not re-weighted"),
    _m("token_level_optimum", "tl_naive_logsumexp",
       [("np.logaddexp.reduce(log_second + rewards / beta, axis=1)",
         "np.log(np.sum(second * np.exp(rewards / beta), axis=1))")], "stable log-sum-exp"),
    _m("token_level_optimum", "tl_no_beta_factor", [("V = beta * np.logaddexp", "V = np.logaddexp")],
       "without the factor beta"),
    _m("token_level_optimum", "tl_V0_log_Z", [("V0 = float(beta * np.logaddexp.reduce(", "V0 = float(np.logaddexp.reduce(")],
       "log Z instead of beta log Z"),
]


# ----------------------------------------------------------------------------- correct variants
def _v(task, name, body, old=None):
    """A variant replacing the whole solution body (from its first line ``old`` to the end)."""
    return Mutant(f"test_{task}", f"{task}_solution", name, ((old, body),))


VARIANTS = [
    _v("response_logprobs", "ok_cross_entropy",
       '    return -F.cross_entropy(logits[:, prompt_len - 1:-1].transpose(1, 2), ids[:, prompt_len:],\n'
       '                            reduction="none")\n    logp = F.log_softmax(',
       "    logp = F.log_softmax("),
    _v("response_logprobs", "ok_take_along_dim_logsumexp",
       "    z = logits[:, prompt_len - 1:-1]\n"
       "    logp = z - torch.logsumexp(z, dim=-1, keepdim=True)\n"
       "    return torch.take_along_dim(logp, ids[:, prompt_len:, None], dim=-1)[..., 0]\n"
       "    logp = F.log_softmax(", "    logp = F.log_softmax("),
    _v("sequence_logprob", "ok_masked_fill",
       "    return tok_logp.masked_fill(~mask.bool(), 0.0).sum(-1)\n    real = mask.bool()",
       "    real = mask.bool()"),
    _v("sequence_logprob", "ok_nansum_where",
       "    keep = mask > 0\n    return torch.where(keep, tok_logp, 0.0).sum(dim=1)\n    real = mask.bool()",
       "    real = mask.bool()"),
    _v("sample_with_temperature", "ok_gumbel_max",
       "    if temperature <= 0:\n        return torch.argmax(logits, -1)\n"
       "    u = torch.rand(logits.shape, generator=generator).clamp_min(1e-20)\n"
       "    return (logits / temperature - torch.log(-torch.log(u))).argmax(-1)\n"
       "    if temperature == 0:", "    if temperature == 0:"),
    _v("sample_with_temperature", "ok_float64_probs",
       "    if temperature == 0:\n        return logits.max(dim=-1).indices\n"
       "    probs = torch.exp(torch.log_softmax(logits.double() / temperature, dim=-1))\n"
       "    return torch.multinomial(probs, 1, replacement=True, generator=generator)[:, 0]\n"
       "    if temperature == 0:", "    if temperature == 0:"),
    _v("kl_estimators", "ok_naive_exp",
       "    l = logp - ref_logp\n    return l, 0.5 * l * l, torch.exp(-l) - 1 + l\n    log_ratio = logp - ref_logp",
       "    log_ratio = logp - ref_logp"),
    _v("kl_estimators", "ok_ratio_form",
       "    r = torch.exp(ref_logp - logp)\n    return logp - ref_logp, (logp - ref_logp).pow(2) / 2, (r - 1) - torch.log(r)\n"
       "    log_ratio = logp - ref_logp", "    log_ratio = logp - ref_logp"),
    _v("tilted_optimum", "ok_logaddexp_with_warnings",          # np.log(0) warns: must not cost points
       "    s = np.log(ref_probs) + rewards / beta\n    log_Z = np.logaddexp.reduce(s, axis=None)\n"
       "    return np.exp(s - log_Z), float(log_Z)\n    with np.errstate(",
       "    with np.errstate("),
    _v("tilted_optimum", "ok_where_masked",
       "    ok = ref_probs > 0\n    s = np.full(ref_probs.shape, -np.inf)\n"
       "    s[ok] = np.log(ref_probs[ok]) + rewards[ok] / beta\n    m = s[ok].max()\n"
       "    w = np.where(ok, np.exp(s - m), 0.0)\n    return w / w.sum(), m + np.log(w.sum())\n"
       "    with np.errstate(", "    with np.errstate("),
    _v("kl_objective", "ok_nansum_with_warnings",               # 0 * log 0 = nan dropped by nansum
       "    terms = probs * np.log(probs / ref_probs)\n"
       "    return float((probs * rewards).sum() - beta * np.nansum(terms))\n    support = probs > 0",
       "    support = probs > 0"),
    _v("kl_objective", "ok_where",
       "    safe_p = np.where(probs > 0, probs, 1.0)\n    safe_q = np.where(probs > 0, ref_probs, 1.0)\n"
       "    kl = np.sum(np.where(probs > 0, probs * np.log(safe_p / safe_q), 0.0))\n"
       "    return np.sum(probs * rewards) - beta * kl\n    support = probs > 0", "    support = probs > 0"),
    _v("token_level_optimum", "ok_max_subtraction",
       "    with np.errstate(divide='ignore'):\n        ls, lf = np.log(second), np.log(first)\n"
       "    a = ls + rewards / beta\n    m = a.max(axis=1, keepdims=True)\n"
       "    V = beta * (m[:, 0] + np.log(np.exp(a - m).sum(axis=1)))\n"
       "    b = lf + V / beta\n    V0 = beta * (b.max() + np.log(np.exp(b - b.max()).sum()))\n"
       "    return np.exp(lf + (V - V0) / beta), np.exp(ls + (rewards - V[:, None]) / beta), V, V0\n"
       "    with np.errstate(", "    with np.errstate("),
]
