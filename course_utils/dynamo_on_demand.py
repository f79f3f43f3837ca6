"""torch.optim without importing torch._dynamo until something compiles: ~1.2 CPU s saved per process.

torch wraps several optimizer methods so that torch.compile never traces them: ``Optimizer.add_param_group``,
``zero_grad``, ``state_dict``, ``load_state_dict`` (``torch._compile._disable_dynamo``) and each optimizer's
``step`` (``torch.optim.optimizer._use_grad_for_differentiable``). Both import torch._dynamo on their first
call, ~1.2 s of CPU, so the first ``torch.optim.Adam(...)`` of a process (Lab 12's reward-model cell, Lab 13's
runs) pays for a compiler the course never uses.

    from course_utils import dynamo_on_demand
    dynamo_on_demand.install()      # tinylm does it on import; a no-op if torch._dynamo is already loaded

While torch._dynamo has not been imported nothing can be compiling (torch.compile, torch.export import it),
so these wrappers call the method itself, exactly as torch's wrappers do outside a compiled region
(``torch._dynamo.graph_break()`` is a no-op there). The moment anything starts importing torch._dynamo,
``uninstall`` puts torch's own wrappers back, so from then on torch behaves exactly as without this module.
"""

import functools
import sys

import torch
import torch._compile
from torch.optim.optimizer import _use_grad_for_differentiable

_DYNAMO = "torch._dynamo"
_disabled_code = torch._compile._disable_dynamo(lambda: None).__code__     # the code of torch's wrapper
_use_grad_code = _use_grad_for_differentiable(lambda self: None).__code__
_direct = []            # [function whose torch wrapper now calls it directly], while installed
_steps = {}             # {optimizer class: torch's step}, while installed


def _closure(wrapper):
    return {name: cell.cell_contents for name, cell in zip(wrapper.__code__.co_freevars, wrapper.__closure__)}


def _step_without_dynamo(cls, torch_step):
    """``torch_step`` (torch's ``_use_grad`` wrapper of ``cls.step``) without its ``import torch._dynamo`` and
    its two ``graph_break()`` calls: the same grad mode around the same step."""
    step = _closure(torch_step)["func"]

    @functools.wraps(step)
    def _use_grad(self, *args, **kwargs):
        prev_grad = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(self.defaults["differentiable"])
            return step(self, *args, **kwargs)
        finally:
            torch.set_grad_enabled(prev_grad)

    return _use_grad


class _Watch:
    """A sys.meta_path finder that finds nothing: it uninstalls the shim when torch._dynamo starts importing."""

    def find_spec(self, name, path=None, target=None):
        if name == _DYNAMO:
            uninstall()
        return None


_watch = _Watch()


def install():
    """Call the optimizers' dynamo-disabled methods directly until torch._dynamo is imported."""
    if _DYNAMO in sys.modules or _watch in sys.meta_path:
        return
    for wrapper in vars(torch.optim.Optimizer).values():
        if getattr(wrapper, "__code__", None) is _disabled_code:
            fn = _closure(wrapper)["fn"]
            if getattr(fn, "__dynamo_disable", None) is None:    # torch's wrapper calls fn.__dynamo_disable
                fn.__dynamo_disable = fn
                _direct.append(fn)
    for cls in vars(torch.optim).values():
        step = vars(cls).get("step") if isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer) else None
        if getattr(step, "__code__", None) is _use_grad_code and not getattr(step, "hooked", False):
            _steps[cls] = step
            cls.step = _step_without_dynamo(cls, step)
    sys.meta_path.insert(0, _watch)


def uninstall():
    """torch's own wrappers again (a step already wrapped by an optimizer's profiling hook: torch's step,
    hooked as torch hooks it)."""
    if _watch in sys.meta_path:
        sys.meta_path.remove(_watch)
    while _direct:
        fn = _direct.pop()
        if vars(fn).get("__dynamo_disable") is fn:
            del fn.__dynamo_disable
    for cls, torch_step in list(_steps.items()):
        ours = vars(cls).get("step")
        if getattr(ours, "hooked", False):                    # an optimizer of cls was built meanwhile
            cls.step = torch.optim.Optimizer.profile_hook_step(torch_step)
            cls.step.hooked = True
        else:
            cls.step = torch_step
        del _steps[cls]


__all__ = ["install", "uninstall"]
