"""Plots and the beta slider of the Beyond PPO notebook. They draw cached numbers only (a results dict
of course_staff.beyond.results), so they run in milliseconds and train nothing.

    display(plot_summary(res))          # gold and the distances to both optima, over beta
    display(plot_dpo_epochs(res))       # DPO epoch by epoch: gold (exact) and held-out pair accuracy
    display(plot_budget(res, 0.1))      # PPO and GRPO over the same CPU time
    MethodsSlider(res).show()           # every policy at one beta, on a slider
"""

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from course_utils.views.base import MARKERS, PngFigure, View, canvas_png, palette, show_slider

NAMES = ("optimum RM", "optimum labeler", "PPO", "DPO", "GRPO", "GRPO, KL in reward")
COLORS = dict(zip(NAMES, palette()))                        # matplotlib's colour-blind-safe petroff10
MARKER = dict(zip(NAMES, MARKERS))                          # and a marker each: never colour alone
OPTIMUM_OF = {"optimum RM": "rm", "optimum labeler": "gold"}


def policies(res):
    """The names of the policies held against the optima: both optima, then the methods."""
    return list(OPTIMUM_OF) + list(res["methods"])


def figures(res, beta, name):
    """{"rm": ..., "gold": ..., "top": ...} of one policy (a method or an optimum) at beta."""
    run = res["runs"][repr(beta)]
    return run["optimum"][OPTIMUM_OF[name]] if name in OPTIMUM_OF else run[name]


def _sft_line(ax, res, key="gold"):
    ax.axhline(res["sft"][key], color="gray", ls="--", lw=1, label="SFT model")


def plot_summary(res):
    """Three panels over beta: the gold score of every policy, and its KL to each optimum."""
    fig = PngFigure(figsize=(14, 4), layout="constrained")
    axes = fig.subplots(1, 3)
    betas = res["betas"]
    for name in policies(res):
        style = dict(color=COLORS[name], marker=MARKER[name], ls=":" if name in OPTIMUM_OF else "-", label=name)
        axes[0].plot(betas, [figures(res, b, name)["rm"]["gold"] for b in betas], **style)
        for ax, o in zip(axes[1:], ("rm", "gold")):
            if OPTIMUM_OF.get(name) != o:       # an optimum is at distance 0 from itself
                ax.plot(betas, [figures(res, b, name)[o]["kl_to_opt"] for b in betas], **style)
    _sft_line(axes[0], res)
    axes[0].set_ylim(-1.05, 1.05)
    axes[0].set_title("gold score (the labeler's truth), exact")
    axes[1].set_title(r"KL($\pi\,\|\,\pi^*_{RM}$): distance to the RM's optimum")
    axes[2].set_title(r"KL($\pi\,\|\,\pi^*_{labeler}$): distance to the labeler's optimum")
    for ax in axes[1:]:
        ax.set_yscale("log")
        ax.set_ylabel("nats per response")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xticks(betas, [f"{b:g}" for b in betas])
        ax.minorticks_off()
        ax.set_xlabel(r"$\beta$")
        ax.legend(fontsize=7)
    fig.alt = ("Three panels over beta (log scale): the exact gold score of every policy, and its KL to the RM's "
               "optimum and to the labeler's optimum (log scale). Gold at each beta: "
               + "; ".join(f"beta {b:g}: " + ", ".join(f"{n} {figures(res, b, n)['rm']['gold']:+.2f}" for n in policies(res))
                           for b in betas) + f"; the SFT model's gold is {res['sft']['gold']:+.2f}.")
    return fig


def plot_dpo_epochs(res):
    """DPO epoch by epoch at every beta: the exact gold score, and the implicit reward's accuracy on the
    held-out pairs next to the reward model's and the noise ceiling."""
    fig = PngFigure(figsize=(12, 3.8), layout="constrained")
    ax_gold, ax_acc = fig.subplots(1, 2)
    cmap = palette()[:len(res["betas"])]
    for color, beta in zip(cmap, res["betas"]):
        epochs = figures(res, beta, "DPO")["epochs"]
        x = np.arange(1, len(epochs) + 1)
        ax_gold.plot(x, [e["gold"] for e in epochs], "o-", color=color, label=rf"DPO, $\beta$ = {beta:g}")
        ax_gold.axhline(figures(res, beta, "PPO")["rm"]["gold"], color=color, ls=":", lw=1)
        ax_acc.plot(x, [e["held_acc"] for e in epochs], "o-", color=color, label=rf"$\beta$ = {beta:g}")
        ax_acc.plot(x, [e["train_acc"] for e in epochs], "x--", color=color, lw=0.8)
    _sft_line(ax_gold, res)
    ax_gold.set_title("gold score of DPO after each epoch (dotted: PPO at the same beta)", fontsize=10)
    ax_acc.axhline(res["rm"]["held_acc"], color="tab:green", lw=1, label="reward model (held out)")
    ax_acc.axhline(res["rm"]["ceiling"], color="k", lw=1, ls="--", label="noise ceiling")
    ax_acc.set_title("implicit reward's pair accuracy: held out (o), training pairs (x)", fontsize=10)
    for ax in (ax_gold, ax_acc):
        ax.set_xlabel("epoch over the ranked pairs")
        ax.set_xticks(x)
        ax.legend(fontsize=7)
    fig.alt = ("Two panels over DPO's epochs, one line per beta: the exact gold score after each epoch (dotted: "
               "PPO at the same beta), and the implicit reward's pair accuracy, held out and on the training pairs, "
               f"against the reward model's {res['rm']['held_acc']:.3f} and the noise ceiling "
               f"{res['rm']['ceiling']:.3f}. After the last epoch: "
               + "; ".join(f"beta {b:g}: gold {figures(res, b, 'DPO')['epochs'][-1]['gold']:+.2f}, held-out accuracy "
                           f"{figures(res, b, 'DPO')['epochs'][-1]['held_acc']:.3f}" for b in res["betas"]) + ".")
    return fig


def plot_budget(res, beta):
    """PPO and both GRPOs at one beta over their CPU seconds: sampled gold score and KL to the SFT model."""
    fig = PngFigure(figsize=(12, 3.6), layout="constrained")
    axes = fig.subplots(1, 2)
    ends = []
    for name in res["methods"]:
        run = figures(res, beta, name)
        if "curve" not in run:
            continue
        c = run["curve"]
        n = len(c["gold"])
        x = c.get("cpu_at") or list(np.arange(1, n + 1) * run["cpu"] / n)     # PPO: its mean pace
        label = f"{name} ({n} iterations, {run['cpu']:.1f} s CPU)"
        axes[0].plot(x, c["gold"], color=COLORS[name], marker=MARKER[name], markevery=0.1, lw=1, label=label)
        axes[1].plot(x, c["kl"], color=COLORS[name], marker=MARKER[name], markevery=0.1, lw=1, label=label)
        ends.append(f"{label}: gold {c['gold'][-1]:+.2f}, KL {c['kl'][-1]:.2f} at the end")
    _sft_line(axes[0], res)
    axes[0].set_ylim(-1.05, 1.05)
    axes[0].set_title(rf"gold score of the samples, $\beta$ = {beta:g}", fontsize=10)
    axes[1].set_yscale("symlog", linthresh=1.0)
    axes[1].set_title("KL to the SFT model of the samples (nats, log above 1)", fontsize=10)
    for ax in axes:
        ax.set_xlabel("CPU seconds (one thread)")
        ax.legend(fontsize=7)
    fig.alt = (f"Two panels at beta = {beta:g} over CPU seconds: the gold score of the samples and their KL to the "
               "SFT model, for " + "; ".join(ends) + ".")
    return fig


class MethodsSlider(View):
    """Every policy at one beta of the cache: gold and accuracy, the distances to both optima, and the
    most likely answers to the cached prompt (course_utils.views.base's protocol: ``show()``, and
    ``update(beta)`` -> PNG bytes of the frame, ``caption()`` the line under the slider)."""

    def __init__(self, res, beta=None):
        self.res, self.beta = res, res["betas"][1] if beta is None else beta
        self.names = policies(res)

    def _prepare(self):
        self.fig = Figure(figsize=(15, 4.2), dpi=80)
        FigureCanvasAgg(self.fig)
        self.fig.subplots_adjust(left=0.04, right=0.99, bottom=0.24, top=0.84, wspace=0.3)
        self.axes = self.fig.subplots(1, 3, width_ratios=[1, 1, 1.3])

    def _bars(self, ax, keys, beta, log=False):
        x = np.arange(len(self.names))
        w = 0.8 / len(keys)
        for i, (key, label, hatch) in enumerate(keys):
            values = [key(figures(self.res, beta, n)) for n in self.names]
            ax.bar(x + (i - (len(keys) - 1) / 2) * w, values, w, color=[COLORS[n] for n in self.names],
                   hatch=hatch, edgecolor="white", label=label)
        ax.set_xticks(x, self.names, rotation=30, ha="right", fontsize=8)
        if log:
            ax.set_yscale("log")

    def draw_frame(self, beta):
        ax_gold, ax_kl, ax_top = self.axes
        for ax in self.axes:
            ax.clear()
        self._bars(ax_gold, [(lambda f: f["rm"]["gold"], "gold score", None),
                             (lambda f: f["rm"]["acc"], "accuracy", "//")], beta)
        _sft_line(ax_gold, self.res)
        ax_gold.axhline(self.res["sft"]["acc"], color="gray", ls=":", lw=1, label="SFT accuracy")
        ax_gold.set_ylim(-1.05, 1.05)
        ax_gold.legend(fontsize=7, loc="lower left")
        ax_gold.set_title("gold score (plain) and accuracy (hatched)", fontsize=10)
        floor = 1e-3          # an optimum is at distance 0 from itself: drawn at the floor
        self._bars(ax_kl, [(lambda f: max(f["rm"]["kl_to_opt"], floor), r"to $\pi^*_{RM}$", None),
                           (lambda f: max(f["gold"]["kl_to_opt"], floor), r"to $\pi^*_{labeler}$", "//")],
                   beta, log=True)
        ax_kl.set_ylim(floor / 2, 100)
        ax_kl.set_title(r"KL($\pi\,\|\,\pi^*$) to the RM's optimum (plain), the labeler's (hatched)", fontsize=10)
        ax_top.axis("off")
        ax_top.set_title(f"most likely answers to {self.res['prompt']}", fontsize=10)
        rows = [("SFT model", self.res["sft_top"])] + [(n, figures(self.res, beta, n)["top"]) for n in self.names]
        for i, (name, top) in enumerate(rows):
            shown = "   ".join(f"{answer_text(t)} {p:.2f}" for t, p in top[:4])
            ax_top.text(0.0, 1 - i / len(rows), f"{name}:", fontsize=9, color=COLORS.get(name, "gray"),
                        transform=ax_top.transAxes, va="top", weight="bold")
            ax_top.text(0.0, 1 - (i + 0.45) / len(rows), shown, fontsize=9, transform=ax_top.transAxes, va="top")
        self.fig.suptitle(rf"$\beta$ = {beta:g}", fontsize=12)

    def update(self, cached_beta):
        """Draw every policy at one of the cached betas; returns the frame's PNG bytes."""
        self.prepare()
        self.beta = cached_beta
        self.draw_frame(cached_beta)
        self.fig.canvas.draw()
        return canvas_png(self.fig.canvas)

    def caption(self):
        gold = {m: figures(self.res, self.beta, m)["rm"]["gold"] for m in self.res["methods"]}
        return (f"beta = {self.beta:g}: gold " + ", ".join(f"{m} {g:+.2f}" for m, g in gold.items())
                + f" (SFT model {self.res['sft']['gold']:+.2f})")

    def alt(self):
        return (f"Every policy at beta = {self.beta:g}: bars of the gold score and the accuracy, bars of the KL to "
                f"the RM's optimum and to the labeler's (log scale), and each policy's most likely answers to "
                f"{self.res['prompt']}. " + self.caption() + ".")

    def display(self):
        """A SelectionSlider over the cached betas, the caption, and the frame."""
        import ipywidgets as W
        slider = W.SelectionSlider(options=[(f"{b:g}", b) for b in self.res["betas"]], value=self.beta,
                                   description="beta", continuous_update=False)
        show_slider(self, slider, "beta")


def answer_text(response):
    """A response as the notebook prints it: '12', '(blank)', '1266…' (no EOS)."""
    if response == "<eos>":
        return "(blank)"
    return response[:-5] if response.endswith("<eos>") else response + "…"


__all__ = ["answer_text", "policies", "figures", "plot_summary", "plot_dpo_epochs", "plot_budget", "MethodsSlider"]
