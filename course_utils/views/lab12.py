"""Plots and sliders of Lab 12: the labeler's rankings, the reward model's fit, PPO curves, the
over-optimization curve, and answers by temperature.

Every view follows the protocol of ``views.base`` (the constructor keeps its arguments; ``show()``
does the work and displays it, nothing while nbgrader grades). Nothing here trains anything by
itself: the reward model and the runs come from the lab's own ``train_reward_model`` and
``train_rlhf`` through a ``runs.RunCache``, which trains each configuration once; sliders only
re-draw cached numbers, fast enough to follow the mouse (a benchmark times them):

    with needs("Tasks 3, 4 and 5 (kl_penalized_rewards, gae_per_token, ppo_rlhf_loss)"):
        views.CurveExplorer(runs, RLHFConfig()).show()          # a sweep over SWEEP_BETAS, a slider

    explorer = CurveExplorer(runs, RLHFConfig()).prepare()
    explorer.update(0.1)            # -> PNG bytes of the six panels for beta = 0.1
"""

import random

import numpy as np
import torch
import torch.nn.functional as F

from course_utils.evaluation import METRICS, gold_order_agreement, last_third
from course_utils.labeler import ranked_data
from course_utils.response_tree import FEATURES, ResponseTree, complete_only, entropy, exact_entropy, response_probs
from course_utils.runs import SWEEP_BETAS, RunCache
from course_utils.reference_curves import REFERENCE_PATH, load_reference_curves
from course_utils.runtime import progress
from course_utils.tinylm import DIGITS, TOKENS, decode_responses, make_batch, sample
from course_utils.views.base import FastFigure, PngFigure, View, few_ticks, log_axis, palette, series, show_slider
from course_utils.views.optimum import OptimumComparison, OptimumSlider, reference_logprobs
from course_utils.views.critic import CriticView
from course_utils.views.length import LossWeights
from course_utils.world import N_OFFSET

# how the panels show each of METRICS: (title, y-limits or None for automatic)
PANELS = {
    "rm": ("RM score (the proxy)", None),
    "gold": ("gold score (the labeler)", (-1.05, 1.05)),
    "kl": ("KL to the SFT model (nats)", None),
    "acc": ("accuracy (sampled)", (-0.02, 1.02)),
    "malformed": ("malformed fraction", (-0.02, 1.02)),
    "digits": ("digits per response", (0.9, 4.1)),
}


def smooth(values, window=5):
    """Trailing moving average of ``window`` points (the first points average what exists so far)."""
    v = np.asarray(values, dtype=float)
    c = np.concatenate([[0.0], np.cumsum(v)])
    i = np.arange(len(v))
    start = np.maximum(i - window + 1, 0)
    return (c[i + 1] - c[start]) / (i + 1 - start)


def run_summary(label, hist):
    """One line: gold and accuracy from the first iteration to the last third, and the KL there."""
    return (f"{label}: gold {hist['gold'][0]:+.2f} -> {last_third(hist, 'gold'):+.2f}, "
            f"accuracy {hist['acc'][0]:.2f} -> {last_third(hist, 'acc'):.2f}, "
            f"KL {last_third(hist, 'kl'):.2f} (last third of the iterations)")


# ----------------------------------------------------------------------------- Part A: the labeler, the reward model
class LabelerExamples(View):
    """A few prompts with K sampled answers each, their gold scores and the labeler's ranking."""

    def __init__(self, sft_model, n_prompts=3, k=4, seed=7):
        self.sft, self.n_prompts, self.k, self.seed = sft_model, n_prompts, k, seed

    def _prepare(self):
        self.data = ranked_data(self.sft, self.n_prompts, k=self.k, seed=self.seed)

    def display(self):
        for d in self.data:
            answers = [a or "(blank)" for a in decode_responses(d["out"])]
            print(f"{d['prompt']}  responses {answers}  gold {d['gold'].tolist()}  "
                  f"ranking (best first) {d['ranking']}")


class RewardModelFit(View):
    """Fit the reward model with the lab's ``train_reward_model`` (into ``runs``) and judge it on
    held-out rankings: accuracy on the labeler's noisy pairs against the noise ceiling (the lab's
    ``rm_accuracy``), agreement with the noise-free gold order, and the learned digit weights."""

    def __init__(self, runs, train_reward_model, rm_accuracy, comparisons):
        self.runs, self.train_reward_model = runs, train_reward_model
        self.rm_accuracy, self.comparisons = rm_accuracy, comparisons

    def _prepare(self):
        rm = self.runs.fit_reward_model(self.train_reward_model)
        held_out = self.runs.world.held_out
        self.acc, self.ceiling = self.rm_accuracy(rm, held_out)
        self.agreement, self.decided = gold_order_agreement(rm, *self.comparisons(held_out))
        self.weights = rm.w.detach().clone()

    def display(self):
        from IPython.display import display

        print(f"held-out accuracy {self.acc:.3f}   noise ceiling {self.ceiling:.3f}   agreement with the "
              f"gold order {self.agreement:.3f} ({self.decided:.0%} of the pairs)")
        print("weights w per digit 0..9:", [round(x, 2) for x in self.weights.tolist()])
        display(plot_rm_fit(self.acc, self.ceiling, self.agreement, self.weights))


class RewardOffset(View):
    """The RM offset of ``runs``: the mean score of SFT samples, subtracted from every score."""

    def __init__(self, runs):
        self.runs = runs

    def _prepare(self):
        _, self.rm_offset = self.runs.reward()

    def display(self):
        print(f"rm_offset = mean RM score of {N_OFFSET} SFT samples = {self.rm_offset:.3f}")


def plot_rm_fit(acc, ceiling, agreement, weights):
    """The reward model against its limits: held-out accuracy on the labeler's (noisy) pairs next
    to the noise ceiling, agreement with the noise-free gold order, and the learned digit weights."""
    fig = PngFigure(figsize=(11, 3.4))          # fixed margins: a layout engine costs a fifth of a second a figure
    a1, a2, a3 = fig.subplots(1, 3, width_ratios=[1.1, 0.8, 1.3], gridspec_kw=dict(
        left=0.065, right=0.99, bottom=0.13, top=0.86, wspace=0.2))
    bars = a1.bar(["coin flip", "your RM", "noise ceiling"], [0.5, acc, ceiling],
                  color=["#bbbbbb", palette()[0], "#444444"])
    a1.bar_label(bars, fmt="%.3f")
    a1.set_ylim(0.45, max(ceiling, acc) + 0.03)
    a1.set_title("held-out pairs of the noisy labeler", y=1.0)   # y given: no automatic placement (slow)
    a1.set_ylabel("fraction of pairs ordered right")
    bars = a2.bar(["your RM"], [agreement], color=palette()[0], width=0.5)
    a2.bar_label(bars, fmt="%.3f")
    a2.set_ylim(0.45, 1.02)
    a2.axhline(1.0, color="#444444", lw=1, ls="--")
    a2.set_title("pairs with different gold scores,\nnoise-free order", y=1.0)
    w = np.asarray(weights, dtype=float)
    a3.bar([TOKENS[d] for d in DIGITS], w, color=palette()[1])
    a3.axhline(0, color="black", lw=0.8)
    a3.set_xlabel("digit")
    a3.set_title("RM weight per occurrence of each digit", y=1.0)
    for ax in (a1, a2, a3):
        few_ticks(ax.yaxis)                     # fewer ticks: each one costs a share of the draw
    top, low = int(np.argmax(w)), int(np.argmin(w))
    fig.alt = (f"Three bar panels of the reward model. Held-out pairs of the noisy labeler ordered right: "
               f"coin flip 0.5, your RM {acc:.3f}, noise ceiling {ceiling:.3f}. Pairs with different gold scores "
               f"in the noise-free order: {agreement:.3f}. The RM's weight per occurrence of each digit 0 to 9: "
               f"largest for {TOKENS[DIGITS[top]]} ({w[top]:+.2f}), smallest for {TOKENS[DIGITS[low]]} "
               f"({w[low]:+.2f}).")
    return fig


# ----------------------------------------------------------------------------- Part B: PPO runs
class TrainingCurves(View):
    """Experiments 1 to 4: PPO runs side by side, {label: RLHFConfig}, trained once by ``runs``.

    Shows the six panels of METRICS, then one summary line per run (``run_summary``); for a run with
    an adaptive KL controller (``target_kl``) also the controller's KL and beta; with ``answers_to``
    (prompts), what the first run's policy answers them.
    """

    def __init__(self, runs, configs, title=None, answers_to=None):
        self.runs, self.configs, self.title, self.answers_to = runs, dict(configs), title, answers_to

    def _prepare(self):
        self.results = dict(zip(self.configs, self.runs.run_all(list(self.configs.values()))))
        self.histories = {label: hist for label, (_, hist) in self.results.items()}
        self.targets = {label: cfg.target_kl for label, cfg in self.configs.items() if cfg.target_kl is not None}
        self.answers = {}
        if self.answers_to:
            policy = next(iter(self.results.values()))[0]
            out = sample(policy, list(self.answers_to), generator=torch.Generator().manual_seed(0))
            self.answers = dict(zip(self.answers_to, decode_responses(out)))

    def display(self):
        from IPython.display import display

        target = next(iter(self.targets.values()), None)
        for label, target_kl in self.targets.items():
            display(plot_controller(self.histories[label], target_kl))
        display(plot_curves(self.histories, title=self.title, target_kl=target))
        for label, hist in self.histories.items():
            print(run_summary(label, hist))
        for label, target_kl in self.targets.items():
            hist = self.histories[label]
            print(f"{label}: KL over the last third {last_third(hist, 'kl'):.2f} (target {target_kl:g}); "
                  f"beta {hist['beta'][0]:.3f} -> {hist['beta'][-1]:.3f}")
        if self.answers:
            print(f"{next(iter(self.results))}, after training:", self.answers)


def _label(beta):
    return f"beta = {beta:g}"


def _kl_log_scale(ax, top):
    """Small and large KLs on one axis: linear up to 1 nat, logarithmic above."""
    log_axis(ax, "y", [t for t in (0, 0.5, 1, 3, 10, 30, 100) if t <= top * 1.2], "symlog", linthresh=1.0, linscale=1.5)
    ax.set_ylim(-0.05, top * 1.3)
    ax.set_title("KL to the SFT model (nats, log scale above 1)", fontsize=10, y=1.0)


def plot_curves(runs, title=None, target_kl=None, window=5):
    """The six panels of PPO training (METRICS): {label: history} drawn over iterations (light: raw,
    dark: a moving average of ``window`` iterations). ``target_kl`` draws the controller's target."""
    fig = PngFigure(figsize=(12, 5.6))          # fixed margins (plot_rm_fit); a title needs room at the top
    axes = fig.subplots(2, 3, sharex=True, gridspec_kw=dict(left=0.05, right=0.99, bottom=0.085,
                                                            top=0.9 if title else 0.95, wspace=0.2, hspace=0.2)).ravel()
    for i, (label, hist) in enumerate(runs.items()):
        style = series(i)
        x = np.arange(len(hist["rm"]))
        for ax, key in zip(axes, METRICS):
            ax.plot(x, hist[key], color=style["color"], alpha=0.25, lw=0.8)
            ax.plot(x, smooth(hist[key], window), lw=1.8, label=label, **style)
    for ax, key in zip(axes, METRICS):
        panel_title, ylim = PANELS[key]          # not `title`: that is the figure's own
        ax.set_title(panel_title, fontsize=10, y=1.0)
        if ylim:
            ax.set_ylim(*ylim)
        ax.grid(alpha=0.3)
        few_ticks(ax.xaxis)
        few_ticks(ax.yaxis)                      # the KL panel's log scale below sets its own
    kl_ax = axes[METRICS.index("kl")]
    top = max(max(h["kl"]) for h in runs.values())
    if top > 5:
        _kl_log_scale(kl_ax, top)
    if target_kl is not None:
        kl_ax.axhline(target_kl, color="black", ls="--", lw=1, label=f"target {target_kl:g}")
        kl_ax.legend(fontsize=8)
    for ax in axes[3:]:
        ax.set_xlabel("PPO iteration")
    axes[METRICS.index("gold")].legend(fontsize=8, loc="lower left")
    if title:
        fig.suptitle(title)
    fig.alt = (f"{title + '. ' if title else ''}Six panels over PPO iterations: "
               + ", ".join(PANELS[key][0] for key in METRICS)
               + (f"; the KL panel shows the target {target_kl:g}" if target_kl is not None else "")
               + ". Over the last third of the iterations: "
               + "; ".join(f"{label}: RM {last_third(h, 'rm'):+.2f}, gold {last_third(h, 'gold'):+.2f}, "
                           f"KL {last_third(h, 'kl'):.2f}, accuracy {last_third(h, 'acc'):.2f}, malformed "
                           f"{last_third(h, 'malformed'):.2f}" for label, h in runs.items()) + ".")
    return fig


def plot_controller(hist, target_kl, window=5):
    """The adaptive KL controller: KL against its target, and beta over iterations."""
    fig = PngFigure(figsize=(10, 3.2))          # fixed margins (plot_rm_fit)
    a1, a2 = fig.subplots(1, 2, gridspec_kw=dict(left=0.05, right=0.99, bottom=0.15, top=0.9, wspace=0.15))
    x = np.arange(len(hist["kl"]))
    a1.plot(x, hist["kl"], color=palette()[0], alpha=0.3, lw=0.8)
    a1.plot(x, smooth(hist["kl"], window), color=palette()[0], lw=1.8, label="KL (moving average)")
    a1.axhline(target_kl, color="black", ls="--", lw=1, label=f"target {target_kl:g}")
    a1.axhspan(0.7 * target_kl, 1.3 * target_kl, color="black", alpha=0.06, label="target +- 30%")
    a1.set_title("KL to the SFT model", y=1.0)
    a1.legend(fontsize=8)
    a2.plot(x, hist["beta"], color=palette()[1], lw=1.8)
    a2.set_title("beta, set by the controller", y=1.0)
    for ax in (a1, a2):
        ax.set_xlabel("PPO iteration")
        ax.grid(alpha=0.3)
        few_ticks(ax.xaxis)                     # x only: the KL's target wants its finer y ticks
    fig.alt = (f"Two panels of the adaptive KL controller over {len(x)} PPO iterations. Left: the KL to the SFT "
               f"model against its target {target_kl:g} (a band of +-30% around it); over the last third it "
               f"averages {last_third(hist, 'kl'):.2f}. Right: beta, set by the controller, from "
               f"{hist['beta'][0]:.3f} to {hist['beta'][-1]:.3f}.")
    return fig


def plot_overoptimization(sweep, window=5):
    """Gold and RM score against sqrt(KL) (Gao et al. 2022), from every iteration of every run of
    the sweep {beta: history}: each dot is where one run was at one iteration (a moving average of
    ``window`` iterations), and the line joins a run's iterations in order."""
    fig = PngFigure(figsize=(11, 3.8))          # fixed margins (plot_rm_fit)
    axes = fig.subplots(1, 2, sharex=True, gridspec_kw=dict(left=0.05, right=0.99, bottom=0.14, top=0.92, wspace=0.15))
    for i, (beta, hist) in enumerate(sweep.items()):
        style = series(i)
        x = np.sqrt(np.maximum(smooth(hist["kl"], window), 0.0))
        for ax, key in zip(axes, ("gold", "rm")):
            y = smooth(hist[key], window)
            ax.plot(x, y, color=style["color"], ls=style["ls"], lw=0.8, alpha=0.5)
            ax.scatter(x, y, s=12, color=style["color"], marker=style["marker"], alpha=0.6, label=_label(beta))
    for ax, name in zip(axes, ("gold score (what we want)", "RM score (what we optimize)")):
        ax.set_title(name, y=1.0)
        ax.set_xlabel("sqrt(KL to the SFT model)")
        ax.grid(alpha=0.3)
        few_ticks(ax.xaxis)
        few_ticks(ax.yaxis)
    axes[0].legend(fontsize=8, loc="lower left")
    ends = "; ".join(f"{_label(b)}: sqrt(KL) {np.sqrt(max(last_third(h, 'kl'), 0.0)):.2f}, gold "
                     f"{last_third(h, 'gold'):+.2f}, RM {last_third(h, 'rm'):+.2f}" for b, h in sweep.items())
    fig.alt = ("Two scatter panels, one dot per iteration of each run of the beta sweep: the gold score (left) "
               "and the RM score (right) against the square root of the KL to the SFT model. Where each run "
               f"ends, over the last third of its iterations: {ends}.")
    return fig


class OverOptimization(View):
    """Experiment 6: gold and RM score against sqrt(KL) over every iteration of the sweep."""

    def __init__(self, runs, base_cfg, betas=SWEEP_BETAS):
        self.runs, self.base_cfg, self.betas = runs, base_cfg, betas

    def _prepare(self):
        self.sweep = {b: hist for b, (_, hist) in self.runs.sweep(self.base_cfg, self.betas).items()}

    def display(self):
        from IPython.display import display

        display(plot_overoptimization(self.sweep))


# ----------------------------------------------------------------------------- Experiment 5: the sweep
class CurveExplorer(View):
    """Experiment 5: a beta slider over the sweep (SWEEP_BETAS): your run (solid) and the reference
    runs (dashed: the same seed; dotted: other seeds) in the six panels. ``update(beta)`` re-draws
    the cached curves and returns the PNG bytes.

    Axes, ticks and labels are drawn once (FastFigure); an update only draws the curves, which
    keeps it well within the time a slider move may take (benchmarks/bench.py: SLIDER_MOVE_BUDGET_MS).
    """

    def __init__(self, runs, base_cfg, betas=SWEEP_BETAS, reference=REFERENCE_PATH, window=5, dpi=75):
        self.runs, self.base_cfg, self.betas = runs, base_cfg, betas
        self.reference, self.window, self.dpi = reference, window, dpi

    def _prepare(self):
        self.sweep = {b: hist for b, (_, hist) in sorted(self.runs.sweep(self.base_cfg, self.betas).items())}
        reference = load_reference_curves(self.reference) if self.reference is not None else None
        self.ref = (reference or {}).get("runs", {})
        self._build()

    def _build(self):
        self.fig = PngFigure(figsize=(12, 5.2), dpi=self.dpi)      # a fixed layout: constrained layout costs 0.5 s
        axes = self.fig.subplots(2, 3, sharex=True, gridspec_kw={"left": 0.05, "right": 0.99, "bottom": 0.09,
                                                                 "top": 0.88, "wspace": 0.2, "hspace": 0.22}).ravel()
        n_ref = max((len(v) for v in self.ref.values()), default=0)
        n_iters = max(len(h["rm"]) for h in self.sweep.values())
        self.lines = []
        for ax, key in zip(axes, METRICS):
            refs = [ax.plot([], [], color="#555555", lw=1.4 if j == 0 else 0.8, ls="--" if j == 0 else ":",
                            label=["reference (same seed)", "reference (other seeds)"][j] if j < 2 else None)[0]
                    for j in range(n_ref)]
            raw = ax.plot([], [], color=palette()[0], alpha=0.25, lw=0.8)[0]
            mine = ax.plot([], [], color=palette()[0], lw=2, label="your run")[0]
            self.lines.append((key, raw, mine, refs))
            title, ylim = PANELS[key]
            ax.set_title(title, fontsize=10, y=1.0)       # y given: no automatic title placement (slow)
            lo, hi = ylim or self._limits(key)
            if key == "kl" and hi > 5:
                _kl_log_scale(ax, hi)
                lo = -0.05
            ax.set_ylim(lo, hi)
            ax.set_xlim(0, n_iters - 1)
            ax.grid(alpha=0.3)
            few_ticks(ax.xaxis)
            if not ax.get_yscale() == "symlog":
                few_ticks(ax.yaxis)
        for ax in axes[3:]:
            ax.set_xlabel("PPO iteration")
        axes[METRICS.index("gold")].legend(fontsize=8, loc="lower left")
        self.title = self.fig.suptitle(self._title(next(iter(self.sweep))), y=0.975)
        moving = [self.title] + [a for _, raw, mine, refs in self.lines for a in (raw, mine, *refs)]
        self.frame = FastFigure(self.fig, moving)

    def _limits(self, key):
        vals = [v for h in self.sweep.values() for v in h[key]]
        vals += [v for runs in self.ref.values() for h in runs for v in h[key]]
        lo, hi = min(vals), max(vals)
        pad = 0.05 * (hi - lo or 1.0)
        return lo - pad, hi + pad

    def _title(self, beta):
        hist = self.sweep[beta]
        return (f"{_label(beta)}:  last third  gold {last_third(hist, 'gold'):+.2f}, "
                f"RM {last_third(hist, 'rm'):+.2f}, KL {last_third(hist, 'kl'):.2f}")

    def _references(self, beta):
        close = [b for b in self.ref if abs(b - beta) < 1e-9]
        return self.ref[close[0]] if close else []

    def update(self, beta):
        """Re-draw the panels for ``beta`` (one of the sweep's); returns the PNG bytes."""
        self.prepare()
        hist = self.sweep[beta]
        refs = self._references(beta)
        x = np.arange(len(hist["rm"]))
        for key, raw, mine, ref_lines in self.lines:
            raw.set_data(x, hist[key])
            mine.set_data(x, smooth(hist[key], self.window))
            for j, line in enumerate(ref_lines):          # drawn after your run: visible if equal
                y = smooth(refs[j][key], self.window) if j < len(refs) else []
                line.set_data(np.arange(len(y)), y)
        self.title.set_text(self._title(beta))
        self.beta = beta
        return self.frame.png()

    def alt(self):
        refs = self._references(self.beta)
        return (f"Six panels over PPO iterations at {_label(self.beta)}: "
                + ", ".join(PANELS[key][0] for key in METRICS)
                + f"; your run solid, {len(refs)} reference runs dashed (same seed) and dotted (other seeds). "
                + self._title(self.beta).replace("last third", "over the last third of the iterations,") + ".")

    def caption(self):
        return ""

    def display(self):
        """The slider (one stop per beta of the sweep, starting in the middle) and its plot."""
        import ipywidgets as widgets

        betas = list(self.sweep)
        slider = widgets.SelectionSlider(options=[(f"{b:g}", b) for b in betas], value=betas[len(betas) // 2],
                                         description="beta", continuous_update=True,
                                         layout=widgets.Layout(width="420px"))
        self.widget = show_slider(self, slider, "beta")


# ----------------------------------------------------------------------------- answers by temperature
class SampleExplorer(View):
    """Experiment 7: a temperature slider over the SFT model and trained policies (a configuration of
    ``runs`` each): one sampled answer to each of a few prompts, with its gold score and RM score,
    and the exact averages over every response to those prompts.

    Exact: each policy is enumerated once on the response tree of the shown prompts
    (``response_tree``); at temperature T its next-token distribution is softmax(log pi / T) in every
    state (greedy at T = 0), so a new temperature costs no forward pass, and each temperature is
    computed when the slider first reaches it. Answers are drawn from those distributions (seeded).
    """

    temperatures = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)

    def __init__(self, runs, configs, n_show=10, seed=0):
        self.runs, self.configs, self.n_show, self.seed = runs, dict(configs), n_show, seed
        self.table = {}                                                      # {(T, policy): entry}, as reached

    def _prepare(self):
        rm, rm_offset = self.runs.reward()
        trained = self.runs.run_all(list(self.configs.values()))
        models = {"SFT": self.runs.sft, **{label: policy for label, (policy, _) in zip(self.configs, trained)}}
        self.prompts, _ = make_batch(self.n_show, random.Random(self.seed))
        self.tree = tree = ResponseTree.build(self.prompts)
        reward = complete_only(tree.rm_rewards(rm, rm_offset))                 # (P, N)
        self.values = torch.cat([reward[..., None], complete_only(tree.features)], dim=-1).float()   # (P, N, 5)
        self.columns = ("rm",) + FEATURES
        self.logp = {name: [lp.float() for lp in tree.logprobs(model)]               # float32: a table, not a proof
                     for name, model in models.items()}
        self.names = list(models)

    def entry(self, t, name):
        """The answers and exact means of policy ``name`` at temperature ``t`` (computed once)."""
        if (t, name) not in self.table:
            self.table[t, name] = self._entry(t, name)
        return self.table[t, name]

    def _entry(self, t, name):
        logp = self.logp[name]
        if t == 0:                                                              # greedy: all mass on the argmax
            tempered = [F.one_hot(lp.argmax(-1), lp.shape[-1]).float().log() for lp in logp]
        elif t == 1:                                                            # the policy itself
            tempered = logp
        else:
            tempered = [torch.log_softmax(lp / t, dim=-1) for lp in logp]
        probs = complete_only(response_probs(tempered))                          # (P, N), rows sum to 1
        means = probs[:, None].bmm(self.values)[:, 0].mean(0)                    # (5,) over prompts
        gen = torch.Generator().manual_seed(self.seed)
        picks = torch.multinomial(probs, 1, generator=gen)[:, 0]
        return {"resp": self.tree.answers(picks.tolist()),
                "answer_gold": self.values[torch.arange(len(picks)), picks, 1].tolist(),
                "answer_rm": self.values[torch.arange(len(picks)), picks, 0].tolist(),
                **{c: float(v) for c, v in zip(self.columns, means)}}

    @staticmethod
    def _cell(resp, gold, score):
        color = {1.0: "#1a7f37", 0.0: "#9a6700", -1.0: "#cf222e"}[gold]
        text = resp if resp else "(blank)"
        return (f"<td style='font-family:monospace;color:{color};padding:1px 8px'>{text}</td>"
                f"<td style='color:#555;padding:1px 12px 1px 4px'>{gold:+.0f} / {score:+.2f}</td>")

    def update(self, temperature):
        """The HTML table for ``temperature`` (one of ``temperatures``)."""
        self.prepare()
        cols = [self.entry(temperature, n) for n in self.names]
        head = "".join(f"<th colspan=2>{n}</th>" for n in self.names)
        rows = [f"<tr><td style='font-family:monospace;padding:1px 8px'>{p}</td>"
                + "".join(self._cell(c["resp"][i], c["answer_gold"][i], c["answer_rm"][i]) for c in cols) + "</tr>"
                for i, p in enumerate(self.prompts)]
        summary = "".join(f"<td colspan=2>gold {c['gold']:+.2f}, RM {c['rm']:+.2f}"
                          f"<br>correct {c['acc']:.0%}, malformed {c['malformed']:.0%}</td>" for c in cols)
        return (f"<table style='border-collapse:collapse'><tr><th>prompt</th>{head}</tr>"
                f"<tr><td></td>{'<td><i>answer</i></td><td><i>gold / RM</i></td>' * len(cols)}</tr>"
                + "".join(rows)
                + f"<tr style='border-top:1px solid #999'><td>exact mean,<br>these {len(self.prompts)} prompts</td>{summary}</tr>"
                + "</table>")

    def caption(self):
        return ""

    def display(self):
        """The slider (temperature, starting at 1) and the table."""
        import ipywidgets as widgets

        slider = widgets.SelectionSlider(options=[(f"{t:g}", t) for t in self.temperatures], value=1.0,
                                         description="temperature", continuous_update=True,
                                         style={"description_width": "initial"},
                                         layout=widgets.Layout(width="420px"))
        self.widget = show_slider(self, slider, "temperature")


__all__ = ["METRICS", "PANELS", "SWEEP_BETAS", "RunCache", "progress", "smooth",
           "run_summary", "plot_rm_fit", "plot_curves", "plot_controller", "plot_overoptimization",
           "LabelerExamples", "RewardModelFit", "RewardOffset", "TrainingCurves",
           "CurveExplorer", "OverOptimization", "SampleExplorer", "OptimumComparison", "OptimumSlider",
           "CriticView", "LossWeights"]


# ----------------------------------------------------------------------------- health signals
class HealthSignals(View):
    """PPO's health signals per iteration for a few runs, {label: RLHFConfig}: the clip fraction, the
    value loss and the KL to the SFT model (as ``train_rlhf`` logs them), and the exact entropy of each
    final policy and of the SFT model over whole responses (every response enumerated)."""

    def __init__(self, runs, configs):
        self.runs, self.configs = runs, dict(configs)

    def _prepare(self):
        trained = dict(zip(self.configs, self.runs.run_all(list(self.configs.values()))))
        self.histories = {label: hist for label, (_, hist) in trained.items()}
        tree = ResponseTree.build()
        # the SFT model's pass on this tree is Experiment 8's (shared): only the entropy is computed here
        self.entropy = {"SFT model": entropy(reference_logprobs(tree, self.runs.sft))}
        for label, (policy, _) in trained.items():
            self.entropy[label] = exact_entropy(tree, policy)

    def figure(self, window=5):
        fig = PngFigure(figsize=(13, 3.4), dpi=72)      # fixed margins (plot_rm_fit)
        axes = fig.subplots(1, 3, gridspec_kw=dict(left=0.055, right=0.99, bottom=0.15, top=0.91, wspace=0.2))
        panels = (("clip_frac", "clip fraction per iteration", "linear"),
                  ("value_loss", "value loss per iteration (log scale)", "log"),
                  ("kl", "KL to the SFT model per iteration (nats)", "linear"))
        for ax, (key, title, scale) in zip(axes, panels):
            for i, (label, hist) in enumerate(self.histories.items()):
                style = series(i)
                ax.plot(hist[key], color=style["color"], alpha=0.25, lw=1)
                ax.plot(smooth(hist[key], window), lw=2, label=label, **style)
            ax.set_yscale(scale)
            ax.set_title(title, fontsize=10, y=1.0)
            ax.set_xlabel("PPO iteration")
            few_ticks(ax.xaxis)                 # x only: small KLs and clip fractions want finer y ticks
        axes[0].legend(fontsize=8)
        fig.alt = ("Three panels over PPO iterations: the clip fraction, the value loss (log scale) and the KL to "
                   "the SFT model. Over the last third of the iterations: "
                   + "; ".join(f"{label}: clip fraction {last_third(h, 'clip_frac'):.3f}, value loss "
                               f"{last_third(h, 'value_loss'):.4f}, KL {last_third(h, 'kl'):.2f}"
                               for label, h in self.histories.items()) + ".")
        return fig

    def table(self):
        lines = [f"{'run':<22} {'clip fraction':>13} {'value loss':>11} {'KL':>6} {'entropy (nats)':>15}",
                 f"{'':<22} {'(last third of the iterations)':^32} {'final, exact':>22}"]
        for label, hist in self.histories.items():
            lines.append(f"{label:<22} {last_third(hist, 'clip_frac'):13.3f} {last_third(hist, 'value_loss'):11.4f} "
                         f"{last_third(hist, 'kl'):6.2f} {self.entropy[label]:15.3f}")
        lines.append(f"{'SFT model':<22} {'':>13} {'':>11} {'':>6} {self.entropy['SFT model']:15.3f}")
        return "\n".join(lines)

    def display(self):
        from IPython.display import display

        display(self.figure())
        print(self.table())
