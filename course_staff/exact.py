"""Staff helpers on Lab 12's exact optimum: one line from models to pi*, and a policy's likeliest answers.

    opt = exact_optimum_of(sft, rm, rm_offset, beta=0.1)        # tree built, reference run, solved
    top_responses(tree, tree.logprobs(policy), "7+5=", k=5)     # [(text, prob, (d, s, a)), ...]

The benchmarks, the tests and the Beyond PPO experiment use them; the student package keeps only the
tree (course_utils.response_tree) and the solver (course_utils.tree_optimum) that its views draw.
"""

import math

from course_utils.response_tree import N_ACTIONS, TERMINAL, ResponseTree, path_logprobs
from course_utils.tree_optimum import exact_optimum


def exact_optimum_of(ref_model, rm, rm_offset, beta, prompts=None):
    """One line from models to the optimum: build the tree, run the reference model, solve."""
    tree = ResponseTree.build(prompts)
    return exact_optimum(tree, tree.logprobs(ref_model), tree.rm_rewards(rm, rm_offset), beta)


def top_responses(tree, logp, prompt, k=5):
    """The k most likely complete responses of a policy (tree tensors ``logp``) to one prompt.

    Returns [(text, prob, (d, s, a)), ...], most likely first; (d, s, a) locates the response.
    """
    p = tree.prompts.index(prompt)
    cands = []
    for d, path in enumerate(path_logprobs([lp[p:p + 1] for lp in logp])):
        lp = path[0].masked_fill(~TERMINAL[d], float("-inf")).flatten()
        top = lp.topk(min(k, lp.numel()))
        cands += [(v, (d, i // N_ACTIONS, i % N_ACTIONS)) for v, i in zip(top.values.tolist(), top.indices.tolist())]
    cands.sort(reverse=True)
    return [(tree.response_text(*where), math.exp(v), where) for v, where in cands[:k]]


__all__ = ["exact_optimum_of", "top_responses"]
