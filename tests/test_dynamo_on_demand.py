"""course_utils.dynamo_on_demand: torch.optim without torch._dynamo until something compiles, the same numbers,
and torch's own wrappers back once torch._dynamo is imported. Each case runs in a fresh Python process."""

import subprocess
import sys
import textwrap

from course_staff.course import REPO

_ADAM = """
import sys, torch
def adam_steps(n=3):
    torch.manual_seed(0)
    w = torch.nn.Parameter(torch.randn(7))
    opt = torch.optim.Adam([w], lr=0.1)
    for _ in range(n):
        opt.zero_grad()
        (w ** 3).sum().backward()
        torch.nn.utils.clip_grad_norm_([w], 1.0)
        opt.step()
    return w.detach().clone(), opt.state_dict()["state"][0]["exp_avg_sq"].clone(), torch.is_grad_enabled()
"""


def _run(code):
    """What ``code`` (after the Adam helper above) prints, run in a fresh process from the repo root."""
    done = subprocess.run([sys.executable, "-c", _ADAM + textwrap.dedent(code)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_optimizer_leaves_torch_dynamo_unimported():
    assert _run("""
        import course_utils.tinylm
        adam_steps()
        print("torch._dynamo" in sys.modules)""") == ["False"]


def test_control_without_it_the_optimizer_imports_torch_dynamo():
    assert _run("""
        adam_steps()
        print("torch._dynamo" in sys.modules)""") == ["True"]


def test_the_same_numbers_as_torch_own_wrappers():
    # the steps with the shim, then (torch._dynamo imported: torch's wrappers back) the same steps again
    assert _run("""
        from course_utils import dynamo_on_demand
        dynamo_on_demand.install()
        ours = adam_steps()
        import torch._dynamo
        theirs = adam_steps()
        print(all(torch.equal(a, b) for a, b in zip(ours[:2], theirs[:2])), ours[2], theirs[2])""") == [
        "True", "True", "True"]


def test_importing_torch_dynamo_puts_torch_wrappers_back():
    assert _run("""
        from course_utils import dynamo_on_demand
        from torch.optim.optimizer import _use_grad_for_differentiable
        torch_step = torch.optim.Adam.step
        dynamo_on_demand.install()
        print(torch.optim.Adam.step is torch_step)                 # False: ours
        adam_steps()                                              # hooks our step with torch's profiling hook
        import torch._dynamo
        zero_grad = torch.optim.Optimizer.zero_grad.__wrapped__
        print(torch.optim.Adam.step.__wrapped__ is torch_step, torch.optim.Adam.step.hooked,
              "__dynamo_disable" in vars(zero_grad), sys.meta_path.count(dynamo_on_demand._watch))
        adam_steps()
        print(vars(zero_grad)["__dynamo_disable"] is zero_grad)    # torch's own disabled wrapper, made lazily
        """) == ["False", "True", "True", "False", "0", "False"]


def test_compiling_a_function_that_builds_an_optimizer_still_works():
    # the same compiled numbers as without the shim, and torch's disabled wrapper in place afterwards
    compiled = """
        out = torch.compile(adam_steps, backend="eager")(2)
        zero_grad = torch.optim.Optimizer.zero_grad.__wrapped__
        print(out[0].numpy().tobytes().hex(), out[1].numpy().tobytes().hex(),
              vars(zero_grad)["__dynamo_disable"] is not zero_grad)"""
    ours = _run("\n        import course_utils.tinylm" + compiled)
    assert ours == _run(compiled)
    assert ours[-1] == "True"
