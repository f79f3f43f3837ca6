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

# A model this small is overhead-bound: one thread is faster than two, and a fixed thread count
# keeps every run bit-identical.
torch.set_num_threads(1)

# ----------------------------------------------------------------------------- vocabulary
TOKENS = list("0123456789") + ["+", "=", "<bos>", "<eos>", "<pad>"]
N_DIGITS = 10                     # token ids 0..9 are the digits 0..9: a token t is a digit iff t < N_DIGITS
DIGITS = list(range(N_DIGITS))
PLUS, EQUALS, BOS, EOS, PAD = 10, 11, 12, 13, 14
VOCAB_SIZE = len(TOKENS)          # V = 15
PROMPT_LEN = 5                    # [BOS, a, +, b, =]
MAX_NEW = 4                       # at most 4 response tokens, EOS included
MAX_LEN = PROMPT_LEN + MAX_NEW    # 9
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
def causal_attention(q, k, v):
    """Causal self-attention: q, k, v (..., L, h, d/h) -> (..., L, h, d/h); position t sees 0..t."""
    t = lambda z: z.transpose(-3, -2)                                   # heads before positions
    return t(F.scaled_dot_product_attention(t(q), t(k), t(v), is_causal=True))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: self-attention, then an MLP.

    ``block(x)`` with x (..., L, d) is causal self-attention over the L positions. ``block(x,
    attention=fn)`` lets ``fn(q, k, v)`` (each (..., L, h, d/h)) decide what each position attends
    to: the response tree uses it to attend over a shared prompt and each state's ancestors.
    """

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x, attention=causal_attention):                  # x: (..., L, d)
        q, k, v = self.qkv(self.ln1(x)).unflatten(-1, (3, self.n_heads, -1)).unbind(-3)
        x = x + self.proj(attention(q, k, v).flatten(-2))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """A one-layer causal transformer over the 15-token vocabulary (about 14k parameters).

    ``model(ids)`` with ids (B, L), L <= 9, returns logits (B, L, V): logits[:, t] is the
    distribution of the token at position t + 1.
    """

    def __init__(self, d_model=32, n_heads=4, n_layers=1):
        super().__init__()
        self.tok = nn.Embedding(VOCAB_SIZE, d_model)
        self.pos = nn.Embedding(MAX_LEN, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB_SIZE)

    def hidden(self, ids, positions=None, attention=None):
        """Final hidden states (..., L, d) of ids (..., L).

        positions: (L,) the position of each column, 0..L-1 by default. attention: one function
        per block (see ``Block``), causal self-attention by default.
        """
        if positions is None:
            if ids.shape[-1] > MAX_LEN:
                raise ValueError(f"TinyLM reads at most {MAX_LEN} tokens, got {ids.shape[-1]}")
            positions = torch.arange(ids.shape[-1])
        x = self.tok(ids) + self.pos(positions)
        for block, attend in zip(self.blocks, attention or [causal_attention] * len(self.blocks)):
            x = block(x, attend)
        return self.ln_f(x)

    def forward(self, ids, positions=None, attention=None):
        return self.head(self.hidden(ids, positions, attention))


def supervised_loss(model, prompt_ids, target):
    """Teacher-forced cross-entropy of ``target`` responses after ``prompt_ids``.

    Args:
        prompt_ids: (B, 5) long prompts; target: (B, MAX_NEW) long responses, PAD after EOS.

    Returns:
        scalar: mean over real response tokens (PAD is ignored) of -log pi(token).
    """
    seq = torch.cat([prompt_ids, target], dim=1)                      # (B, 9)
    logits = model(seq[:, :-1])[:, PROMPT_LEN - 1:]                   # (B, MAX_NEW, V)
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
def _allowed_logits(logits):
    """Logits with BOS and PAD forbidden (-inf): the distribution the model samples from."""
    return logits.index_fill(-1, torch.tensor(NEVER_SAMPLED), float("-inf"))


def _check_model(model, who):
    if not isinstance(model, TinyLM):
        raise TypeError(f"{who} runs a TinyLM, got {type(model).__name__}")


def _genuine(model, who):
    """A fresh TinyLM holding ``model``'s weights: the course's own forward pass, whatever class or
    patched methods ``model`` brings (used where the package applies a temperature itself)."""
    _check_model(model, who)
    clean = TinyLM(model.tok.embedding_dim, model.blocks[0].n_heads, len(model.blocks))
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
    was_training = model.training
    model.eval()
    ids, L = encode_prompts(prompts)
    B = ids.shape[0]
    done = torch.zeros(B, dtype=torch.bool)
    mask = torch.zeros(B, max_new)
    for t in range(max_new):
        probs = F.softmax(_allowed_logits(model(ids)[:, -1, :]), dim=-1)
        nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)
        nxt = torch.where(done, torch.full_like(nxt, PAD), nxt)
        mask[:, t] = (~done).float()
        ids = torch.cat([ids, nxt[:, None]], dim=1)
        done |= nxt == EOS
    model.train(was_training)
    return {"ids": ids, "prompt_len": L, "mask": mask}


def sequence_logprobs(model, out):
    """Per-token log-probs of a rollout's response tokens under ``model``, a TinyLM (with gradient).

    Returns:
        (B, T) with T = number of response columns; entry [b, t] is
        log pi(y_t | x, y_<t) of the sampling distribution (BOS and PAD forbidden), and exactly 0
        where mask == 0 (padding log-probs would be garbage).
    """
    _check_model(model, "sequence_logprobs")
    ids, L, mask = out["ids"], out["prompt_len"], out["mask"]
    logp = torch.log_softmax(_allowed_logits(model(ids[:, :-1])[:, L - 1:]), dim=-1)   # (B, T, V)
    # PAD has log-prob -inf; at padding read an allowed token's (finite) log-prob, then multiply by 0
    resp = torch.where(mask > 0, ids[:, L:], torch.full_like(ids[:, L:], EOS))
    return logp.gather(-1, resp[..., None]).squeeze(-1) * mask                        # (B, T)


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
