"""The toy language model of the course: single-digit addition.

A prompt is always five tokens, ``[BOS, a, '+', b, '=']`` for single digits a and b, so prompts
are never padded. The response is at most ``MAX_NEW = 4`` new tokens; a well-formed one is the
digits of a number followed by ``EOS`` (for 7+5: ``'1' '2' EOS``). After ``EOS`` the response is
right-padded with ``PAD`` and its mask is 0 there.

A "rollout" is the dict returned by :func:`sample`:

    ids         (B, L + MAX_NEW) long   prompt, then response (PAD after EOS)
    prompt_len  int L = 5               column where the response starts
    mask        (B, MAX_NEW) float      1 for real response tokens (up to and including EOS)
"""

from pathlib import Path
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils import causal_pass, dynamo_on_demand, memory
from course_utils.causal_pass import CausalPass, attend, softmax

# A model this small is overhead-bound: one thread is faster than two, and a fixed thread count
# keeps every run bit-identical.
torch.set_num_threads(1)
dynamo_on_demand.install()        # the first torch.optim.Adam(...) would import torch's compiler: ~1.2 CPU s
memory.keep_freed()               # a large batch's pass reuses the memory the last one freed (no page faults)

# ----------------------------------------------------------------------------- vocabulary
TOKENS = list("0123456789") + ["+", "=", "<bos>", "<eos>", "<pad>"]
N_DIGITS = 10                     # token ids 0..9 are the digits 0..9: a token t is a digit iff t < N_DIGITS
DIGITS = list(range(N_DIGITS))
PLUS, EQUALS, BOS, EOS, PAD = 10, 11, 12, 13, 14
VOCAB_SIZE = len(TOKENS)          # V = 15
PROMPT_LEN = 5                    # [BOS, a, +, b, =]
MAX_NEW = 4                       # at most 4 response tokens, EOS included
MAX_LEN = PROMPT_LEN + MAX_NEW    # 9
KEEP_ROWS = 1024                  # the largest no-gradient pass a model keeps for its next pass (see _causal_pass)
NEVER_SAMPLED = [BOS, PAD]        # the model may emit the other 13 tokens:
RESPONSE_TOKENS = [t for t in range(VOCAB_SIZE) if t not in NEVER_SAMPLED]   # digits, +, =, EOS

SFT_PATH = Path(__file__).with_name("data") / "sft.pt"


# ----------------------------------------------------------------------------- prompts
def encode_prompts(prompts):
    """Token ids of prompts like ``"3+4="``.

    Args:
        prompts: list of B strings, each ``"a+b="`` with single digits a, b.

    Returns:
        (ids, L): ids (B, 5) long tensor ``[BOS, a, +, b, =]`` per row, and L = 5.

    Raises:
        ValueError naming the first malformed prompt.
    """
    if isinstance(prompts, str):
        raise TypeError(f"encode_prompts takes a list of prompts, got the string {prompts!r}; "
                        f"wrap it in a list: [{prompts!r}]")
    rows = []
    for p in prompts:
        if not (isinstance(p, str) and len(p) == 4 and p[0].isdigit() and p[1] == "+"
                and p[2].isdigit() and p[3] == "=" and p.isascii()):
            raise ValueError(f"malformed prompt {p!r}: expected 'a+b=' with single digits a and b, "
                             f"e.g. '3+4='")
        rows.append([BOS, int(p[0]), PLUS, int(p[2]), EQUALS])
    if not rows:
        raise ValueError("encode_prompts got an empty list of prompts")
    return torch.tensor(rows, dtype=torch.long), PROMPT_LEN


def make_batch(n, rng):
    """n random prompts and their answers, drawn from ``rng`` (a ``random.Random``).

    Returns:
        (prompts, answers): lists of n strings, e.g. ``["7+5=", ...]`` and ``["12", ...]``.
    """
    if not isinstance(rng, random.Random):
        raise TypeError(f"make_batch needs a random.Random for reproducibility, got {type(rng).__name__}")
    pairs = [(rng.randrange(10), rng.randrange(10)) for _ in range(n)]
    return [f"{a}+{b}=" for a, b in pairs], [str(a + b) for a, b in pairs]


def prompt_operands(ids):
    """(B,) tensors a and b read back from prompt ids (B, >= 5)."""
    return ids[:, 1], ids[:, 3]


def answer_tokens(ids):
    """The correct response for each prompt: (B, MAX_NEW) long, digits of a + b, EOS, then PAD."""
    a, b = prompt_operands(ids)
    total = a + b
    two = total >= 10
    B = ids.shape[0]
    target = torch.full((B, MAX_NEW), PAD, dtype=torch.long)
    target[:, 0] = torch.where(two, total // 10, total)
    target[:, 1] = torch.where(two, total % 10, torch.full_like(total, EOS))
    target[:, 2] = torch.where(two, torch.full_like(total, EOS), torch.full_like(total, PAD))
    return target


# ----------------------------------------------------------------------------- the model
# [i, j]: 0 where position i sees position j (j <= i), -inf where it does not
_CAUSAL = torch.zeros(MAX_LEN, MAX_LEN).masked_fill(torch.ones(MAX_LEN, MAX_LEN, dtype=torch.bool).triu(1),
                                                     float("-inf"))
_POSITIONS = torch.arange(MAX_LEN)


def causal_attention(q, k, v):
    """Causal self-attention of the last Lq of Lk positions: q (..., Lq, h, d/h), k and v
    (..., Lk, h, d/h) -> (..., Lq, h, d/h). Query i is position Lk - Lq + i and sees 0..Lk - Lq + i;
    with Lq = Lk that is plain causal attention, with Lq = 1 the newest position over all the others."""
    Lq, Lk = q.shape[-3], k.shape[-3]
    mask = None if Lq == 1 else _CAUSAL[Lk - Lq:Lk, :Lk]                # the newest position sees them all
    return attend(q, k, v, mask)


def extending(cache):
    """An attention function (see ``Block``) for incremental decoding: the new positions' keys and
    values are appended to ``cache`` (a list: empty, then [k, v] of every position so far) and the
    new queries attend over all of them. One cache per block; ``sample`` uses it."""
    def attend(q, k, v):                                                # (..., L_new, h, d/h)
        if cache:
            k, v = torch.cat([cache[0], k], dim=-3), torch.cat([cache[1], v], dim=-3)
        cache[:] = [k, v]
        return causal_attention(q, k, v)
    return attend


def _layers(d_model, n_layers):
    """The layers of a fresh TinyLM as the familiar module tree (``tok``, ``pos``, ``blocks.i.{ln1, qkv,
    proj, ln2, mlp}``, ``ln_f``, ``head``) with PyTorch's default initialization (embeddings N(0, 1),
    linear layers uniform, LayerNorm 1 and 0). Its ``named_parameters()`` are the one source of the
    weights' names, shapes, order and initial values; ``TinyLM`` keeps them in one flat vector."""
    d, V = d_model, VOCAB_SIZE
    block_layers = lambda: nn.ModuleDict({"ln1": nn.LayerNorm(d), "qkv": nn.Linear(d, 3 * d), "proj": nn.Linear(d, d),
                                          "ln2": nn.LayerNorm(d),
                                          "mlp": nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))})
    return nn.ModuleDict({"tok": nn.Embedding(V, d), "pos": nn.Embedding(MAX_LEN, d),
                          "blocks": nn.ModuleList([block_layers() for _ in range(n_layers)]),
                          "ln_f": nn.LayerNorm(d), "head": nn.Linear(d, V)})


def block(x, w, b, n_heads, attention=causal_attention, last=None):
    """One pre-LayerNorm transformer block: self-attention, then an MLP. x (..., L, d) -> (..., L, d).

    ``w`` holds the model's weights by name (``TinyLM.w``); ``b`` names the block (``"blocks.0."``).
    ``attention(q, k, v)`` (each (..., L, h, d/h)) decides what each position attends to: causal
    self-attention by default; the response tree attends over a shared prompt and each state's
    ancestors, and ``sample`` reuses the keys and values of earlier positions. With ``last=n`` only
    the last n positions' outputs are computed, (..., n, d); their queries still see all L positions.
    """
    d = x.shape[-1]
    h = F.layer_norm(x, (d,), w[b + "ln1.weight"], w[b + "ln1.bias"])
    q, k, v = F.linear(h, w[b + "qkv.weight"], w[b + "qkv.bias"]).unflatten(-1, (3, n_heads, -1)).unbind(-3)
    if last is not None:                                                # queries of the last positions only
        q, x = q.narrow(-3, q.shape[-3] - last, last), x.narrow(-2, x.shape[-2] - last, last)
    x = x + F.linear(attention(q, k, v).flatten(-2), w[b + "proj.weight"], w[b + "proj.bias"])
    h = F.layer_norm(x, (d,), w[b + "ln2.weight"], w[b + "ln2.bias"])
    h = F.gelu(F.linear(h, w[b + "mlp.0.weight"], w[b + "mlp.0.bias"]))
    return x + F.linear(h, w[b + "mlp.2.weight"], w[b + "mlp.2.bias"])


class TinyLM(nn.Module):
    """A one-layer causal transformer over the 15-token vocabulary (about 14k parameters).

    ``model(ids)`` with ids (B, L), L <= 9, returns logits (B, L, V): logits[:, t] is the
    distribution of the token at position t + 1. ``model(ids, last=n)`` returns those of the last
    n positions only, (B, n, V), at less cost (what log-probs of a response need).

    All weights live in one parameter, ``model.weights`` (a flat vector); ``model.w()`` gives them
    by name as views of it, and ``state_dict()`` holds them by those names (``tok.weight``,
    ``blocks.0.qkv.weight``, ..., ``head.bias``). Why one vector: the model is so small that an
    optimizer step, a gradient clip and a zero_grad cost one tensor operation per parameter tensor
    whatever its size; with one tensor instead of 18, Adam's step is about ten times cheaper, with
    the same numbers (Adam works element by element).
    """

    def __init__(self, d_model=32, n_heads=4, n_layers=1):
        super().__init__()
        self.d_model, self.n_heads, self.n_layers = d_model, n_heads, n_layers
        layers = dict(_layers(d_model, n_layers).named_parameters())
        self.shapes = {name: tuple(p.shape) for name, p in layers.items()}
        self.sizes = [p.numel() for p in layers.values()]
        self.weights = nn.Parameter(torch.cat([p.detach().flatten() for p in layers.values()]))
        self.register_state_dict_post_hook(_named_state)
        self.register_load_state_dict_pre_hook(_pack_named_state)

    def w(self):
        """{name: view of ``weights``} for every weight (shapes as in ``self.shapes``)."""
        return self._named(self.weights)

    def _named(self, flat):
        """{name: view of ``flat``} (a vector laid out as ``weights``)."""
        return {name: part.view(shape) if len(shape) > 1 else part       # 1-d weights need no view
                for (name, shape), part in zip(self.shapes.items(), flat.split(self.sizes))}

    def hidden(self, ids, positions=None, attention=None, last=None):
        """Final hidden states (..., L, d) of ids (..., L), or of the last ``last`` positions only.

        positions: (L,) the position of each column, 0..L-1 by default. attention: one function
        per block (see ``block``), causal self-attention by default.
        """
        if positions is None and attention is None:
            return self._causal_pass(ids, last, head=False)
        return self._hidden(self._pass_weights(), ids, positions, attention, last)

    def scalar_head(self, ids, head, last=None):
        """A scalar head on the final hidden states h of ids (..., L), in the same pass as the body:
        h . head[:d] + head[d] (..., n) for ``head`` one vector (d + 1), of the last ``last`` positions
        (all L by default). What a critic's values are; ``head`` gets its gradient as the weights do."""
        return self._causal_pass(ids, last, head=head)

    def forward(self, ids, positions=None, attention=None, last=None):
        if positions is None and attention is None:
            return self._causal_pass(ids, last, head=True)
        w = self._pass_weights()
        return F.linear(self._hidden(w, ids, positions, attention, last), w["head.weight"], w["head.bias"])

    def _pass_weights(self):
        """The named weights for a pass with positions or attention given: ``w()`` (views autograd
        follows) if a gradient may flow, else the views kept since the last step (as sampling's passes
        use them: splitting the vector anew costs more than a one-position pass's arithmetic)."""
        if torch.is_grad_enabled() and self.weights.requires_grad:
            return self.w()
        return self._weight_views(self.weights)

    # ------------------------------------------------------------------------- the plain causal pass
    # Positions 0..L-1 and causal attention: one autograd node (course_utils/causal_pass.py), the same
    # numbers as the blocks above. A pass without gradient is kept (``_kept``) for the next pass: if
    # that one asks for a gradient on the same ids and unchanged weights (PPO's first epoch after its
    # scoring pass), the kept forward serves it and only the backward runs. Only a pass of at most
    # KEEP_ROWS rows is kept (PPO's batch is 64): a pass keeps about 22 MB of activations per thousand
    # rows, and a trained policy would otherwise hold its last evaluation pass for as long as it lives.
    _kept = None                                    # (_PassKey, version of the outputs, (outputs, saved)) or None
    _views = None                                                      # (key, w) of the weights as they are

    def _causal_pass(self, ids, last, head):
        L = ids.shape[-1]
        if L > MAX_LEN:
            raise ValueError(f"TinyLM reads at most {MAX_LEN} tokens, got {L}")
        n = L if last is None else last
        rows = ids.reshape(-1, L)                                      # (B, L): any leading dimensions
        kept, self._kept = self._kept, None                            # a kept pass serves the next pass only
        if torch.is_grad_enabled() and self.weights.requires_grad:
            serves = (kept is not None and kept[0] == _PassKey(self.weights, rows, n, head)
                      and kept[2][0]._version == kept[1])                  # its outputs untouched since
            out = CausalPass.apply(self.weights, self, rows, n, head, kept[2] if serves else None)
        else:
            kept = None                                                # freed before this pass, not after
            out, saved = self.pass_forward(self.weights, rows, n, head)
            if (self.weights.requires_grad and not torch.is_inference_mode_enabled()
                    and rows.shape[0] <= KEEP_ROWS):
                self._kept = (_PassKey(self.weights, rows, n, head), out._version, (out, saved))
        return out.view(*ids.shape[:-1], *out.shape[1:])

    def pass_forward(self, weights, ids, last, head):
        """causal_pass.forward with ``weights`` (laid out as ``self.weights``): (outputs, saved) of ids (B, L)."""
        return causal_pass.forward(self._weight_views(weights), ids, self.n_heads, self.n_layers, last, head,
                                   _CAUSAL[:ids.shape[1], :ids.shape[1]])

    def pass_backward(self, weights, grad, saved, grad_out, g_head=None):
        """causal_pass.backward: the flat gradient written into ``grad`` (a scalar head's into ``g_head``)."""
        causal_pass.backward(self._weight_views(weights), self._named(grad), saved, grad_out, g_head)

    def _weight_views(self, wt):
        """``_named(wt)`` without autograd, made once per tensor ``wt`` and memory it holds: an optimizer
        step or a load writes into that memory, which the views see; ``.data =`` or ``.to`` moves it."""
        key = (wt, wt.data_ptr(), wt.dtype, wt.shape)
        if self._views is None or self._views[0][0] is not wt or self._views[0][1:] != key[1:]:
            with torch.no_grad():
                self._views = (key, self._named(wt.detach()))
        return self._views[1]

    def __getstate__(self):                                           # copies and pickles carry no caches
        state = super().__getstate__()
        return {**state, "_kept": None, "_views": None}

    def _hidden(self, w, ids, positions, attention, last):
        if positions is None:
            if ids.shape[-1] > MAX_LEN:
                raise ValueError(f"TinyLM reads at most {MAX_LEN} tokens, got {ids.shape[-1]}")
            pos = w["pos.weight"][:ids.shape[-1]]                       # positions 0..L-1: the first L rows
        else:
            pos = F.embedding(positions, w["pos.weight"])
        x = F.embedding(ids, w["tok.weight"]) + pos
        n = self.n_layers
        for i, attend in enumerate(attention or [causal_attention] * n):
            x = block(x, w, f"blocks.{i}.", self.n_heads, attend, last if i == n - 1 else None)
        return F.layer_norm(x, (self.d_model,), w["ln_f.weight"], w["ln_f.bias"])


class _PassKey:
    """What must be equal for a kept pass to serve another: the same weights tensor at the same
    version (no step or load since), the same ids (by value), n and head (a scalar head: the same
    tensor at the same version)."""

    def __init__(self, weights, rows, n, head):
        self.weights, self.version, self.rows, self.n, self.head = weights, weights._version, rows.clone(), n, head
        self.head_version = head._version if isinstance(head, torch.Tensor) else None

    def __eq__(self, other):
        return (self.weights is other.weights and self.version == other.version and self.n == other.n
                and self.head is other.head and self.head_version == other.head_version
                and self.rows.shape == other.rows.shape and torch.equal(self.rows, other.rows))


def _named_state(model, state, prefix, local_metadata):
    """state_dict hook: the flat vector as named weights (the checkpoint format of sft.pt)."""
    flat = state.pop(prefix + "weights")
    for (name, shape), part in zip(model.shapes.items(), flat.split(model.sizes)):
        state[prefix + name] = part.view(shape)


def _pack_named_state(module, state, prefix, *args):
    """load_state_dict pre-hook: named weights (a checkpoint) packed back into the flat vector."""
    if all(prefix + name in state for name in module.shapes):
        state[prefix + "weights"] = torch.cat([state.pop(prefix + name).flatten() for name in module.shapes])


def supervised_loss(model, prompt_ids, target):
    """Teacher-forced cross-entropy of ``target`` responses after ``prompt_ids``.

    Args:
        prompt_ids: (B, 5) long prompts; target: (B, MAX_NEW) long responses, PAD after EOS.

    Returns:
        scalar: mean over real response tokens (PAD is ignored) of -log pi(token).
    """
    seq = torch.cat([prompt_ids, target], dim=1)                      # (B, 9)
    logits = model(seq[:, :-1], last=MAX_NEW)                         # (B, MAX_NEW, V): the response positions
    return F.cross_entropy(logits.reshape(-1, VOCAB_SIZE), target.reshape(-1), ignore_index=PAD)


def load_sft():
    """The shipped SFT checkpoint (rebuild it with ``python -m course_staff.edition.build_sft``)."""
    model = TinyLM()
    model.load_state_dict(torch.load(SFT_PATH, weights_only=True))
    return model


# ----------------------------------------------------------------------------- rollouts
# The rollout functions run a TinyLM, never a stand-in that hands them logits: the package samples
# at temperature 1 only and computes log-probs only of its own model's outputs, so no lab task
# (Lab 11's sample_with_temperature, response_logprobs, sequence_logprob) is a call away.
_FORBID = torch.zeros(VOCAB_SIZE).index_fill(0, torch.tensor(NEVER_SAMPLED), float("-inf"))   # (V,)


def _allowed_logits(logits):
    """Logits with BOS and PAD forbidden (-inf): the distribution the model samples from."""
    return logits + _FORBID


def _check_model(model, who):
    if not isinstance(model, TinyLM):
        raise TypeError(f"{who} runs a TinyLM, got {type(model).__name__}")


def _genuine(model, who):
    """A fresh TinyLM holding ``model``'s weights: the course's own forward pass, whatever class or
    patched methods ``model`` brings (used where the package applies a temperature itself)."""
    _check_model(model, who)
    clean = TinyLM(model.d_model, model.n_heads, model.n_layers)
    clean.load_state_dict(model.state_dict())
    return clean.eval()


@torch.no_grad()
def sample(model, prompts, max_new=MAX_NEW, generator=None):
    """Sample one response per prompt from the model (never BOS or PAD; PAD only after EOS).

    Args:
        model:       a TinyLM.
        prompts:     list of B prompt strings ``"a+b="``.
        max_new:     number of new tokens, at most MAX_NEW.
        generator:   optional torch.Generator; without it the global torch RNG is used, so
                     ``torch.manual_seed`` makes a run reproducible.

    Returns:
        the rollout dict: ids (B, 5 + max_new), prompt_len 5, mask (B, max_new).
    """
    _check_model(model, "sample")
    if not 1 <= max_new <= MAX_NEW:
        raise ValueError(f"max_new must be between 1 and {MAX_NEW}, got {max_new}")
    if not torch.isfinite(model.weights).all():                        # what multinomial's checks would catch
        raise ValueError("sample: the model's weights hold nan or inf (did training diverge?)")
    was_training = model.training
    model.eval()
    ids, L = encode_prompts(prompts)
    resp = torch.empty(ids.shape[0], max_new, dtype=torch.long)
    done = torch.zeros(ids.shape[0], dtype=torch.bool)
    attention = [extending([]) for _ in range(model.n_layers)]                 # the keys and values so far
    with torch.inference_mode():                                       # the model's passes: no autograd records
        logits = model(ids, attention=attention, last=1)[:, -1]        # the prompt pass: (B, V)
        for t in range(max_new):
            # torch.multinomial(p, 1)'s own draw (argmax of p / Exp(1) noise: the same tokens from the same
            # RNG state), without its checks of p, which cost two .item() syncs a step
            p = softmax(_allowed_logits(logits))                                        # (B, V)
            nxt = p.div_(torch.empty_like(p).exponential_(generator=generator)).argmax(dim=1)
            resp[:, t] = nxt.masked_fill_(done, PAD)                   # PAD once a row has ended
            done |= nxt == EOS
            if t + 1 < max_new:                                        # one new position per step
                logits = model(resp[:, t:t + 1], positions=_POSITIONS[L + t:L + t + 1], attention=attention)[:, -1]
    model.train(was_training)
    mask = (resp != PAD).float()                  # PAD is never sampled: exactly the tokens up to and including EOS
    return {"ids": torch.cat([ids, resp], dim=1), "prompt_len": L, "mask": mask}


def sequence_logprobs(model, out):
    """Per-token log-probs of a rollout's response tokens under ``model``, a TinyLM (with gradient).

    Returns:
        (B, T) with T = number of response columns; entry [b, t] is
        log pi(y_t | x, y_<t) of the sampling distribution (BOS and PAD forbidden), and exactly 0
        where mask == 0 (padding log-probs would be garbage).
    """
    _check_model(model, "sequence_logprobs")
    ids, L, mask = out["ids"], out["prompt_len"], out["mask"]
    T = ids.shape[1] - L
    logits = _allowed_logits(model(ids[:, :-1], last=T))                              # (B, T, V)
    # log pi(y_t) = logit of y_t - logsumexp of the logits: on rows of 15 entries ~2x cheaper than
    # cross_entropy's log-softmax kernel; exactly 0 at padding (a PAD target's logit is -inf), and no gradient
    target = ids[:, L:]
    logp = logits.gather(-1, target.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return logp.masked_fill(mask == 0, 0.0)                                                   # (B, T)


def decode_responses(out):
    """Response strings of a rollout: the tokens before EOS, e.g. ``"12"``.

    A response that never emits EOS ends in ``"…"`` (``"7777…"``), so it never equals an answer.
    """
    ids, L = out["ids"], out["prompt_len"]
    texts = []
    for row in ids[:, L:].tolist():
        if EOS in row:
            texts.append("".join(TOKENS[t] for t in row[:row.index(EOS)]))
        else:
            texts.append("".join(TOKENS[t] for t in row if t != PAD) + "…")
    return texts


__all__ = ["TOKENS", "N_DIGITS", "DIGITS", "PLUS", "EQUALS", "BOS", "EOS", "PAD", "VOCAB_SIZE", "PROMPT_LEN",
           "MAX_NEW", "RESPONSE_TOKENS", "TinyLM", "encode_prompts", "make_batch", "sample", "sequence_logprobs",
           "decode_responses", "answer_tokens", "load_sft"]
