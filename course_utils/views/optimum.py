"""Views of Lab 12's exact optimum (Experiment 8): what PPO found against what it was chasing.

    views.OptimumComparison(runs, RLHFConfig()).show()  # PPO's sweep against pi* at each beta
    views.OptimumSlider(runs).show()                    # a beta slider over the exact optimum
    rows = compare_sweep(sweep, sft, rm, rm_offset)     # sweep: {beta: trained policy}
    print_sweep(rows); fig = plot_sweep(rows)

Everything is exact: each policy is enumerated over every response (course_utils.response_tree) and
the optimum solved on that tree (course_utils.tree_optimum), no sampling. The views follow the protocol of ``views.base`` and take a ``runs.RunCache``.
"""

import dataclasses
import math
import re
import weakref

import numpy as np
import torch

from course_utils.response_tree import ALL_PROMPTS, ResponseTree
from course_utils.tree_optimum import TiltedOptimum, exact_optimum, policy_stats
from course_utils.runs import SWEEP_BETAS
from course_utils.views.base import FastFigure, Figure, PngFigure, View, few_ticks, log_axis, palette, show_slider

BETA_ZERO = 1e-3    # beta = 0 (no KL penalty) is shown at this beta: its optimum is the RM's argmax
# OptimumSlider's readout above the panels: (word, the number's key, its format). Each number is written just
# right of its word, the words once in the static background (a frame draws only the numbers' glyphs: a glyph
# costs ~0.07 ms); the six spaced evenly, READOUT_GAP ems between the widest number one can show and the next word
READOUT = [("exact optimum at β =", "beta", "{:.3g}"), ("gold", "gold", "{:+.2f}"), ("accuracy", "acc", "{:.2f}"),
           ("RM score", "reward", "{:+.2f}"), ("KL", "kl", "{:.2f}"), ("digits", "digits", "{:.2f}")]
READOUT_GAP = 2.5
READOUT_SIZE = 12           # points
BETA_SLIDER = {"base": 10, "min": -3, "max": 1, "step": 0.05}     # OptimumSlider's: 1e-3 .. 10, log scale


def _decades(low, high):
    """The powers of ten from below ``low`` to above ``high``: a log axis's ticks."""
    return [10.0 ** e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)]


_ON_TREE = weakref.WeakKeyDictionary()        # {model: (what it was computed for, tree tensors)}


def _key(prompts, model, name, args):
    """What a result on the tree of ``prompts`` was computed for: the model's weights as they are now."""
    params = list(model.parameters())
    return tuple(prompts), name, args, tuple(p.data_ptr() for p in params), tuple(p._version for p in params)


def _once_per_tree(tree, model, compute, *args):
    """``compute(model, *args)`` on ``tree``, computed once per tree while the model's weights stay as
    they are: what the comparison and the slider of Experiment 8 share."""
    key = _key(tree.prompts, model, compute.__name__, args)
    cached = _ON_TREE.setdefault(model, {}).get(compute.__name__)
    if cached is None or cached[0] != key:
        cached = _ON_TREE[model][compute.__name__] = (key, compute(model, *args))
    return cached[1]


def reference_logprobs(tree, model):
    """``tree.logprobs(model)`` of the reference (the SFT model), once per tree (``_once_per_tree``):
    the exact pass over every response to the 100 prompts, most of a slider's first draw."""
    return _once_per_tree(tree, model, tree.logprobs)


def reference_logprobs_on(tree, model):
    """``tree.logprobs(model)`` on a tree of some of the 100 prompts: the rows of the 100 prompts' pass when
    ``reference_logprobs`` has made it (Experiment 8) with the model's weights as they are now, else
    computed. The same numbers bit for bit: a prompt's log-probs do not depend on the prompts passed with
    it (tests/test_lab12_views.py)."""
    cached = _ON_TREE.get(model, {}).get("logprobs")
    if cached is None or cached[0] != _key(ALL_PROMPTS, model, "logprobs", ()):
        return tree.logprobs(model)
    rows = torch.tensor([ALL_PROMPTS.index(p) for p in tree.prompts])
    return [t[rows] for t in cached[1]]


def rm_rewards(tree, rm, rm_offset):
    """``tree.rm_rewards(rm, rm_offset)``, once per tree (``_once_per_tree``)."""
    return _once_per_tree(tree, rm, tree.rm_rewards, float(rm_offset))


def stats_at_beta(stats, beta):
    """A policy's ``tree_optimum.Stats`` (without kl_to_opt) at another beta: of them only J = E[r] - beta KL
    depends on beta, so one pass over the SFT model serves every beta of a sweep. The same numbers, bit
    for bit, as ``policy_stats`` at that beta."""
    if stats.kl_to_opt is not None:
        raise ValueError("kl_to_opt is KL(pi || pi*) at this beta's optimum: solve the optimum at the other beta")
    pp = dict(stats.per_prompt, objective=stats.per_prompt["reward"] - beta * stats.per_prompt["kl"])
    return dataclasses.replace(stats, beta=beta, objective=float(pp["objective"].mean()), per_prompt=pp)


def _policy(entry):
    """A sweep entry may be the policy, or a (policy, history) pair as train_rlhf returns it."""
    return entry[0] if isinstance(entry, (tuple, list)) else entry


def compare_sweep(sweep, sft_model, rm, rm_offset, tree=None):
    """Exact statistics of each PPO policy of a beta sweep and of the optimum at the same beta.

    Args:
        sweep: {beta: policy or (policy, history)}; sft_model: the reference (the policy's start);
        rm, rm_offset: the reward r(y) = rm(digit_counts(y)) - rm_offset that PPO maximized.
    Returns:
        a list of dicts, one per beta (ascending): beta, beta_used (BETA_ZERO for beta = 0),
        ppo and opt (course_utils.tree_optimum.Stats; ppo.kl_to_opt = KL(pi_PPO || pi*)), sft (Stats).
    """
    tree = tree or ResponseTree.build()
    ref = reference_logprobs(tree, sft_model)
    rewards = rm_rewards(tree, rm, rm_offset)
    sft = policy_stats(tree, ref, ref, rewards, 1.0)             # the reference: one pass, then at each beta
    rows = []
    for beta in sorted(sweep):
        b = beta if beta > 0 else BETA_ZERO
        opt = exact_optimum(tree, ref, rewards, b)
        ppo = policy_stats(tree, tree.logprobs(_policy(sweep[beta])), ref, rewards, b, optimum=opt)
        rows.append({"beta": beta, "beta_used": b, "ppo": ppo, "opt": opt.stats, "sft": stats_at_beta(sft, b)})
    return rows


def print_sweep(rows):
    """One line per beta: J, gold and accuracy of PPO against the optimum, and KL(PPO || pi*)."""
    print(f"{'beta':>6} {'J(PPO)':>8} {'J*':>8} {'KL(PPO||pi*)':>13} {'KL(PPO||ref)':>13} {'KL(pi*||ref)':>13} "
          f"{'gold PPO':>9} {'gold pi*':>9} {'acc PPO':>8} {'acc pi*':>8}")
    for r in rows:
        p, o = r["ppo"], r["opt"]
        print(f"{r['beta']:>6g} {p.objective:>+8.3f} {o.objective:>+8.3f} {p.kl_to_opt:>13.3f} {p.kl:>13.3f} "
              f"{o.kl:>13.3f} {p.gold:>+9.3f} {o.gold:>+9.3f} {p.acc:>8.3f} {o.acc:>8.3f}")


def plot_sweep(rows):
    """Three panels over the sweep's betas: J of PPO against J*, the KLs, and the gold scores.

    Returns a matplotlib Figure; ``display(fig)`` shows it in a notebook.
    """
    fig = PngFigure(figsize=(13, 3.8), dpi=80)
    fig.subplots_adjust(left=0.04, right=0.99, bottom=0.2, top=0.92, wspace=0.17)   # fixed: a layout engine costs 0.3 s
    axes = fig.subplots(1, 3)
    x = np.arange(len(rows))
    labels = [f"{r['beta']:g}" if r["beta"] > 0 else f"0\n(at {BETA_ZERO:g})" for r in rows]
    w = 0.27
    get = lambda who, key: np.array([getattr(r[who], key) for r in rows])
    c = palette()
    opt_style = dict(color=c[0], hatch="//", edgecolor="white")     # bars told apart by hatching too
    ppo_style = dict(color=c[1])

    ax = axes[0]
    ax.bar(x - w / 2, get("opt", "objective"), w, label="exact optimum J*", **opt_style)
    ax.bar(x + w / 2, get("ppo", "objective"), w, label="PPO policy J", **ppo_style)
    ax.axhline(0, color="k", lw=0.6)
    for xi, j_opt, j_ppo in zip(x, get("opt", "objective"), get("ppo", "objective")):
        ax.annotate(f"gap\n{j_opt - j_ppo:.3f}", (xi, max(j_opt, j_ppo, 0)), textcoords="offset points",
                    xytext=(0, 3), ha="center", fontsize=8)
    ax.margins(y=0.2)
    ax.set_title("J = E[r] − β·KL(π ‖ π_ref): optimum vs PPO", y=1.0)   # y given: no automatic placement (slow)

    ax = axes[1]
    ax.bar(x - w, get("ppo", "kl_to_opt"), w, label="KL(PPO ‖ π*)", color=c[2], hatch="..", edgecolor="white")
    ax.bar(x, get("ppo", "kl"), w, label="KL(PPO ‖ π_ref)", **ppo_style)
    ax.bar(x + w, get("opt", "kl"), w, label="KL(π* ‖ π_ref)", **opt_style)
    ax.set_yscale("log")
    ax.set_title("how far PPO is from the optimum (nats)", y=1.0)

    ax = axes[2]
    ax.bar(x - w / 2, get("opt", "gold"), w, label="exact optimum", **opt_style)
    ax.bar(x + w / 2, get("ppo", "gold"), w, label="PPO policy", **ppo_style)
    ax.axhline(rows[0]["sft"].gold, color="gray", ls="--", label="SFT model")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_ylim(-1.05, 1.05)
    ax.set_title("gold score (the labeler's truth)", y=1.0)
    for ax in axes:
        ax.set_xticks(x, labels)
        ax.set_xlabel("β")
        ax.legend(fontsize=8)
    fig.alt = ("Three bar panels over the beta sweep, PPO's policy next to the exact optimum at each beta: the "
               "objective J, the KLs (log scale), and the gold score. "
               + "; ".join(f"beta {r['beta']:g}: J of PPO {r['ppo'].objective:+.3f} against J* {r['opt'].objective:+.3f}, "
                           f"KL(PPO || pi*) {r['ppo'].kl_to_opt:.3f}, gold of PPO {r['ppo'].gold:+.2f} against "
                           f"{r['opt'].gold:+.2f}" for r in rows) + f"; the SFT model's gold is {rows[0]['sft'].gold:+.2f}.")
    return fig


class OptimumComparison(View):
    """PPO's policies of the sweep (a configuration of ``runs`` per beta) against the exact optimum
    at the same beta: the table of ``print_sweep`` and the panels of ``plot_sweep``."""

    def __init__(self, runs, base_cfg, betas=SWEEP_BETAS):
        self.runs, self.base_cfg, self.betas = runs, base_cfg, betas

    def _prepare(self):
        rm, rm_offset = self.runs.reward()
        policies = {b: policy for b, (policy, _) in self.runs.sweep(self.base_cfg, self.betas).items()}
        self.rows = compare_sweep(policies, self.runs.sft, rm, rm_offset)

    def display(self):
        from IPython.display import display

        print_sweep(self.rows)
        display(plot_sweep(self.rows))


class OptimumSlider(View):
    """The exact optimum's gold score, RM score and KL as beta moves, and its top responses to one prompt.

    The tree, the reference's log-probs, the rewards and the labeler's features are computed once
    (``tree_optimum.TiltedOptimum``); a new beta is then a softmax over the reward levels of each
    prompt, pi* = pi_ref exp(r / beta) / Z (the sequence-level form of exact_optimum's token-level
    product), and a redraw of the moving parts only. ``update(beta)`` takes a few tens of ms.
    """

    def __init__(self, runs, betas=None, prompt="7+5=", prompts=None):
        self.runs, self.prompt, self.prompts = runs, prompt, prompts      # prompts: the tree's (all 100)
        self.betas = np.geomspace(BETA_ZERO, 10, 41) if betas is None else np.asarray(betas, dtype=float)

    def _prepare(self):
        rm, rm_offset = self.runs.reward()
        self.tree = ResponseTree.build(self.prompts)
        self.optimum = TiltedOptimum(self.tree, reference_logprobs(self.tree, self.runs.sft),
                                     rm_rewards(self.tree, rm, rm_offset))
        self.seq_ref = self.optimum.seq_ref                                              # (P, N)
        self.p = self.tree.prompts.index(self.prompt)
        self.curves = self.optimum.stats_many(self.betas)                               # {column: (41,)}
        self.sft = self.stats(math.inf)
        self._build_figure()

    def stats(self, beta):
        """Exact E[r], KL(pi* || pi_ref), gold, acc, malformed, digits of the optimum at beta (floats);
        beta = inf gives pi_ref itself (``TiltedOptimum.stats``)."""
        return self.optimum.stats(beta)

    def _build_figure(self):
        self.fig = Figure(figsize=(14, 3.8), dpi=80)
        self.fig.subplots_adjust(left=0.04, right=0.99, bottom=0.15, top=0.8, wspace=0.3)
        axes = self.fig.subplots(1, 4, width_ratios=[1, 1, 1, 1.1])
        spec = [("gold", "gold score of π*", palette()[0]),
                ("reward", "RM score E[r] of π*", palette()[1]),
                ("kl", "KL(π* ‖ π_ref) (nats)", palette()[4])]
        self.moving = []
        for ax, (key, title, color) in zip(axes, spec):
            ax.plot(self.betas, self.curves[key], color=color, label="π*")
            if key == "gold":
                ax.plot(self.betas, self.curves["acc"], color=color, ls=":", label="accuracy of π*")
                ax.set_ylim(-1.05, 1.05)
            if key == "kl":
                low, high = max(self.curves["kl"].min(), 1e-4) / 2, self.curves["kl"].max() * 2
                log_axis(ax, "y", [d for d in _decades(low, high) if low <= d <= high])   # a tick off the view is made, not drawn
                ax.set_ylim(low, high)
            else:
                ax.axhline(self.sft[key], color="gray", ls="--", lw=1, label="SFT model")
                few_ticks(ax.yaxis)
            log_axis(ax, "x", _decades(self.betas[0], self.betas[-1]))
            ax.set_xlabel("β")
            ax.set_title(title, fontsize=10, y=1.0)     # y given: no automatic title placement (slow)
        axes[0].legend(fontsize=8, loc="lower right")  # one legend: the other panels draw the same styles
        for ax in axes[:3]:
            self.moving.append(ax.plot([], [], "o", color="k", ms=7)[0])
        self.keys = [k for k, _, _ in spec]
        ax = self.bar_ax = axes[3]
        ax.set_xlim(0, 1.25)
        few_ticks(ax.xaxis)
        ax.set_ylim(5.6, -0.6)
        ax.set_yticks([])
        ax.set_xlabel("probability (…: no EOS)")
        ax.set_title(f"top responses of π* to {self.prompt} (gray: π_ref)", fontsize=10, y=1.0)
        self.bars_opt = ax.barh(np.arange(6) - 0.2, np.zeros(6), 0.4, color=palette()[0], hatch="//", edgecolor="white")
        self.bars_ref = ax.barh(np.arange(6) + 0.2, np.zeros(6), 0.4, color="gray")
        self.labels = [ax.text(0.02, i, "", va="center", fontsize=9) for i in range(6)]
        self.readout = []
        for x, word, space in self._readout_layout():      # the words are drawn once, in the background
            self.fig.text(x, 0.93, word, ha="right", fontsize=READOUT_SIZE)
            self.readout.append(self.fig.text(x + space, 0.93, "", fontsize=READOUT_SIZE))    # the numbers only
        self.moving += list(self.bars_opt) + list(self.bars_ref) + self.labels + self.readout
        self.frame = FastFigure(self.fig, self.moving)

    def update(self, beta):
        """Solve at ``beta``, move the markers and bars, redraw them only; returns the PNG bytes."""
        self.prepare()
        st = self.stats(beta)
        for marker, key in zip(self.moving, self.keys):
            marker.set_data([beta], [st[key]])
        log_pi = self.optimum.response_logprobs(beta, self.p)
        top, shown = log_pi.topk(6).indices.tolist(), []
        for i, (n, text) in enumerate(zip(top, self.tree.answers(top))):
            prob, prob_ref = math.exp(log_pi[n]), math.exp(self.seq_ref[self.p, n])
            self.bars_opt[i].set_width(prob)
            self.bars_ref[i].set_width(prob_ref)
            shown.append("(blank)" if not text else repr(text[:-1]) + " (no EOS)" if text.endswith("…")
                         else repr(text))                      # the alt text's words
            self.labels[i].set_text(text or "(blank)")        # the bar's, as decode_responses writes it: fewer glyphs
            inside = max(prob, prob_ref) > 0.7                       # a long bar: write on it
            self.labels[i].set_position((0.02, i - 0.2) if inside else (max(prob, prob_ref) + 0.02, i))
            self.labels[i].set_color("white" if inside else "black")
        self.beta, self.st, self.top = beta, st, [(shown[i], self.bars_opt[i].get_width(),
                                                   self.bars_ref[i].get_width()) for i in range(3)]
        for text, (_, key, form) in zip(self.readout, READOUT):
            text.set_text(form.format(beta if key == "beta" else st[key]))
        return self.frame.png()

    def _readout_layout(self):
        """(figure x where each READOUT word ends, the space before its number): the line centred, the words
        and numbers measured once (a number's widest over the betas the slider shows, digits all as wide)."""
        from matplotlib.backends.backend_agg import RendererAgg
        from matplotlib.font_manager import FontProperties

        renderer, font = RendererAgg(1, 1, self.fig.dpi), FontProperties(size=READOUT_SIZE)
        width = lambda text: renderer.get_text_width_height_descent(text, font, ismath=False)[0] / self.fig.bbox.width
        slider = BETA_SLIDER["base"] ** np.arange(BETA_SLIDER["min"], BETA_SLIDER["max"] + 1e-9, BETA_SLIDER["step"])
        widest = lambda form, values: max((re.sub("[0-9]", "0", form.format(v)).replace("-", "+") for v in values), key=len)
        words = [width(word) for word, _, _ in READOUT]
        numbers = [width(widest(form, slider if key == "beta" else self.curves[key])) for _, key, form in READOUT]
        space, gap = width(" "), READOUT_GAP * READOUT_SIZE / 72 * self.fig.dpi / self.fig.bbox.width     # an em: the size
        x = 0.5 - (sum(words) + sum(numbers) + len(READOUT) * space + (len(READOUT) - 1) * gap) / 2
        ends = []
        for w_word, w_number in zip(words, numbers):
            ends.append(x + w_word)
            x += w_word + space + w_number + gap
        return [(end, word, space) for end, (word, _, _) in zip(ends, READOUT)]

    def caption(self):
        return ""

    def alt(self):
        st = self.st
        top = "; ".join(f"{text} {p:.2f} (pi_ref {q:.2f})" for text, p, q in self.top)
        return (f"Exact optimum pi* at beta = {self.beta:.3g}: gold {st['gold']:+.2f}, accuracy {st['acc']:.2f}, "
                f"RM score {st['reward']:+.2f}, KL {st['kl']:.2f}, digits {st['digits']:.2f}. Three panels show the "
                f"gold score, the RM score and the KL of pi* against beta from 0.001 to 10 (log scale), with the SFT "
                f"model's level dashed; the fourth, pi*'s top responses to {self.prompt}: {top}.")

    def display(self):
        """A log-scale beta slider (1e-3 .. 10, starting at 0.1) with the plot below it."""
        import ipywidgets as widgets

        slider = widgets.FloatLogSlider(value=0.1, **BETA_SLIDER, description="beta", continuous_update=False,
                                        readout_format=".3g")
        self.widget = show_slider(self, slider, "beta")


__all__ = ["compare_sweep", "stats_at_beta", "print_sweep", "plot_sweep", "OptimumComparison", "OptimumSlider", "BETA_ZERO",
           "reference_logprobs", "reference_logprobs_on", "rm_rewards"]
