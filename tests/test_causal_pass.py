"""course_utils.causal_pass: TinyLM's plain causal pass as one autograd node, checked against autograd
through ``tinylm.block`` (double precision), and the kept scoring pass that serves PPO's first epoch."""

import pytest
import torch
import torch.nn.functional as F

from course_utils import causal_pass
from course_utils.ppo_helpers import ValueModel
from course_utils.tinylm import KEEP_ROWS, MAX_LEN, VOCAB_SIZE, TinyLM, block, load_sft


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return TinyLM(d_model=8, n_heads=2, n_layers=2).double()   # small enough for gradcheck; two blocks: the last
                                                               # computes only the last n positions


def composed(model, weights, ids, last, head):
    """The same pass as separate autograd operations: the blocks of tinylm.block."""
    w = model._named(weights)
    x = F.embedding(ids, w["tok.weight"]) + w["pos.weight"][:ids.shape[1]]
    for i in range(model.n_layers):
        x = block(x, w, f"blocks.{i}.", model.n_heads, last=last if i == model.n_layers - 1 else None)
    h = F.layer_norm(x, (model.d_model,), w["ln_f.weight"], w["ln_f.bias"])
    if isinstance(head, torch.Tensor):                                 # a scalar head (d + 1)
        return F.linear(h, head[:-1].view(1, -1), head[-1:]).squeeze(-1)
    return F.linear(h, w["head.weight"], w["head.bias"]) if head else h


def fused(model, weights, ids, last, head):
    return causal_pass.CausalPass.apply(weights, model, ids, last, head, None)


CASES = [(MAX_LEN - 1, True), (4, True), (4, False), (1, True)]


def scalar_head(model, seed):
    """A scalar head's vector (d + 1), random (a critic's starts at zero, which would hide a wrong h)."""
    return torch.randn(model.d_model + 1, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("last, head", CASES + [(4, "scalar"), (MAX_LEN - 1, "scalar")])
def test_forward_and_gradient_match_autograd_through_block(model, last, head):
    ids = torch.randint(0, VOCAB_SIZE, (3, MAX_LEN - 1), generator=torch.Generator().manual_seed(1))
    weights = model.weights.detach().clone().requires_grad_()
    inputs = (weights,) if head != "scalar" else (weights, scalar_head(model, 9).requires_grad_())
    head = head if head != "scalar" else inputs[1]
    a, b = fused(model, weights, ids, last, head), composed(model, weights, ids, last, head)
    assert torch.allclose(a, b, rtol=0, atol=1e-12)
    g = torch.randn(a.shape, dtype=a.dtype, generator=torch.Generator().manual_seed(2))
    ga = torch.autograd.grad((a * g).sum(), inputs)
    gb = torch.autograd.grad((b * g).sum(), inputs)
    assert all(torch.allclose(x, y, rtol=0, atol=1e-12) for x, y in zip(ga, gb))


def test_gradcheck(model):
    ids = torch.randint(0, VOCAB_SIZE, (2, 6), generator=torch.Generator().manual_seed(3))
    weights = model.weights.detach().clone().requires_grad_()
    assert torch.autograd.gradcheck(lambda wt: fused(model, wt, ids, 3, True), (weights,), eps=1e-6, atol=1e-6)
    head = scalar_head(model, 10).requires_grad_()
    assert torch.autograd.gradcheck(lambda wt, v: fused(model, wt, ids, 3, v), (weights, head), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("wrong", ["weights", "scalar head"])
def test_gradcheck_catches_a_wrong_backward(model, monkeypatch, wrong):
    """Control: the weights' gradient, or a scalar head's, scaled by 1.01 fails the same gradcheck."""
    right = causal_pass.backward

    def scaled(w, g, saved, grad_out, g_head=None):
        right(w, g, saved, grad_out, g_head)
        for part in g.values() if wrong == "weights" else [g_head]:
            part.mul_(1.01)
    monkeypatch.setattr(causal_pass, "backward", scaled)
    ids = torch.randint(0, VOCAB_SIZE, (2, 6), generator=torch.Generator().manual_seed(3))
    weights = model.weights.detach().clone().requires_grad_()
    head = scalar_head(model, 10).requires_grad_()
    assert not torch.autograd.gradcheck(lambda wt, v: fused(model, wt, ids, 3, v), (weights, head), eps=1e-6,
                                        atol=1e-6, raise_exception=False)


def grads_of_first_epoch(score_first):
    """The policy's and critic's gradients of one PPO-like first epoch, with or without the no-grad
    scoring pass before it (which the epoch then reuses)."""
    sft = load_sft()
    policy, critic = TinyLM(), ValueModel(sft)
    policy.load_state_dict(sft.state_dict())
    ids = torch.randint(0, VOCAB_SIZE - 2, (16, MAX_LEN - 1), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        critic.head_weights.normal_(generator=torch.Generator().manual_seed(5))   # not zero: the gradient reaches h
    values = lambda: critic.body.scalar_head(ids, critic.head_weights, last=4)
    if score_first:
        with torch.no_grad():
            policy(ids, last=4), values()
    (policy(ids, last=4).square().sum() + values().square().sum()).backward()
    return (policy.weights.grad, critic.body.weights.grad, critic.head_weights.grad, policy._kept,
            critic.body._kept)


def test_the_kept_scoring_pass_gives_the_same_gradients_bit_for_bit():
    with_kept, without = grads_of_first_epoch(True), grads_of_first_epoch(False)
    assert all(torch.equal(a, b) for a, b in zip(with_kept[:3], without[:3]))
    assert with_kept[3] is None and with_kept[4] is None, "a kept pass serves one pass only"


def test_a_kept_pass_does_not_serve_a_changed_scalar_head():
    torch.manual_seed(11)
    m = TinyLM()
    ids = torch.randint(0, VOCAB_SIZE, (4, MAX_LEN - 1))
    head = torch.randn(m.d_model + 1, requires_grad=True)
    with torch.no_grad():
        m.scalar_head(ids, head, last=4)
        head.add_(0.1)                                             # as an optimizer step does
    assert m.scalar_head(ids, head, last=4).detach().equal(composed(m, m.weights, ids, 4, head).detach())


def test_a_kept_pass_does_not_serve_changed_weights_or_ids():
    torch.manual_seed(5)
    m = TinyLM()
    ids = torch.randint(0, VOCAB_SIZE, (4, MAX_LEN - 1))
    with torch.no_grad():
        m(ids, last=4)
        m.weights.add_(0.1)                                       # as an optimizer step does
    assert m(ids, last=4).detach().equal(composed(m, m.weights, ids, 4, True).detach())
    with torch.no_grad():
        m(ids, last=4)
    other = ids.flip(0)
    assert m(other, last=4).detach().equal(composed(m, m.weights, other, 4, True).detach())


def test_a_big_pass_without_gradient_is_not_kept():
    """A trained policy's last evaluation pass (thousands of rows) must not stay alive with it."""
    m = TinyLM()
    small = torch.randint(0, VOCAB_SIZE, (KEEP_ROWS, MAX_LEN - 1), generator=torch.Generator().manual_seed(6))
    big = torch.randint(0, VOCAB_SIZE, (KEEP_ROWS + 1, MAX_LEN - 1), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        m(small, last=4)
        assert m._kept is not None, "a pass of PPO's size is kept for the next pass"
        m(big, last=4)
    assert m._kept is None, "a pass of more than KEEP_ROWS rows is kept"


def test_the_passes_follow_the_weights_through_steps_and_replacements():
    """The named views a pass reads are kept across optimizer steps (in place: the same memory), and
    made anew when the weights' memory changes (``.data =``, ``.double()``)."""
    torch.manual_seed(8)
    m = TinyLM()
    ids = torch.randint(0, VOCAB_SIZE, (4, MAX_LEN - 1))
    check = lambda: torch.equal(m(ids, last=4).detach(), composed(m, m.weights, ids, 4, True).detach())
    with torch.no_grad():
        m(ids, last=4)
    torch.optim.SGD(m.parameters(), lr=0.1).zero_grad()
    m(ids, last=4).sum().backward()
    torch.optim.SGD(m.parameters(), lr=0.1).step()                # in place
    assert check()
    m.weights.data = m.weights.data * 2                            # new memory, same parameter
    assert check()
    m.double()
    assert check() and m(ids, last=4).dtype == torch.float64
