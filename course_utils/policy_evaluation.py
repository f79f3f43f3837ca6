"""Exact policy evaluation on Lab 12's response tree (course_utils.response_tree): V^pi and Q^pi of the
KL-penalized return that train_rlhf optimizes, and where each token of a rollout sits on the tree.

The reward of token a in state s is -beta * log(pi(a|s) / pi_ref(a|s)), plus r(y) when (s, a)
completes the response y, so, backwards from the leaves,

    Q^pi(s, a) = -beta * log(pi(a|s) / pi_ref(a|s)) + (r(s, a) if (s, a) is complete else V^pi(s * 12 + a))
    V^pi(s)    = sum_a pi(a|s) Q^pi(s, a),        A^pi(s, a) = Q^pi(s, a) - V^pi(s)

At the optimum pi* of the same beta, V^pi* is the soft value of course_utils.tree_optimum.

    values, q = policy_values(tree.logprobs(policy), tree.logprobs(sft), tree.rm_rewards(rm, offset), beta)
    state, action = token_states(out, rows)        # rows: each response's prompt row of the tree
    v_at_tokens = at_tokens(values, rows, state)   # (B, T)
"""

import torch

from course_utils.response_tree import DEPTHS, N_ACTIONS, N_CONT, n_states
from course_utils.tinylm import EOS, MAX_NEW


def policy_values(logp, ref_logp, rewards, beta):
    """Exact V^pi and Q^pi of the KL-penalized return (module docstring) on the response tree.

    Args:
        logp, ref_logp: tree tensors (P, S_d, 13) of the policy and the reference;
        rewards: tree tensors (P, S_d, 13), r(y) at complete responses; beta: the KL coefficient.
    Returns:
        (values, q): tree tensors (P, S_d) and (P, S_d, 13).
    """
    values, q = [None] * MAX_NEW, [None] * MAX_NEW
    for d in reversed(DEPTHS):
        q[d] = rewards[d] - beta * (logp[d] - ref_logp[d])
        if d + 1 < MAX_NEW:                                       # a continuing token leads to V(child)
            child = values[d + 1].view(q[d].shape[0], n_states(d), N_CONT)
            q[d] = q[d] + torch.cat([child, child.new_zeros(*child.shape[:2], N_ACTIONS - N_CONT)], dim=-1)
        values[d] = (logp[d].exp() * q[d]).sum(-1)
    return values, q


def token_states(out, rows):
    """Where each response token of a rollout sits on the tree: (state, action), both (B, T) long.

    rows: (B,) the tree's prompt row of each response. Token t of a response is chosen in the state of
    depth t made of its first t tokens, s = sum_i y_i * 12**(t-1-i); its action is the token's column
    (the token id, 12 for EOS). Padding gets state 0, action 0.
    """
    resp, mask = out["ids"][:, out["prompt_len"]:], out["mask"].bool()
    action = torch.where(resp == EOS, N_CONT, resp).masked_fill(~mask, 0)
    state = torch.zeros_like(action)
    for t in range(1, resp.shape[1]):
        state[:, t] = state[:, t - 1] * N_CONT + action[:, t - 1]
    return state.masked_fill(~mask, 0), action


def at_tokens(tree_tensors, rows, state, extra=None):
    """Gather tree tensors at each token's depth t and state: (B, T) (and action ``extra`` if given)."""
    cols = []
    for t in range(state.shape[1]):
        x = tree_tensors[t][rows, state[:, t]]
        cols.append(x if extra is None else x.gather(-1, extra[:, t:t + 1])[:, 0])
    return torch.stack(cols, dim=1)


__all__ = ["policy_values", "token_states", "at_tokens"]
