"""Plots and sliders of Lab 12: the reward model's fit, PPO curves, the over-optimization curve,
and samples by temperature.

Nothing here trains anything by itself: the runs come from the lab's own ``train_rlhf``, which
``RunCache`` calls once per configuration and remembers. The sliders only re-draw cached numbers,
so each ``update`` is fast enough to follow a slider (a benchmark times them directly):

    explorer = CurveExplorer(sweep, load_reference_curves())
    explorer.update(0.1)            # -> PNG bytes of the six panels for beta = 0.1
    explorer.widget()               # the slider and its plot, for the notebook
"""

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.ticker import FixedLocator, FormatStrFormatter, NullLocator

from course_utils.runtime import grading, progress
from course_utils.views.base import PngFigure, canvas_png
from course_utils.labeler import gold_score
from course_utils.reward_model import digit_counts
from course_utils.tinylm import decode_prompts, decode_responses, make_batch, sample

REFERENCE_PATH = Path(__file__).resolve().parents[1] / "data" / "lab12_reference_curves.json"

# what train_rlhf logs, as the panels show it: (key, title, y-limits or None for automatic)
METRICS = [
    ("rm", "RM score (the proxy)", None),
    ("gold", "gold score (the labeler)", (-1.05, 1.05)),
    ("kl", "KL to the SFT model (nats)", None),
    ("acc", "accuracy (sampled)", (-0.02, 1.02)),
    ("malformed", "malformed fraction", (-0.02, 1.02)),
    ("digits", "digits per response", (0.9, 4.1)),
]
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def smooth(values, window=5):
    """Trailing moving average of ``window`` points (the first points average what exists so far)."""
    v = np.asarray(values, dtype=float)
    c = np.concatenate([[0.0], np.cumsum(v)])
    i = np.arange(len(v))
    start = np.maximum(i - window + 1, 0)
    return (c[i + 1] - c[start]) / (i + 1 - start)


# ----------------------------------------------------------------------------- Part A: the reward model
def plot_rm_fit(acc, ceiling, agreement, weights):
    """The reward model against its limits: held-out accuracy on the labeler's (noisy) pairs next
    to the noise ceiling, agreement with the noise-free gold order, and the learned digit weights."""
    fig = PngFigure(figsize=(11, 3.4), layout="constrained")
    a1, a2, a3 = fig.subplots(1, 3, width_ratios=[1.1, 0.8, 1.3])
    bars = a1.bar(["coin flip", "your RM", "noise ceiling"], [0.5, acc, ceiling],
                  color=["#bbbbbb", COLORS[0], "#444444"])
    a1.bar_label(bars, fmt="%.3f")
    a1.set_ylim(0.45, max(ceiling, acc) + 0.03)
    a1.set_title("held-out pairs of the noisy labeler")
    a1.set_ylabel("fraction of pairs ordered right")
    bars = a2.bar(["your RM"], [agreement], color=COLORS[2], width=0.5)
    a2.bar_label(bars, fmt="%.3f")
    a2.set_ylim(0.45, 1.02)
    a2.axhline(1.0, color="#444444", lw=1, ls="--")
    a2.set_title("pairs with different gold scores,\nnoise-free order")
    w = np.asarray(weights, dtype=float)
    a3.bar([str(d) for d in range(10)], w, color=COLORS[4])
    a3.axhline(0, color="black", lw=0.8)
    a3.set_xlabel("digit")
    a3.set_title("RM weight per occurrence of each digit")
    return fig


# ----------------------------------------------------------------------------- Part B: PPO runs
class RunCache:
    """Runs ``train_fn(sft, rm, rm_offset, cfg)`` once per configuration and remembers the result.

    ``run(cfg)`` -> (policy, history); ``sweep(base_cfg, betas)`` -> {beta: history}, with a
    progress bar over the runs. Re-create the cache (or call ``clear()``) after changing your code.
    While there is no reward model yet (``rm`` is None), both raise NotImplementedError, which the
    notebook's ``needs(...)`` turns into "Finish Task N first".
    """

    def __init__(self, train_fn, sft_model, rm, rm_offset):
        self.train_fn, self.sft, self.rm, self.rm_offset = train_fn, sft_model, rm, rm_offset
        self.runs = {}

    @staticmethod
    def key(cfg):
        return tuple(sorted(dataclasses.asdict(cfg).items()))

    def _check(self):
        if self.rm is None:
            raise NotImplementedError("no reward model yet: Part A (Tasks 1 and 2) is unfinished")

    def run(self, cfg):
        self._check()
        k = self.key(cfg)
        if k not in self.runs:
            self.runs[k] = self.train_fn(self.sft, self.rm, self.rm_offset, cfg)
        return self.runs[k]

    def sweep(self, base_cfg, betas):
        self._check()
        todo = [b for b in betas if self.key(dataclasses.replace(base_cfg, beta=b)) not in self.runs]
        bar = progress(betas, desc=f"{len(todo)} new PPO runs", leave=True)
        return {b: self.run(dataclasses.replace(base_cfg, beta=b))[1] for b in bar}

    def clear(self):
        self.runs.clear()


def _label(beta):
    return f"beta = {beta:g}"


def _kl_log_scale(ax, top):
    """Small and large KLs on one axis: linear up to 1 nat, logarithmic above."""
    ax.set_yscale("symlog", linthresh=1.0, linscale=1.5)
    ax.yaxis.set_major_locator(FixedLocator([t for t in (0, 0.5, 1, 3, 10, 30, 100) if t <= top * 1.2]))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.set_ylim(-0.05, top * 1.3)
    ax.set_title("KL to the SFT model (nats, log scale above 1)", fontsize=10)


def plot_curves(runs, title=None, target_kl=None, window=5):
    """The six panels of PPO training: {label: history} drawn over iterations (light: raw,
    dark: a moving average of ``window`` iterations). ``target_kl`` draws the controller's target."""
    fig = PngFigure(figsize=(12, 5.6), layout="constrained")
    axes = fig.subplots(2, 3, sharex=True).ravel()
    for i, (label, hist) in enumerate(runs.items()):
        color = COLORS[i % len(COLORS)]
        x = np.arange(len(hist["rm"]))
        for ax, (key, name, ylim) in zip(axes, METRICS):
            ax.plot(x, hist[key], color=color, alpha=0.25, lw=0.8)
            ax.plot(x, smooth(hist[key], window), color=color, lw=1.8, label=label)
    for ax, (key, name, ylim) in zip(axes, METRICS):
        ax.set_title(name, fontsize=10)
        if ylim:
            ax.set_ylim(*ylim)
        ax.grid(alpha=0.3)
    top = max(max(h["kl"]) for h in runs.values())
    if top > 5:
        _kl_log_scale(axes[2], top)
    if target_kl is not None:
        axes[2].axhline(target_kl, color="black", ls="--", lw=1, label=f"target {target_kl:g}")
    for ax in axes[3:]:
        ax.set_xlabel("PPO iteration")
    axes[1].legend(fontsize=8, loc="lower left")
    if target_kl is not None:
        axes[2].legend(fontsize=8)
    if title:
        fig.suptitle(title)
    return fig


def plot_controller(hist, target_kl, window=5):
    """The adaptive KL controller: KL against its target, and beta over iterations."""
    fig = PngFigure(figsize=(10, 3.2), layout="constrained")
    a1, a2 = fig.subplots(1, 2)
    x = np.arange(len(hist["kl"]))
    a1.plot(x, hist["kl"], color=COLORS[0], alpha=0.3, lw=0.8)
    a1.plot(x, smooth(hist["kl"], window), color=COLORS[0], lw=1.8, label="KL (moving average)")
    a1.axhline(target_kl, color="black", ls="--", lw=1, label=f"target {target_kl:g}")
    a1.axhspan(0.7 * target_kl, 1.3 * target_kl, color="black", alpha=0.06, label="target +- 30%")
    a1.set_title("KL to the SFT model")
    a1.legend(fontsize=8)
    a2.plot(x, hist["beta"], color=COLORS[1], lw=1.8)
    a2.set_title("beta, set by the controller")
    for ax in (a1, a2):
        ax.set_xlabel("PPO iteration")
        ax.grid(alpha=0.3)
    return fig


def plot_overoptimization(sweep, window=5):
    """Gold and RM score against sqrt(KL) (Gao et al. 2022), from every iteration of every run of
    the sweep {beta: history}: each dot is where one run was at one iteration (a moving average of
    ``window`` iterations), and the line joins a run's iterations in order."""
    fig = PngFigure(figsize=(11, 3.8), layout="constrained")
    axes = fig.subplots(1, 2, sharex=True)
    for i, (beta, hist) in enumerate(sweep.items()):
        color = COLORS[i % len(COLORS)]
        x = np.sqrt(np.maximum(smooth(hist["kl"], window), 0.0))
        for ax, key in zip(axes, ("gold", "rm")):
            y = smooth(hist[key], window)
            ax.plot(x, y, color=color, lw=0.8, alpha=0.5)
            ax.scatter(x, y, s=7, color=color, alpha=0.6, label=_label(beta))
    for ax, name in zip(axes, ("gold score (what we want)", "RM score (what we optimize)")):
        ax.set_title(name)
        ax.set_xlabel("sqrt(KL to the SFT model)")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower left")
    return fig


# ----------------------------------------------------------------------------- reference curves
def load_reference_curves(path=REFERENCE_PATH):
    """The course's reference sweep (data only): {"meta": {...}, "runs": {beta: [history per seed]}}
    with float keys; None if the file is missing."""
    path = Path(path)
    if not path.exists():
        return None
    raw = json.loads(path.read_text())
    return {"meta": raw["meta"], "runs": {float(b): runs for b, runs in raw["runs"].items()}}


class CurveExplorer:
    """A beta slider over a sweep {beta: history}: your run (solid) and the reference runs
    (dashed: the same seed; dotted: other seeds) in the six panels. ``update(beta)`` re-draws the
    cached curves and returns the PNG bytes.

    Axes, ticks and labels are drawn once; an update only draws the curves onto a copy of that
    background (blitting), which keeps it well under the 150 ms a slider may take.
    """

    def __init__(self, sweep, reference=None, window=5, dpi=75):
        self.sweep = dict(sorted(sweep.items()))
        self.ref = (reference or {}).get("runs", {})
        self.window = window
        self.fig = PngFigure(figsize=(12, 5.2), dpi=dpi, layout="constrained")
        self.canvas = FigureCanvasAgg(self.fig)
        axes = self.fig.subplots(2, 3, sharex=True).ravel()
        n_ref = max((len(v) for v in self.ref.values()), default=0)
        n_iters = max(len(h["rm"]) for h in self.sweep.values())
        self.lines = []
        for ax, (key, name, ylim) in zip(axes, METRICS):
            refs = [ax.plot([], [], color="#555555", lw=1.4 if j == 0 else 0.8, ls="--" if j == 0 else ":",
                            label=["reference (same seed)", "reference (other seeds)"][j] if j < 2 else None)[0]
                    for j in range(n_ref)]
            raw = ax.plot([], [], color=COLORS[0], alpha=0.25, lw=0.8)[0]
            mine = ax.plot([], [], color=COLORS[0], lw=2, label="your run")[0]
            self.lines.append((ax, key, raw, mine, refs))
            ax.set_title(name, fontsize=10)
            lo, hi = ylim or self._limits(key)
            if key == "kl" and hi > 5:
                _kl_log_scale(ax, hi)
                lo = -0.05
            ax.set_ylim(lo, hi)
            ax.set_xlim(0, n_iters - 1)
            ax.grid(alpha=0.3)
        for ax in axes[3:]:
            ax.set_xlabel("PPO iteration")
        axes[1].legend(fontsize=8, loc="lower left")
        self.title = self.fig.suptitle(self._title(next(iter(self.sweep))))
        self.canvas.draw()                                 # lays the figure out, title included
        self.fig.set_layout_engine("none")                 # ... and keeps that layout
        # the static parts, drawn once, are the background every update starts from
        artists = [self.title] + [a for *_, raw, mine, refs in self.lines for a in (raw, mine, *refs)]
        for a in artists:
            a.set_visible(False)
        self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(self.fig.bbox)
        for a in artists:
            a.set_visible(True)
        self._slider = self._out = None

    def _limits(self, key):
        vals = [v for h in self.sweep.values() for v in h[key]]
        vals += [v for runs in self.ref.values() for h in runs for v in h[key]]
        lo, hi = min(vals), max(vals)
        pad = 0.05 * (hi - lo or 1.0)
        return lo - pad, hi + pad

    def _title(self, beta):
        hist = self.sweep[beta]
        last = slice(-len(hist["gold"]) // 3, None)
        return (f"{_label(beta)}:  last third  gold {np.mean(hist['gold'][last]):+.2f}, "
                f"RM {np.mean(hist['rm'][last]):+.2f}, KL {np.mean(hist['kl'][last]):.2f}")

    def _references(self, beta):
        close = [b for b in self.ref if abs(b - beta) < 1e-9]
        return self.ref[close[0]] if close else []

    def update(self, beta):
        """Re-draw the panels for ``beta`` (one of the sweep's); returns the PNG bytes."""
        hist = self.sweep[beta]
        refs = self._references(beta)
        x = np.arange(len(hist["rm"]))
        self.canvas.restore_region(self.background)
        for ax, key, raw, mine, ref_lines in self.lines:
            raw.set_data(x, hist[key])
            mine.set_data(x, smooth(hist[key], self.window))
            for j, line in enumerate(ref_lines):
                y = smooth(refs[j][key], self.window) if j < len(refs) else []
                line.set_data(np.arange(len(y)), y)
            for line in (raw, mine, *ref_lines):           # the reference on top: visible if equal
                ax.draw_artist(line)
        self.title.set_text(self._title(beta))
        self.fig.draw_artist(self.title)
        png = canvas_png(self.canvas)
        if self._out is not None:
            from IPython.display import Image, display
            with self._out:
                self._out.clear_output(wait=True)
                display(Image(png))
        return png

    def widget(self, beta=None):
        """The slider and its plot (an ipywidgets VBox)."""
        import ipywidgets as widgets
        betas = list(self.sweep)
        start = beta if beta in self.sweep else betas[len(betas) // 2]
        self._slider = widgets.SelectionSlider(options=[(f"{b:g}", b) for b in betas], value=start,
                                               description="beta", continuous_update=True,
                                               layout=widgets.Layout(width="420px"))
        self._out = widgets.Output()
        self._slider.observe(lambda change: self.update(change["new"]), names="value")
        self.update(start)
        return widgets.VBox([self._slider, self._out])


# ----------------------------------------------------------------------------- samples by temperature
class SampleExplorer:
    """A temperature slider: the same prompts answered by several policies, with the labeler's
    gold score and the RM's score of each answer, and averages over ``n_stats`` prompts.

    All samples are drawn once, at construction (seeded); ``update(t)`` only formats them.
    """

    def __init__(self, models, rm, rm_offset, temperatures=(0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0),
                 n_show=10, n_stats=512, seed=0):
        import random
        self.models, self.temperatures = dict(models), list(temperatures)
        prompts, _ = make_batch(n_stats, random.Random(seed))
        self.table = {}
        with torch.no_grad():
            for t in self.temperatures:
                for name, model in self.models.items():
                    out = sample(model, prompts, temperature=t, generator=torch.Generator().manual_seed(seed))
                    gold = gold_score(out)
                    score = rm(digit_counts(out)) - rm_offset
                    self.table[t, name] = {
                        "prompts": decode_prompts(out)[:n_show], "resp": decode_responses(out)[:n_show],
                        "gold": gold[:n_show].tolist(), "rm": score[:n_show].tolist(),
                        "mean_gold": gold.mean().item(), "mean_rm": score.mean().item(),
                        "malformed": (gold < 0).float().mean().item(),
                        "acc": (gold > 0).float().mean().item()}
        self.n_show, self.n_stats = n_show, n_stats
        self._slider = self._html = None

    @staticmethod
    def _cell(resp, gold, score):
        color = {1.0: "#1a7f37", 0.0: "#9a6700", -1.0: "#cf222e"}[gold]
        text = resp if resp else "(blank)"
        return (f"<td style='font-family:monospace;color:{color};padding:1px 8px'>{text}</td>"
                f"<td style='color:#555;padding:1px 12px 1px 4px'>{gold:+.0f} / {score:+.2f}</td>")

    def update(self, temperature):
        """The HTML table for ``temperature`` (one of the precomputed ones)."""
        names = list(self.models)
        head = "".join(f"<th colspan=2>{n}</th>" for n in names)
        rows = []
        for i in range(self.n_show):
            first = self.table[temperature, names[0]]
            cells = "".join(self._cell(self.table[temperature, n]["resp"][i], self.table[temperature, n]["gold"][i],
                                       self.table[temperature, n]["rm"][i]) for n in names)
            rows.append(f"<tr><td style='font-family:monospace;padding:1px 8px'>{first['prompts'][i]}</td>{cells}</tr>")
        summary = "".join(
            f"<td colspan=2>gold {self.table[temperature, n]['mean_gold']:+.2f}, RM {self.table[temperature, n]['mean_rm']:+.2f}"
            f"<br>correct {self.table[temperature, n]['acc']:.0%}, malformed {self.table[temperature, n]['malformed']:.0%}</td>"
            for n in names)
        html = (f"<table style='border-collapse:collapse'><tr><th>prompt</th>{head}</tr>"
                f"<tr><td></td>{'<td><i>answer</i></td><td><i>gold / RM</i></td>' * len(names)}</tr>"
                + "".join(rows)
                + f"<tr style='border-top:1px solid #999'><td>mean of {self.n_stats}</td>{summary}</tr></table>")
        if self._html is not None:
            self._html.value = html
        return html

    def widget(self, temperature=1.0):
        """The slider and its table (an ipywidgets VBox)."""
        import ipywidgets as widgets
        start = temperature if temperature in self.temperatures else self.temperatures[0]
        self._slider = widgets.SelectionSlider(options=[(f"{t:g}", t) for t in self.temperatures], value=start,
                                               description="temperature", continuous_update=True,
                                               style={"description_width": "initial"},
                                               layout=widgets.Layout(width="420px"))
        self._html = widgets.HTML()
        self._slider.observe(lambda change: self.update(change["new"]), names="value")
        self.update(start)
        return widgets.VBox([self._slider, self._html])


__all__ = ["METRICS", "grading", "progress", "smooth", "plot_rm_fit", "RunCache", "plot_curves",
           "plot_controller", "plot_overoptimization", "load_reference_curves", "CurveExplorer",
           "SampleExplorer"]
