"""Experiment 10 of Lab 12: PPO's learned critic and GAE(lambda) against the exact values of the toy.

On the response tree the value of a policy is not estimated but computed
(course_utils.policy_evaluation: V^pi, Q^pi and A^pi of the KL-penalized return). The view fits a
critic to a trained policy (course_utils.critic_fit, as train_rlhf fits its own) and compares, on
that policy's own rollouts,

    the critic's V(x, y_<t)                 with V^pi at the same prefixes;
    GAE(lambda) from the lab's gae_per_token with Q^pi (returns) and A^pi (advantages) of the same
    tokens, for lambda from 0 to 1 (a slider), with the critic and with V^pi itself;

and, at the optimum pi* of the same beta, V^pi* with the soft values of course_utils.tree_optimum.

    view = CriticView(runs, RLHFConfig(), kl_penalized_rewards, gae_per_token, ppo_rlhf_loss).prepare()
    view.update(0.5)        # PNG bytes: the four panels at lambda = 0.5
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
from course_utils.views.base import MARKERS, FastFigure, PngFigure, View, few_ticks, palette, series, show_slider
from course_utils.views.optimum import reference_logprobs_on

LAMBDAS = tuple(round(0.05 * i, 2) for i in range(21))        # the slider: 0, 0.05, ..., 1
N_EVAL = 1000           # rollouts of the trained policy the comparison is made on
PROMPTS = ALL_PROMPTS[::5]      # their prompts: 20 of the 100 ("0+0=", "0+5=", "1+0=", ...), a tree each


class CriticView(View):
    """Experiment 10: the learned critic and GAE(lambda) against the exact V^pi, Q^pi and A^pi of a
    trained policy (the run ``cfg`` of ``runs``), with a lambda slider. See the module docstring."""

    def __init__(self, runs, cfg, kl_penalized_rewards, gae_per_token, ppo_rlhf_loss, fit_iters=FIT_ITERS, n_eval=N_EVAL,
                 seed=0):
        self.runs, self.cfg, self.fit_iters, self.n_eval, self.seed = runs, cfg, fit_iters, n_eval, seed
        self.fns = (kl_penalized_rewards, gae_per_token, ppo_rlhf_loss)
        self.frames = {}

    def _prepare(self):
        rm, rm_offset = self.runs.reward()
        policy, sft, beta = self.runs.run(self.cfg)[0], self.runs.sft, self.cfg.beta
        kl_penalized_rewards, gae_per_token, _ = self.fns
        self.critic = fit_critic(policy, sft, rm, rm_offset, self.cfg, *self.fns, self.fit_iters, self.seed)
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
            self.critic_values = self.critic(out).double() * mask
        self.exact_values = at_tokens(values, rows, state) * mask
        self.exact_q = at_tokens(q, rows, state, action) * mask
        self.exact_adv = self.exact_q - self.exact_values
        self.depth = torch.arange(MAX_NEW).expand_as(mask)[mask.bool()]
        self.curves = self._curves()

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

    def _curves(self):
        """RMS error over real tokens of GAE's returns against Q^pi, for each of LAMBDAS:
        {"critic": with the learned critic, "exact": with V^pi, "share": the two's difference}."""
        m = self.mask.bool()
        rms = lambda e: float(e[m].pow(2).mean().sqrt())
        curves = {"critic": [], "exact": [], "share": []}
        for lam in LAMBDAS:
            (_, ret_critic), (_, ret_exact) = self.gae(self.critic_values, lam), self.gae(self.exact_values, lam)
            curves["critic"].append(rms(ret_critic - self.exact_q))
            curves["exact"].append(rms(ret_exact - self.exact_q))
            curves["share"].append(rms(ret_critic - ret_exact))
        return {k: np.array(v) for k, v in curves.items()}

    # ------------------------------------------------------------------------- the figure
    def _build(self):
        m = self.mask.bool()
        fig = PngFigure(figsize=(15, 3.9), dpi=72)              # a fixed layout: constrained layout costs 0.2 s
        a1, a2, a3, a4 = fig.subplots(1, 4, gridspec_kw={"left": 0.045, "right": 0.99, "bottom": 0.13, "top": 0.84,
                                                          "wspace": 0.32})
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

        soft, exact = (v.numpy() for v in self.optimum_check)
        a2.scatter(soft, exact, s=8, alpha=0.5, color=palette()[0])
        _diagonal(a2, soft, exact)
        a2.set_title(f"optimum π* (β = {self.cfg.beta:g}): V^π* against the soft value\n"
                     f"{len(soft)} prefixes, max gap {np.abs(soft - exact).max():.1e}", fontsize=10, y=1.0)
        a2.set_xlabel("soft value V(s) (backward pass)")        # a glyph costs ~0.1 ms of the first draw
        a2.set_ylabel("V^π*(s) (policy evaluation)")

        lams = np.array(LAMBDAS)
        a3.plot(lams, self.curves["critic"], lw=2, label="with the learned critic", **series(0))
        a3.plot(lams, self.curves["exact"], lw=2, label="with the exact V^π", **series(1))
        a3.plot(lams, self.curves["share"], lw=1, label="difference (the critic's share)", **series(2))
        a3.set_xlabel("GAE λ")
        a3.set_title("RMS error of GAE's returns against Q^π\n(over the same tokens)", fontsize=10, y=1.0)
        a3.set_ylim(0, None)
        a3.legend(fontsize=8, loc="upper right")
        self.marker = a3.axvline(self.cfg.lam, color="black", lw=1)

        exact_a = self.exact_adv[m].numpy()
        self.points = a4.scatter(exact_a, exact_a, s=6, alpha=0.4, color=palette()[0])
        _diagonal(a4, exact_a, exact_a, pad=0.6)
        a4.set_xlabel("exact A^π(x, y<t, yt)")
        a4.set_ylabel("GAE advantage (learned critic)")
        a4.set_title("GAE(λ) advantages against exact A^π\n ", fontsize=10, y=1.0)    # drawn once, in the background
        self.scatter_title = a4.text(0.5, 1.0, "", transform=a4.title.get_transform(), ha="center", va="baseline",
                                     fontsize=10)       # its second line, the numbers: a frame draws only these glyphs
        for ax in (a1, a2, a3, a4):
            few_ticks(ax.xaxis)
            few_ticks(ax.yaxis)
        self.frame = FastFigure(fig, [self.marker, self.points, self.scatter_title])

    def update(self, lam):
        """The four panels with GAE at ``lam`` marked and scattered: PNG bytes."""
        self.prepare()
        if not hasattr(self, "frame"):
            self._build()
        m = self.mask.bool()
        adv, _ = self.gae(self.critic_values, lam)
        exact_a, gae_a = self.exact_adv[m].numpy(), adv[m].numpy()
        self.points.set_offsets(np.column_stack([exact_a, gae_a]))
        self.marker.set_xdata([lam, lam])
        corr = self.corr = np.corrcoef(exact_a, gae_a)[0, 1]
        self.lam = lam
        self._caption = (f"lambda = {lam:g}: RMS error of the returns {self._rms(lam, 'critic'):.4f} with the critic, "
                         f"{self._rms(lam, 'exact'):.4f} with the exact V^pi")
        self.scatter_title.set_text(f" \n(λ = {lam:g}: correlation {corr:.3f}, "
                                    f"RMS error {np.sqrt(np.mean((gae_a - exact_a) ** 2)):.3f})")
        return self.frame.png()

    def _rms(self, lam, which):
        return float(self.curves[which][LAMBDAS.index(lam)]) if lam in LAMBDAS else float("nan")

    def caption(self):
        return getattr(self, "_caption", "")

    def alt(self):
        best = LAMBDAS[int(np.argmin(self.curves["critic"]))]
        return (f"Four panels at GAE lambda = {self.lam:g}. The learned critic's values against the exact V^pi "
                f"at the same prefixes (RMS error {self.critic_rms:.3f}); at the optimum, V^pi* against the soft "
                f"values, on the diagonal; the RMS error of GAE's returns against Q^pi for lambda from 0 to 1, "
                f"with the learned critic (smallest at lambda = {best:g}) and with the exact V^pi; and GAE's "
                f"advantages at lambda = {self.lam:g} against the exact A^pi (correlation {self.corr:.3f}). "
                f"{self._caption}.")

    def display(self):
        """The lambda slider (0 to 1, starting at cfg.lam) and the four panels."""
        import ipywidgets as widgets

        start = min(LAMBDAS, key=lambda x: abs(x - self.cfg.lam))
        slider = widgets.SelectionSlider(options=[(f"{x:g}", x) for x in LAMBDAS], value=start,
                                         description="GAE lambda", continuous_update=True,
                                         style={"description_width": "initial"}, layout=widgets.Layout(width="420px"))
        self.widget = show_slider(self, slider, "lambda")


def _diagonal(ax, x, y, pad=0.05):
    """The line y = x over the range of both."""
    lo, hi = min(x.min(), y.min()), max(x.max(), y.max())
    lo, hi = lo - pad * (hi - lo), hi + pad * (hi - lo)
    ax.plot([lo, hi], [lo, hi], color="gray", lw=0.8, ls=":")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)


__all__ = ["LAMBDAS", "CriticView"]
