"""Lab 12's response tree: every response of up to four tokens, and exact expectations on it.

A response is at most ``MAX_NEW = 4`` tokens drawn from the 13 tokens the LM may emit (digits,
'+', '=', EOS); EOS ends it, and so does the fourth token. So each prompt has a finite response
tree, small enough to walk completely:

    depth d = 0..3   states: the prompt plus d non-EOS tokens, S_d = 12**d of them (1885 in all)
    action a = 0..12 the next token ACTIONS[a]: tokens 0..11, then EOS (column EOS_COL = 12)

Taking action a in state s of depth d leads to state s * 12 + a of depth d + 1 when a < 12 and
d < 3; otherwise the response is complete (EOS, or a fourth token) and gets its reward. Everything
on the tree is stored as a list of four tensors indexed by depth ("tree tensors"):

    logp[d]     (P, S_d, 13)  log pi(a | x, s): a policy's next-token log-probs (BOS, PAD forbidden)
    rewards[d]  (P, S_d, 13)  the reward of the complete response (s, a); 0 where it is not complete
    TERMINAL[d] (13,)         which actions complete a response at depth d

Usage:

    tree = ResponseTree.build()                        # all 100 prompts "a+b=", a response tree each
    ref_logp = tree.logprobs(sft)                      # batched passes, one per depth
    rewards = tree.rm_rewards(rm, rm_offset)           # r(y) = rm(digit_counts(y)) - rm_offset
    probs = response_probs(ref_logp)                   # pi(y | x) of every complete response
    expectation(probs, rewards), kl_divergence(policy_logp, ref_logp)     # (P,) each, exact
    exact_entropy(tree, sft)                           # the mean entropy over whole responses

The KL-regularized optimum solved on this tree is ``course_utils.tree_optimum``. Only ``logprobs``
runs a model.
"""

import functools
import math

import torch
import torch.nn.functional as F

from course_utils.causal_pass import log_softmax, softmax
from course_utils.evaluation import RESPONSE_METRICS, response_metrics
from course_utils.reward_model import digit_counts
from course_utils.tinylm import (EOS, MAX_NEW, PAD, PROMPT_LEN, RESPONSE_TOKENS, TOKENS, causal_attention, decode_responses,
                                encode_prompts)

ACTIONS = torch.tensor(RESPONSE_TOKENS)              # the 13 tokens a response may contain
N_ACTIONS = len(ACTIONS)                               # 13
N_CONT = 12                                            # actions that continue a response (not EOS)
EOS_COL = 12                                           # the column of EOS among the actions
DEPTHS = range(MAX_NEW)                                # 0..3
TERMINAL = [torch.arange(N_ACTIONS) == EOS_COL for _ in range(MAX_NEW - 1)] + [torch.ones(N_ACTIONS, dtype=torch.bool)]
ALL_PROMPTS = [f"{a}+{b}=" for a in range(10) for b in range(10)]
FEATURES = RESPONSE_METRICS                                # what the labeler sees, per response
FAST_CHUNK = 5          # prompts per batched pass (a tree's default): a depth-3 pass of 5 stays in cache; the same
                        # log-probs, bit for bit, as 10 at a time (tests/test_exact.py)


def _features(out):
    """The FEATURES of each response of a rollout: (B, 4)."""
    metrics = response_metrics(out)
    return torch.stack([metrics[name] for name in FEATURES], dim=1)


def n_states(d):
    """Number of states at depth d: the 12**d prefixes of d non-EOS tokens."""
    return N_CONT ** d


# ----------------------------------------------------------------------------- the tree
class ResponseTree:
    """Every response to each of P prompts, as per-depth tensors (see the module docstring).

    Attributes:
        prompts     list of P prompt strings
        prompt_ids  (P, 5) long
        features    tree tensors (P, S_d, 13, 4): for each complete response, the columns FEATURES:
                    gold score, 1 if exactly right (acc), 1 if malformed (gold < 0), number of digits
    """

    def __init__(self, prompts, chunk=FAST_CHUNK):
        self.prompts = list(prompts)
        self.prompt_ids, _ = encode_prompts(self.prompts)
        self.P = len(self.prompts)
        self.chunk = chunk                                      # prompts per batched pass (memory)
        self._resp, self._mask = _all_responses()

    @functools.cached_property
    def features(self):
        """FEATURES of every complete response, tree tensors (P, S_d, 13, 4) (see the class docstring)."""
        return self.features_of(slice(None))

    def features_of(self, rows):
        """``features`` of the prompts ``rows`` only (a slice or index tensor): what a loop over a few
        prompts at a time reads, without the tensors of all P prompts (72 MB for the 100)."""
        by_sum, row_of = self._features_by_sum
        return [t[row_of[rows]] for t in by_sum]

    def complete_features(self):
        """``complete_only(features_of(rows))`` for any ``rows``, as a function: the complete responses'
        features per distinct answer sum are gathered once, (U, N, 4), and each call picks its prompts'
        rows from them, not from the whole tree tensors (a loop over a few prompts at a time)."""
        by_sum, row_of = self._features_by_sum
        complete = complete_only(by_sum)                                            # (U, N, 4)
        return lambda rows: complete[row_of[rows]]

    @functools.cached_property
    def _features_by_sum(self):
        """The labeler's features per distinct answer sum, scored on first use: a view that reads only
        log-probs and rewards (the critic's) never pays for them."""
        return self._score_by_sum(_features)

    @classmethod
    def build(cls, prompts=None):
        """The tree of every prompt in ``prompts`` (default: all 100 prompts of the toy).

        Trees hold no model, only the responses and the labeler's view of them, so the last few
        are kept: building the same tree again is free.
        """
        return _build(cls, tuple(ALL_PROMPTS if prompts is None else prompts))

    def _chunks(self, prompt_ids=None):
        prompt_ids = self.prompt_ids if prompt_ids is None else prompt_ids
        for i in range(0, len(prompt_ids), self.chunk):
            yield prompt_ids[i:i + self.chunk]

    @torch.no_grad()
    def logprobs(self, model):
        """Next-token log-probs of ``model`` at every state: tree tensors (P, S_d, 13), float64.

        The distribution ``tinylm.sample`` draws from at temperature 1 (BOS and PAD forbidden).
        One batched forward per depth (all states of that depth, a chunk of prompts at a time),
        reusing the keys and values of each state's prompt and ancestors.
        """
        parts = [[] for _ in DEPTHS]
        for ids in self._chunks():
            for d, logits in enumerate(_tree_logits(model, ids)):
                parts[d].append(log_softmax(logits[..., ACTIONS].double()))
        return [torch.cat(p) for p in parts]

    @torch.no_grad()
    def score(self, fn, prompt_ids=None):
        """Apply ``fn(rollout) -> (N,) or (N, K)`` to every complete response: tree tensors
        (P, S_d, 13) or (P, S_d, 13, K), float64, 0 where the response is not complete.

        ``fn`` sees ordinary rollouts (ids, prompt_len, mask) as ``tinylm.sample`` returns them,
        e.g. ``gold_score`` or ``lambda out: rm(digit_counts(out)) - rm_offset``. ``prompt_ids``:
        other prompts than the tree's (their rows instead of P).
        """
        parts = []
        for ids in self._chunks(prompt_ids):
            c, R = ids.shape[0], self._resp.shape[0]
            seq = torch.empty(c, R, PROMPT_LEN + MAX_NEW, dtype=torch.long)
            seq[:, :, :PROMPT_LEN] = ids[:, None]
            seq[:, :, PROMPT_LEN:] = self._resp
            out = {"ids": seq.view(c * R, -1), "prompt_len": PROMPT_LEN, "mask": self._mask.repeat(c, 1)}
            values = fn(out).double()
            parts.append(values.view(c, R, *values.shape[1:]))
        return from_complete(torch.cat(parts))

    def _score_by_sum(self, fn):
        """``score(fn)`` for an ``fn`` that reads a prompt only through its answer a + b, as the
        labeler does: computed once per distinct sum (at most 19 prompts instead of 100). Returns the
        tree tensors of the sums and each prompt's row among them: score(fn)[d] == t[d][which]."""
        sums, which = torch.unique(self.prompt_ids[:, 1] + self.prompt_ids[:, 3], return_inverse=True)
        first = [int((which == i).nonzero()[0]) for i in range(len(sums))]      # a prompt per sum
        return self.score(fn, self.prompt_ids[first]), which

    @torch.no_grad()
    def rm_rewards(self, rm, rm_offset=0.0):
        """r(y) = rm(digit_counts(y)) - rm_offset for every complete response, as train_rlhf scores.

        The reward model reads the response's digit counts only, so each response is scored once
        and its score shared by every prompt.
        """
        counts = digit_counts({"ids": torch.cat([self.prompt_ids[:1].expand(len(self._resp), -1), self._resp], 1),
                               "prompt_len": PROMPT_LEN, "mask": self._mask})
        r = (rm(counts) - rm_offset).double()                                    # (N,)
        return from_complete(r.expand(self.P, -1))

    def answers(self, which=None):
        """Complete responses as ``decode_responses`` shows them ("12", "" for a blank, "7777…"): all
        N = 22621 in the order of complete_only, or those at the indices ``which`` (a list of ints)."""
        resp, mask = (self._resp, self._mask) if which is None else (self._resp[which], self._mask[which])
        ids = torch.cat([self.prompt_ids[:1].expand(len(resp), -1), resp], dim=1)
        return decode_responses({"ids": ids, "prompt_len": PROMPT_LEN, "mask": mask})

    def response_text(self, d, s, a):
        """Text of the response (state s of depth d, then action a), e.g. ``"12<eos>"``."""
        toks = [(s // N_CONT ** (d - 1 - i)) % N_CONT for i in range(d)] + [int(ACTIONS[a])]
        return "".join(TOKENS[t] for t in toks)


@functools.lru_cache(maxsize=4)
def _build(cls, prompts):
    return cls(prompts)


def _all_responses():
    """Every complete response as padded ids and mask (N, 4), N = 22621, in the order of
    complete_only: by depth, then state, then action."""
    resp, mask = [], []
    for d in DEPTHS:
        S = n_states(d)
        prefix = torch.cartesian_prod(*[torch.arange(N_CONT)] * d).view(S, d) if d else torch.zeros(1, 0).long()
        last = ACTIONS[TERMINAL[d]]                                              # EOS, or all 13 at depth 3
        r = torch.full((S, len(last), MAX_NEW), PAD)
        r[:, :, :d] = prefix[:, None]
        r[:, :, d] = last
        m = torch.zeros(S, len(last), MAX_NEW)
        m[:, :, :d + 1] = 1.0
        resp.append(r.view(-1, MAX_NEW))
        mask.append(m.view(-1, MAX_NEW))
    return torch.cat(resp), torch.cat(mask)


# ----------------------------------------------------------------------------- batched forward passes
def _tree_attention(q, levels):
    """Attention of the newest position of every state over its prompt and its ancestors' tokens.

    q: (c, S, h, dh), one query per state of depth d (S = 12**d states).
    levels[j] = (k, v), each (c, S_j, L_j, h, dh): j = 0 the prompt (S_0 = 1, L_0 = 5), j >= 1 the
    token at depth j of each state of that depth (L_j = 1). The ancestor at depth j of state s is
    state s // (S / S_j), so viewing q as (c, S_j, S / S_j, h, dh) lines every state up with its
    ancestor: a broadcast, not a copy of the keys.
    """
    c, S, h, dh = q.shape
    by_ancestor = lambda t, S_j: t.view(c, S_j, S // S_j, *t.shape[2:])
    scores = [torch.einsum("cabhd,calhd->cabhl", by_ancestor(q, k.shape[1]), k).reshape(c, S, h, -1)
              for k, _ in levels]
    scores = torch.cat(scores, dim=-1) / math.sqrt(dh)                              # (c, S, h, 5 + d)
    weights = softmax(scores).split([k.shape[2] for k, _ in levels], dim=-1)
    return sum(torch.einsum("cabhl,calhd->cabhd", by_ancestor(w, v.shape[1]), v).reshape(c, S, h, dh)
               for w, (_, v) in zip(weights, levels))


def _keeping_prompt(levels):
    """The model's causal attention over the prompt, keeping its keys and values as level 0."""
    def attend(q, k, v):                                                         # (c, 5, h, dh)
        levels.append((k[:, None], v[:, None]))                                  # (c, 1, 5, h, dh)
        return causal_attention(q, k, v)
    return attend


def _over_ancestors(levels):
    """Attention of each state's new token over its prompt and ancestors, keeping its keys and values."""
    def attend(q, k, v):                                                         # (c, S, h, dh)
        levels.append((k[:, :, None], v[:, :, None]))                            # (c, S, 1, h, dh)
        return _tree_attention(q, levels)
    return attend


def _tree_logits(model, prompt_ids):
    """Next-token logits (c, S_d, V) at every state of depth d = 0..3, for c prompts (c, 5).

    Incremental decoding with the model's own blocks: depth 0 runs the prompts; each deeper level
    runs one new position per state (the 12 continuations of every parent, in one batch) whose
    attention reads the keys and values of its prompt and ancestors, kept per level and per block.
    """
    c = prompt_ids.shape[0]
    levels = [[] for _ in range(model.n_layers)]
    logits = [model(prompt_ids, attention=[_keeping_prompt(lv) for lv in levels])[:, -1:]]   # (c, 1, V)
    for d in range(1, MAX_NEW):
        S = n_states(d)
        ids = ACTIONS[:N_CONT].repeat(n_states(d - 1)).expand(c, S)            # state s ends in s % 12
        at = torch.full((S,), PROMPT_LEN + d - 1)                                # every new token's position
        logits.append(model(ids, positions=at, attention=[_over_ancestors(lv) for lv in levels]))
    return logits


# ----------------------------------------------------------------------------- policies on the tree
def reach_logprobs(logp):
    """log P_pi(reach state s | x): tree tensors (P, S_d), 0 at the root."""
    states = [torch.zeros_like(logp[0][..., 0])]                                # (P, 1)
    for d in range(MAX_NEW - 1):
        step = states[d][..., None] + logp[d][..., :N_CONT]                      # (P, S_d, 12)
        states.append(step.reshape(step.shape[0], -1))                           # (P, S_{d+1})
    return states


def path_logprobs(logp):
    """log pi(s, a | x): log-prob of reaching state s and then taking a. Tree tensors (P, S_d, 13).

    At complete responses this is the sequence log-prob log pi(y | x) = sum_t log pi(y_t | x, y_<t).
    """
    return [s[..., None] + lp for s, lp in zip(reach_logprobs(logp), logp)]


def complete_path_logprobs(logp):
    """``complete_only(path_logprobs(logp))``, (P, N): log pi(y | x) of every complete response, each
    written in its place (the incomplete paths are never summed, the tree tensors never gathered)."""
    P, reach = logp[0].shape[0], reach_logprobs(logp)
    ends = [_terminal(lp, d) for d, lp in enumerate(logp)]                       # (P, S_d, 1 or 13)
    out = logp[0].new_empty(P, sum(e.shape[1] * e.shape[2] for e in ends))
    start = 0
    for s, e in zip(reach, ends):
        n = e.shape[1] * e.shape[2]
        torch.add(s[..., None], e, out=out[:, start:start + n].view(e.shape))
        start += n
    return out


def response_probs(logp):
    """pi(y | x) of every complete response: tree tensors (P, S_d, 13), 0 where not complete.

    Sums to 1 over the tree of each prompt.
    """
    return [path.exp() * TERMINAL[d] for d, path in enumerate(path_logprobs(logp))]


def expectation(probs, values):
    """E_pi[values(y)] per prompt: (P,), from probs = response_probs(logp) and tree tensors of values."""
    return sum((p * v).sum(dim=(1, 2)) for p, v in zip(probs, values))


def kl_divergence(logp, other_logp):
    """KL(pi || q) per prompt: (P,), in nats per response, accumulated token by token.

    KL = sum over states s of P_pi(reach s) * KL(pi(.|s) || q(.|s)): a sum of nonnegative terms.
    """
    per_state = [(lp.exp() * (lp - lq)).sum(-1) for lp, lq in zip(logp, other_logp)]     # (P, S_d)
    return sum((r.exp() * k).sum(-1) for r, k in zip(reach_logprobs(logp), per_state))


def complete_only(values):
    """Tree tensors (P, S_d, 13, ...) -> the complete responses only, (P, N = 22621, ...), ordered by
    depth, then state, then action: the sequence-level view of the tree."""
    return torch.cat([_terminal(v, d).flatten(1, 2) for d, v in enumerate(values)], dim=1)


def _terminal(v, d):
    """v[:, :, TERMINAL[d]] without boolean indexing (slow on big tensors): EOS's column, or all 13."""
    return v if d == MAX_NEW - 1 else v.narrow(2, EOS_COL, 1)


def from_complete(values):
    """The inverse of complete_only: (P, N, ...) -> tree tensors (P, S_d, 13, ...), 0 where not complete."""
    P, extra, trees, start = values.shape[0], values.shape[2:], [], 0
    for d in DEPTHS:
        S, n = n_states(d), int(TERMINAL[d].sum())
        tree = values.new_zeros(P, S, N_ACTIONS, *extra)
        tree[:, :, TERMINAL[d]] = values[:, start:start + S * n].reshape(P, S, n, *extra)
        trees.append(tree)
        start += S * n
    return trees


def exact_entropy(tree, model):
    """Mean over the tree's prompts (a ``ResponseTree``) of the entropy of pi(y | x)
    over whole responses, in nats (exact)."""
    with torch.no_grad():
        return entropy(tree.logprobs(model))


def entropy(logp):
    """``exact_entropy`` from a policy's next-token log-probs on a tree (``ResponseTree.logprobs``)."""
    probs = response_probs(logp)
    logs = [torch.where(p > 0, lp, torch.zeros_like(lp)) for p, lp in zip(probs, path_logprobs(logp))]
    return float(-expectation(probs, logs).mean())


__all__ = ["ACTIONS", "TERMINAL", "ALL_PROMPTS", "FEATURES", "FAST_CHUNK", "ResponseTree", "reach_logprobs", "path_logprobs",
           "complete_path_logprobs",
           "response_probs", "expectation", "kl_divergence", "exact_entropy", "entropy", "complete_only", "from_complete"]
