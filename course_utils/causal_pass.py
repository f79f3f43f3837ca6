"""TinyLM's plain causal pass as one autograd node, with its backward written out.

``model(ids, last=n)`` over a rollout (what PPO's scoring and epochs run, 11 times an iteration) is
made of ~40 small operations; as separate autograd nodes each costs more in overhead than in
arithmetic, and PyTorch's softmax kernels are slow on rows as short as ours (4-15 entries; ~3x slower
than the same softmax written out, with AVX-512 kernels). Here the whole pass, from the flat weight
vector to the outputs, is one node (``CausalPass``): its forward runs the blocks of ``tinylm.block``
with the attention below, and its backward is the chain rule written out layer by layer, giving the
gradient of the flat vector in one tensor. Checked in double precision against autograd through
``tinylm.block`` (tests/test_causal_pass.py).

The attention here (``attend``, ``softmax``, ``log_softmax``) is the one definition used by
every pass: this fused one, ``tinylm.causal_attention`` (sampling, custom attention) and the response tree.

Shapes: B rows of L token ids; the last block computes only the last n positions; d = d_model,
H heads of size dh = d / H.
"""

import math

import torch
import torch.nn.functional as F

LN_EPS = 1e-5                    # nn.LayerNorm's default, as in the model's layers


# ----------------------------------------------------------------------------- softmax and attention
def softmax(x):
    """softmax over the last dimension, written out. The max is a constant to autograd (softmax
    does not depend on it), so the backward is that of exp and a division only."""
    e = (x - x.amax(dim=-1, keepdim=True).detach()).exp_()
    return e / e.sum(dim=-1, keepdim=True)


def log_softmax(x):
    """log_softmax over the last dimension, written out (the max again a constant to autograd)."""
    m = x.amax(dim=-1, keepdim=True).detach()
    return x - (m + (x - m).exp().sum(dim=-1, keepdim=True).log())


def _keys_apart(k):
    """k (N, L, H, dh) -> (N, d, H L), zero but for head h's keys in head h's rows: column (h, j) holds
    k[:, j, h] in rows h dh .. (h + 1) dh. q (N, n, d) times it is every head's q.k at once."""
    N, L, H, dh = k.shape
    out = k.new_zeros(N, H, dh, H, L)
    out.diagonal(dim1=1, dim2=3).copy_(k.permute(0, 3, 1, 2))                    # [b, h, e, h, j] = k[b, j, h, e]
    return out.view(N, H * dh, H * L)


def _values_apart(v):
    """v (N, L, H, dh) -> (N, H L, d), zero but for head h's values in head h's columns: row (h, j) holds
    v[:, j, h] in columns h dh .. (h + 1) dh. Attention weights (N, n, H L) times it are every head's
    output side by side (N, n, d)."""
    N, L, H, dh = v.shape
    out = v.new_zeros(N, H, L, H, dh)
    out.diagonal(dim1=1, dim2=3).copy_(v.permute(0, 1, 3, 2))                    # [b, h, j, h, e] = v[b, j, h, e]
    return out.view(N, H * L, H * dh)


def _attention(q, k, v, mask=None):
    """Attention of queries q (N, n, H, dh) over keys and values k, v (N, L, H, dh), mask (n, L) additive
    (0 or -inf) or None. Returns the heads' outputs side by side (N, n, d), the weights p (N, n, H L) and
    the spread keys and values (what the backward needs).

    One head's matrices are tiny (4-9 x 8): a batched matmul over the N H of them costs more per matrix than
    in arithmetic, and needs q, k, v copied head-first. Here each row's heads are multiplied at once, by the
    keys and values spread block-diagonally (zero across heads, so the sums are the same): N matmuls of
    (n x d) (d x H L) and (n x H L) (H L x d), on q, k, v as the qkv layer lays them out."""
    N, n, H, dh = q.shape
    K, V = _keys_apart(k), _values_apart(v)
    q, scale = q.reshape(N, n, H * dh), 1 / math.sqrt(dh)
    if mask is None:
        scores = torch.bmm(q, K).mul_(scale)
    else:                                                          # the mask added in the matmul: one op fewer
        scores = torch.baddbmm(mask.to(q.dtype)[:, None].expand(n, H, -1).reshape(n, -1), q, K, alpha=scale)
    p = softmax(scores.view(N, n, H, -1)).view(N, n, -1)
    return torch.bmm(p, V), p, K, V


def attend(q, k, v, mask=None):
    """Attention: softmax(q k^T / sqrt(dh) + mask) v per head, q (..., Lq, H, dh), k and v (..., Lk, H, dh),
    mask (Lq, Lk) additive (0 or -inf) or None -> (..., Lq, H, dh)."""
    lead = q.shape[:-3]
    flat = lambda t: t.reshape(-1, *t.shape[-3:])
    o = _attention(flat(q), flat(k), flat(v), mask)[0]
    return o.view(*lead, *q.shape[-3:])


# ----------------------------------------------------------------------------- the pass
def _block_forward(x, w, b, H, n, mask):
    """One block (as ``tinylm.block``) on x (B, L, d), outputs of the last n positions (B, n, d),
    and what its backward needs."""
    B, L, d = x.shape
    h1, mu1, rs1 = torch.native_layer_norm(x, (d,), w[b + "ln1.weight"], w[b + "ln1.bias"], LN_EPS)
    qkv = F.linear(h1, w[b + "qkv.weight"], w[b + "qkv.bias"]).view(B, L, 3, H, d // H)
    q, k, v = qkv[:, L - n:, 0], qkv[:, :, 1], qkv[:, :, 2]                     # (B, n or L, H, dh)
    o, p, K, V = _attention(q, k, v, mask)                                      # o (B, n, d): heads side by side
    x1 = x[:, L - n:] + F.linear(o, w[b + "proj.weight"], w[b + "proj.bias"])
    h2, mu2, rs2 = torch.native_layer_norm(x1, (d,), w[b + "ln2.weight"], w[b + "ln2.bias"], LN_EPS)
    u = F.linear(h2, w[b + "mlp.0.weight"], w[b + "mlp.0.bias"])                # (B, n, 4d)
    a = F.gelu(u)
    x2 = x1 + F.linear(a, w[b + "mlp.2.weight"], w[b + "mlp.2.bias"])
    return x2, (x, h1, mu1, rs1, q, K, V, p, o, x1, h2, mu2, rs2, u, a)


def _linear_backward(dy, x, w, g, name):
    """y = x W^T + b: writes dL/dW and dL/db into g (views of the flat gradient), returns dL/dx.
    dy (N, out), x (N, in)."""
    torch.mm(dy.t(), x, out=g[name + ".weight"])
    torch.sum(dy, 0, out=g[name + ".bias"])
    return dy.mm(w[name + ".weight"])


def _layer_norm_backward(dy, x, mu, rs, w, g, name):
    """dL/dx of a LayerNorm, writing its weight's and bias's gradients into g."""
    dx, dw, db = torch.ops.aten.native_layer_norm_backward(dy, x, (x.shape[-1],), mu, rs, w[name + ".weight"],
                                                           w[name + ".bias"], [True, True, True])
    g[name + ".weight"].copy_(dw)
    g[name + ".bias"].copy_(db)
    return dx


def _block_backward(dx2, saved, w, g, b):
    """dL/dx (B, L, d) of one block from dL/d(its output) (B, n, d); its weights' gradients go into g."""
    x, h1, mu1, rs1, q, K, V, p, o, x1, h2, mu2, rs2, u, a = saved
    B, L, d = x.shape
    n, H, dh = dx2.shape[1], q.shape[2], q.shape[3]
    flat = lambda t: t.reshape(-1, t.shape[-1])
    # MLP: x2 = x1 + gelu(h2 W1^T + b1) W2^T + b2
    da = _linear_backward(flat(dx2), flat(a), w, g, b + "mlp.2")
    du = torch.ops.aten.gelu_backward(da, flat(u))
    dh2 = _linear_backward(du, flat(h2), w, g, b + "mlp.0")
    dx1 = dx2 + _layer_norm_backward(dh2.view(B, n, d), x1, mu2, rs2, w, g, b + "ln2")
    # attention (see _attention): x1 = x[:, L-n:] + o Wp^T + bp, o = p V, p = softmax(q K / sqrt(dh) + mask)
    do = _linear_backward(flat(dx1), flat(o), w, g, b + "proj").view(B, n, d)
    dp = torch.bmm(do, V.transpose(1, 2)).view(B, n, H, L)
    pv = p.view(B, n, H, L)
    ds = (pv * (dp - (dp * pv).sum(dim=-1, keepdim=True)) / math.sqrt(dh)).view(B, n, H * L)   # softmax's backward
    dqkv = x.new_empty(B, L, 3, H, dh)
    dqkv[:, :L - n, 0] = 0                                                       # the first L-n have no query
    dqkv[:, L - n:, 0] = torch.bmm(ds, K.transpose(1, 2)).view(B, n, H, dh)
    # of the gradients of the spread keys and values, only their blocks on the diagonal are k's and v's
    dK = torch.bmm(q.reshape(B, n, d).transpose(1, 2), ds).view(B, H, dh, H, L)
    dqkv[:, :, 1].copy_(dK.diagonal(dim1=1, dim2=3).permute(0, 2, 3, 1))        # [b, h, e, h, j] -> [b, j, h, e]
    dV = torch.bmm(p.transpose(1, 2), do).view(B, H, L, H, dh)
    dqkv[:, :, 2].copy_(dV.diagonal(dim1=1, dim2=3).permute(0, 1, 3, 2))        # [b, h, j, h, e] -> [b, j, h, e]
    dqkv = dqkv.view(B * L, 3 * d)
    dh1 = _linear_backward(dqkv, flat(h1), w, g, b + "qkv")
    dx = _layer_norm_backward(dh1.view(B, L, d), x, mu1, rs1, w, g, b + "ln1")
    dx[:, L - n:] += dx1                                                        # the residual
    return dx


def _scalar_head(v):
    """A scalar head (a critic's) as one vector v (d + 1): its weight (1, d) and bias (1,) as views."""
    return {"scalar.weight": v[:-1].view(1, -1), "scalar.bias": v[-1:]}


def _head_forward(hf, w, head):
    """The pass's outputs from the final hidden states hf (B, n, d): see ``forward``."""
    if head is True:
        return F.linear(hf, w["head.weight"], w["head.bias"])                   # (B, n, V)
    if head is False:
        return hf
    s = _scalar_head(head)
    return F.linear(hf, s["scalar.weight"], s["scalar.bias"]).view(hf.shape[:-1])   # (B, n)


def forward(w, ids, n_heads, n_layers, last, head, mask):
    """The plain causal pass of ids (B, L), n = ``last``. ``head``: True: logits (B, n, V); False: final
    hidden states (B, n, d); a vector (d + 1): a scalar head's outputs h . head[:d] + head[d] (B, n) (the
    critic's values: its head in this pass costs fewer operations than as autograd operations after it).
    Returns (outputs, what ``backward`` needs). mask (L, L) is the causal mask."""
    L = ids.shape[1]
    x = F.embedding(ids, w["tok.weight"]) + w["pos.weight"][:L]
    blocks = []
    for i in range(n_layers):
        x, saved = _block_forward(x, w, f"blocks.{i}.", n_heads, last if i == n_layers - 1 else L,
                                  mask[L - last:] if i == n_layers - 1 else mask)
        blocks.append(saved)
    d = x.shape[-1]
    hf, muf, rsf = torch.native_layer_norm(x, (d,), w["ln_f.weight"], w["ln_f.bias"], LN_EPS)
    return _head_forward(hf, w, head), (ids, blocks, x, hf, muf, rsf, head)


def backward(w, g, saved, grad_out, g_head=None):
    """The gradient of the flat weight vector, written into g (named views of it: ``w``'s names) from
    dL/d(outputs) ``grad_out``; a scalar head's gradient (d + 1) into ``g_head``. Weights the pass does
    not use (a head it did not apply) get 0."""
    ids, blocks, x, hf, muf, rsf, head = saved
    B, n, d = hf.shape
    if head is not True:
        g["head.weight"].zero_(), g["head.bias"].zero_()
    if head is False:
        dhf = grad_out
    else:
        hw, hg, name = (w, g, "head") if head is True else (_scalar_head(head), _scalar_head(g_head), "scalar")
        dhf = _linear_backward(grad_out.reshape(B * n, -1), hf.view(B * n, d), hw, hg, name).view(B, n, d)
    dx = _layer_norm_backward(dhf, x, muf, rsf, w, g, "ln_f")
    for i in reversed(range(len(blocks))):
        dx = _block_backward(dx, blocks[i], w, g, f"blocks.{i}.")
    L = ids.shape[1]
    g["tok.weight"].zero_().index_add_(0, ids.flatten(), dx.reshape(B * L, d))
    pos = g["pos.weight"].zero_()
    torch.sum(dx, 0, out=pos[:L])


class CausalPass(torch.autograd.Function):
    """The pass as one autograd node: ``CausalPass.apply(weights, model, ids, last, head, done)``.

    weights: the model's flat parameter; model: its TinyLM (names and shapes of the views); ids (B, L)
    long; last: n; head: True, False or a scalar head's vector (see ``forward``; the vector gets its
    gradient too). ``done``: None, or the (outputs, saved) of ``forward`` already run on these very
    weights, ids and head (a pass without gradient that the model kept, see ``TinyLM``): then the
    forward is not run again.
    """

    @staticmethod
    def forward(ctx, weights, model, ids, last, head, done):
        out, saved = model.pass_forward(weights, ids, last, head) if done is None else (done[0].clone(), done[1])
        ctx.model, ctx.saved = model, saved
        scalar = isinstance(head, torch.Tensor)
        ctx.save_for_backward(weights, head if scalar else None)   # autograd's check that no step changed them since
        return out

    @staticmethod
    def backward(ctx, grad_out):
        weights, head = ctx.saved_tensors
        grad, g_head = torch.empty_like(weights), None if head is None else torch.empty_like(head)
        ctx.model.pass_backward(weights, grad, ctx.saved, grad_out, g_head)
        return grad, None, None, None, g_head, None
