"""Experiment 10 of Lab 12: PPO's learned critic and GAE(lambda) against the exact values of the toy.

On the response tree the value of a policy is not estimated but computed
(course_utils.policy_evaluation: V^pi, Q^pi and A^pi of the KL-penalized return). The view fits a
critic to a trained policy (course_utils.critic_fit, as train_rlhf fits its own) and compares, on
that policy's own rollouts,

    the critic's V(x, y_<t)                 with V^pi at the same prefixes;
    GAE(lambda) from the lab's gae_per_token with Q^pi (returns) and A^pi (advantages) of the same
    tokens, for lambda from 0 to 1 (a slider), with the critic and with V^pi itself;

and, at the optimum pi* of the same beta, V^pi* with the soft values of course_utils.tree_optimum.

The critic is fitted when something first needs it (``fit()``, ~0.2 s of the lab's functions): the
curves (``view.curves``), a frame made outside the slider (``update``), or the slider's first move. The
slider's first draw does without it: its first frame and static picture show the exact values (the
optimum's check and GAE's error with V^pi) and say that the critic comes. In a kernel it comes by
itself, once the cell that showed the view has run (at_request_end): fitted, the widget's frame and the
static picture made again, complete, for a front-end without widgets and a notebook run by nbclient
too. Elsewhere (a script, a test) the slider's first move fits it.

    view = CriticView(runs, RLHFConfig(), kl_penalized_rewards, gae_per_token, ppo_rlhf_loss).prepare()
    view.update(0.5)        # PNG bytes: the four panels at lambda = 0.5 (the critic fitted first)
"""

import random

import numpy as np
import torch

from course_utils.critic_fit import FIT_ITERS, fit_critic
from course_utils.policy_evaluation import at_tokens, policy_values, token_states
from course_utils.response_tree import ALL_PROMPTS, ResponseTree
from course_utils.reward_model import digit_counts
from course_utils.tinylm import MAX_NEW, sample
from course_utils.tree_optimum import soft_values
from course_utils.views.base import (MARKERS, FastFigure, PngFigure, View, at_request_end, few_ticks, kernel_loop, palette,
                                     series, show_slider)
from course_utils.views.optimum import reference_logprobs_on

LAMBDAS = tuple(round(0.05 * i, 2) for i in range(21))        # the slider: 0, 0.05, ..., 1
N_EVAL = 1000           # rollouts of the trained policy the comparison is made on
PROMPTS = ALL_PROMPTS[::5]      # their prompts: 20 of the 100 ("0+0=", "0+5=", "1+0=", ...), a tree each


class CriticView(View):
    """Experiment 10: the learned critic and GAE(lambda) against the exact V^pi, Q^pi and A^pi of a
    trained policy (the run ``cfg`` of ``runs``), with a lambda slider. See the module docstring."""

    _first_draw = False         # True while display() makes the slider's first frames: no fit then
    _fits_itself = False        # True from a display() in a kernel: the critic comes when the cell has run

    def __init__(self, runs, cfg, kl_penalized_rewards, gae_per_token, ppo_rlhf_loss, fit_iters=FIT_ITERS, n_eval=N_EVAL,
                 seed=0):
        self.runs, self.cfg, self.fit_iters, self.n_eval, self.seed = runs, cfg, fit_iters, n_eval, seed
        self.fns = (kl_penalized_rewards, gae_per_token, ppo_rlhf_loss)
        self.frames = {}

    def _prepare(self):
        """The exact part: V^pi, Q^pi and A^pi at the rollouts' tokens, GAE's error with V^pi, the optimum's check."""
        rm, rm_offset = self.runs.reward()
        policy, sft, beta = self.runs.run(self.cfg)[0], self.runs.sft, self.cfg.beta
        kl_penalized_rewards, gae_per_token, _ = self.fns
        tree = ResponseTree.build(PROMPTS)
        # the SFT model's pass: Experiment 8's over the 100 prompts, if it has been made
        logp, ref_logp, tree_rewards = tree.logprobs(policy), reference_logprobs_on(tree, sft), tree.rm_rewards(rm, rm_offset)
        values, q = policy_values(logp, ref_logp, tree_rewards, beta)
        self.optimum_check = self._optimum_check(ref_logp, tree_rewards, beta)

        prompts = random.Random(self.seed + 1).choices(PROMPTS, k=self.n_eval)
        out = sample(policy, prompts, generator=torch.Generator().manual_seed(self.seed + 1))
        self.rollouts, rows = out, torch.tensor([tree.prompts.index(p) for p in prompts])
        state, action = token_states(out, rows)
        self.mask = mask = out["mask"]
        # the tokens' log-probs under the policy and the SFT model, read off the tree's (no model pass)
        old_logp, sft_logp = ((at_tokens(lp, rows, state, action) * mask).float() for lp in (logp, ref_logp))
        with torch.no_grad():
            score = rm(digit_counts(out)) - rm_offset
            self.rewards = kl_penalized_rewards(old_logp, sft_logp, score, mask, beta).double()
        self.exact_values = at_tokens(values, rows, state) * mask
        self.exact_q = at_tokens(q, rows, state, action) * mask
        self.exact_adv = self.exact_q - self.exact_values
        self.depth = torch.arange(MAX_NEW).expand_as(mask)[mask.bool()]
        self.exact_returns = [self.gae(self.exact_values, lam)[1] for lam in LAMBDAS]
        self._curves = {"exact": np.array([self._rms_error(ret - self.exact_q) for ret in self.exact_returns])}
        self.critic = None

    def fit(self):
        """Fit the critic (once) and add its curves; returns self."""
        self.prepare()
        if self.critic is None:
            rm, rm_offset = self.runs.reward()
            policy, sft = self.runs.run(self.cfg)[0], self.runs.sft
            critic = fit_critic(policy, sft, rm, rm_offset, self.cfg, *self.fns, self.fit_iters, self.seed)
            with torch.no_grad():
                self.critic_values = critic(self.rollouts).double() * self.mask
            ret_critic = [self.gae(self.critic_values, lam)[1] for lam in LAMBDAS]
            self._curves = {"critic": np.array([self._rms_error(ret - self.exact_q) for ret in ret_critic]),
                            "exact": self._curves["exact"],
                            "share": np.array([self._rms_error(r - e) for r, e in zip(ret_critic, self.exact_returns)])}
            self.critic = critic
        return self

    @property
    def curves(self):
        """RMS error over real tokens of GAE's returns against Q^pi, for each of LAMBDAS: {"critic": with the
        learned critic, "exact": with V^pi, "share": the two's difference} (the critic fitted first)."""
        return self.fit()._curves

    def _rms_error(self, error):
        return float(error[self.mask.bool()].pow(2).mean().sqrt())

    def _optimum_check(self, ref_logp, tree_rewards, beta):
        """(soft values, V^pi* by policy_values) at the root and depth 1 of every prompt: two (P * 13,)."""
        soft, opt_logp = soft_values(ref_logp, tree_rewards, beta)
        exact, _ = policy_values(opt_logp, ref_logp, tree_rewards, beta)
        pick = lambda v: torch.cat([v[0].flatten(), v[1].flatten()])
        return pick(soft), pick(exact)

    def gae(self, values, lam):
        """(advantages, returns) of the lab's gae_per_token at ``lam`` on the evaluation rollouts."""
        _, gae_per_token, _ = self.fns
        adv, ret = gae_per_token(self.rewards.clone(), values.clone(), self.mask.clone(), 1.0, lam)
        return adv.double(), ret.double()

    # ------------------------------------------------------------------------- the figure
    def _build(self):
        """The figure's static parts: four panels with the critic, or (not fitted yet) the exact values' two."""
        m, fitted = self.mask.bool(), self.critic is not None
        fig = PngFigure(figsize=(15, 3.9), dpi=72)              # a fixed layout: constrained layout costs 0.2 s
        grid = fig.add_gridspec(1, 4, left=0.045, right=0.99, bottom=0.13, top=0.84, wspace=0.32)
        a1, a2, a3, a4 = (fig.add_subplot(cell) if fitted or i in (1, 2) else cell for i, cell in enumerate(grid))
        if fitted:
            exact_v, critic_v = self.exact_values[m].numpy(), self.critic_values[m].numpy()
            for t in range(MAX_NEW):
                pick = (self.depth == t).numpy()
                if pick.any():
                    a1.scatter(exact_v[pick], critic_v[pick], s=8, alpha=0.4, color=palette()[t], marker=MARKERS[t],
                               label=f"t = {t}")
            _diagonal(a1, exact_v, critic_v)
            rms = self.critic_rms = float(np.sqrt(np.mean((critic_v - exact_v) ** 2)))
            a1.set_title(f"learned critic against exact V^π\n({m.sum():.0f} prefixes y<t, RMS error {rms:.3f})",
                         fontsize=10, y=1.0)                   # y given: no automatic title placement (slow)
            a1.set_xlabel("exact V^π(x, y<t)")                  # plain text: mathtext's first parse is slow
            a1.set_ylabel("critic V(x, y<t)")
            a1.legend(fontsize=8, markerscale=2)
        else:
            when = "fitting the critic..." if self._fits_itself else "fitted when the slider first moves"
            _to_come(fig, a1, "learned critic against exact V^π", f"{when}\n({self.fit_iters} batches of your Tasks 3 to 5)")

        soft, exact = (v.numpy() for v in self.optimum_check)
        a2.scatter(soft, exact, s=8, alpha=0.5, color=palette()[0])
        _diagonal(a2, soft, exact)
        a2.set_title(f"optimum π* (β = {self.cfg.beta:g}): V^π* against the soft value\n"
                     f"{len(soft)} prefixes, max gap {np.abs(soft - exact).max():.1e}", fontsize=10, y=1.0)
        a2.set_xlabel("soft value V(s) (backward pass)")        # a glyph costs ~0.1 ms of the first draw
        a2.set_ylabel("V^π*(s) (policy evaluation)")

        lams = np.array(LAMBDAS)
        if fitted:
            a3.plot(lams, self._curves["critic"], lw=2, label="with the learned critic", **series(0))
        a3.plot(lams, self._curves["exact"], lw=2, label="with the exact V^π", **series(1))
        if fitted:
            a3.plot(lams, self._curves["share"], lw=1, label="difference (the critic's share)", **series(2))
        a3.set_xlabel("GAE λ")
        a3.set_title("RMS error of GAE's returns against Q^π\n(over the same tokens)", fontsize=10, y=1.0)
        a3.set_ylim(0, None)
        a3.legend(fontsize=8, loc="upper right" if fitted else "upper left", title_fontsize=8,
                  title=None if fitted else "the learned critic: in a moment" if self._fits_itself
                  else "the learned critic: on the first move")
        self.marker = a3.axvline(self.cfg.lam, color="black", lw=1)
        dynamic = [self.marker]

        if fitted:
            exact_a = self.exact_adv[m].numpy()
            self.points = a4.scatter(exact_a, exact_a, s=6, alpha=0.4, color=palette()[0])
            _diagonal(a4, exact_a, exact_a, pad=0.6)
            a4.set_xlabel("exact A^π(x, y<t, yt)")
            a4.set_ylabel("GAE advantage (learned critic)")
            a4.set_title("GAE(λ) advantages against exact A^π\n ", fontsize=10, y=1.0)    # drawn once, in the background
            self.scatter_title = a4.text(0.5, 1.0, "", transform=a4.title.get_transform(), ha="center", va="baseline",
                                         fontsize=10)       # its second line, the numbers: a frame draws only these glyphs
            dynamic += [self.points, self.scatter_title]
        else:
            _to_come(fig, a4, "GAE(λ) advantages against exact A^π",
                     "with the critic: in a moment" if self._fits_itself else "with the critic,\non the slider's first move")
        for ax in fig.axes:
            few_ticks(ax.xaxis)
            few_ticks(ax.yaxis)
        self.frame, self.frame_has_critic = FastFigure(fig, dynamic), fitted

    def update(self, lam):
        """The four panels with GAE at ``lam`` marked and scattered: PNG bytes. The critic is fitted first,
        except in the slider's first draw (``display``): the completion in a kernel (``_complete``) or the
        slider's first move fits it, and makes the static picture again (show_slider's ``redo_still``), complete."""
        self.prepare()
        if self.critic is None and not self._first_draw:
            self.fit()
            if hasattr(self, "widget"):
                self.widget.redo_still()                      # its frames call update() again, fitted
        if getattr(self, "frame", None) is None or self.frame_has_critic != (self.critic is not None):
            self._build()
        self.marker.set_xdata([lam, lam])
        self.lam = lam
        exact = f"{self._rms(lam, 'exact'):.4f} with the exact V^pi"
        if self.critic is None:
            self._caption = (f"lambda = {lam:g}: RMS error of the returns {exact}; the learned critic is "
                             + ("being fitted (a moment)" if self._fits_itself else "fitted when you first move the slider"))
            return self.frame.png()
        m = self.mask.bool()
        adv, _ = self.gae(self.critic_values, lam)
        exact_a, gae_a = self.exact_adv[m].numpy(), adv[m].numpy()
        self.points.set_offsets(np.column_stack([exact_a, gae_a]))
        corr = self.corr = np.corrcoef(exact_a, gae_a)[0, 1]
        self._caption = f"lambda = {lam:g}: RMS error of the returns {self._rms(lam, 'critic'):.4f} with the critic, {exact}"
        self.scatter_title.set_text(f" \n(λ = {lam:g}: correlation {corr:.3f}, "
                                    f"RMS error {np.sqrt(np.mean((gae_a - exact_a) ** 2)):.3f})")
        return self.frame.png()

    def _rms(self, lam, which):
        return float(self._curves[which][LAMBDAS.index(lam)]) if lam in LAMBDAS else float("nan")

    def caption(self):
        return getattr(self, "_caption", "")

    def alt(self):
        best = lambda which: LAMBDAS[int(np.argmin(self._curves[which]))]
        if self.critic is None:
            when = "in a moment, once it is fitted" if self._fits_itself else "with the slider's first move, which fits it"
            return (f"Four panels at GAE lambda = {self.lam:g}; the first and the last, the learned critic's, come "
                    f"{when} ({self.fit_iters} batches of your Tasks 3 to 5). "
                    f"At the optimum, V^pi* against the soft values, on the diagonal; the RMS error of GAE's returns "
                    f"against Q^pi for lambda from 0 to 1 with the exact V^pi (smallest at lambda = {best('exact'):g}). "
                    f"{self._caption}.")
        return (f"Four panels at GAE lambda = {self.lam:g}. The learned critic's values against the exact V^pi "
                f"at the same prefixes (RMS error {self.critic_rms:.3f}); at the optimum, V^pi* against the soft "
                f"values, on the diagonal; the RMS error of GAE's returns against Q^pi for lambda from 0 to 1, "
                f"with the learned critic (smallest at lambda = {best('critic'):g}) and with the exact V^pi; and GAE's "
                f"advantages at lambda = {self.lam:g} against the exact A^pi (correlation {self.corr:.3f}). "
                f"{self._caption}.")

    def display(self):
        """The lambda slider (0 to 1, starting at cfg.lam) and the panels: first the exact values', the
        critic's once the cell has run (in a kernel) or with the first move (module docstring)."""
        import ipywidgets as widgets

        start = min(LAMBDAS, key=lambda x: abs(x - self.cfg.lam))
        slider = widgets.SelectionSlider(options=[(f"{x:g}", x) for x in LAMBDAS], value=start,
                                         description="GAE lambda", continuous_update=True,
                                         style={"description_width": "initial"}, layout=widgets.Layout(width="420px"))
        self._first_draw, self._fits_itself = True, kernel_loop() is not None
        try:
            self.widget = show_slider(self, slider, "lambda")
        finally:
            self._first_draw = False
        if self._fits_itself:
            at_request_end(self._complete)

    def _complete(self):
        """In a kernel, once the cell has run: fit the critic (unless a move did) and make the widget's frame and
        the static picture again, complete; a failing function of the student's is reported in the caption."""
        if self.critic is None:
            with torch.random.fork_rng():       # fit_critic seeds torch's global generator: later cells must not see it
                self.widget.complete()


def _to_come(fig, cell, title, note):
    """A panel still to come, in the grid's ``cell``: its title, and a note on when it comes."""
    box = cell.get_position(fig)
    fig.text((box.x0 + box.x1) / 2, box.y1, title, ha="center", va="bottom", fontsize=10)
    fig.text((box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2, note, ha="center", va="center", fontsize=10, color="dimgray")


def _diagonal(ax, x, y, pad=0.05):
    """The line y = x over the range of both."""
    lo, hi = min(x.min(), y.min()), max(x.max(), y.max())
    lo, hi = lo - pad * (hi - lo), hi + pad * (hi - lo)
    ax.plot([lo, hi], [lo, hi], color="gray", lw=0.8, ls=":")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)


__all__ = ["LAMBDAS", "CriticView"]
