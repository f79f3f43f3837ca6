"""Plots and sliders of Lab 11 (the language model as a policy).

Every view takes the student's functions as arguments (nothing here solves a task) and separates
the work a slider does from the widget that shows it:

    view = TemperatureView(model, "7+5=", generate)     # caches the logits of the toy LM
    png = view.update(0.7)                              # re-plot at T = 0.7: PNG bytes, < 150 ms
                                                        # (the first call also draws the axes, ~1 s)
    view.show()                                         # slider + plot in JupyterLab

    BetaView(ref_first, ref_second, rewards, tilted_optimum, kl_objective).update(0.3)
    KLEstimatorExperiment(model, "7+5=", kl_estimators).rows      # bias and std of k1, k2, k3
    SoftValueView(ref_first, ref_second, rewards, token_level_optimum, tilted_optimum).update(0.3)

A constructor calls the student's functions (no drawing yet), so an unfinished task raises its
NotImplementedError inside the notebook's ``with needs(...)`` block (a one-line message, no
traceback). The figure is drawn once, on the first ``update``; later errors, raised while a slider
moves, are printed under the slider. While nbgrader grades a notebook (NBGRADER_EXECUTION is set)
``show`` draws nothing and the KL experiment draws fewer samples.
"""


import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from course_utils.runtime import grading
from course_utils.views.base import canvas_png, figure_png
from course_utils.tinylm import TOKENS, VOCAB_SIZE, decode_responses
from course_utils.twotoken import joint, pair_kl, two_token_logits, two_token_policy

LABELS = [t.strip("<>") for t in TOKENS]        # short tick labels: 0..9 + = bos eos pad
DPI = 72
PROB_FLOOR = 1e-6                               # log-scale heatmaps show log10 max(p, 1e-6)


def entropy(p, axis=None):
    """Entropy in nats of probabilities ``p`` (0 log 0 = 0), summed over ``axis``."""
    p = np.asarray(p, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -(p * np.log(safe)).sum(axis=axis)


class _FastFigure:
    """A figure whose static parts are rendered once; each frame redraws only ``dynamic`` artists.

    Re-rendering axes, ticks and colorbars is what makes a matplotlib re-plot slow; here a frame is
    restore-background + draw a few artists + a fast PNG encode (a few tens of ms).
    """

    def __init__(self, fig, dynamic):
        self.fig, self.dynamic = fig, list(dynamic)
        for artist in self.dynamic:
            artist.set_animated(True)           # left out of the background
        self.canvas = FigureCanvasAgg(fig)
        self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(fig.bbox)

    def png(self):
        self.canvas.restore_region(self.background)
        for artist in self.dynamic:
            self.fig.draw_artist(artist)
        return canvas_png(self.canvas)


def _log_probs_image(p):
    return np.log10(np.maximum(np.asarray(p, dtype=float), PROB_FLOOR))


def _heatmap(ax, data, title, **kwargs):
    """A V x V table: row = first token, column = second token."""
    im = ax.imshow(data, interpolation="nearest", **kwargs)
    ax.set_xticks(range(VOCAB_SIZE), LABELS, fontsize=7, rotation=90)
    ax.set_yticks(range(VOCAB_SIZE), LABELS, fontsize=7)
    ax.set_xlabel("second token y2", fontsize=8)
    ax.set_ylabel("first token y1", fontsize=8)
    ax.set_title(title, fontsize=9)
    return im


def _show_slider(view, slider, describe):
    """Display ``slider``, a caption and an Output widget showing ``view.update(value)`` as a PNG.

    Returns the VBox (slider, caption, output). A student's function that fails at some slider value
    is reported in the caption; the last good plot stays.
    """
    import ipywidgets as widgets
    from IPython.display import Image, display

    out = widgets.Output()
    note = widgets.HTML()

    def redraw(value):
        try:
            png = view.update(value)
        except Exception as err:  # noqa: BLE001 -- a student's function failed: say so, keep going
            note.value = (f"<b>At {describe} = {value:g} your function raised "
                          f"{type(err).__name__}: {err}</b>")
            return
        note.value = view.caption()
        with out:
            out.clear_output(wait=True)
            display(Image(data=png, format="png"))

    slider.observe(lambda change: redraw(change["new"]), names="value")
    redraw(slider.value)
    box = widgets.VBox([slider, note, out])
    display(box)
    return box


# ----------------------------------------------------------------------------- temperature
class TemperatureView:
    """Temperature T -> the toy LM's next-token and two-token distributions under pi_T.

    Panels: pi_T(y1 | x) as bars, pi_T(y1 y2 | x) as a log-scale heatmap, and the entropies of
    both against T with a marker at T; the caption lists samples drawn with ``generate``.

    Args:
        model:      a TinyLM; its logits are computed once (``two_token_logits``).
        prompt:     e.g. "7+5=".
        generate:   the lab's ``generate(model, prompts, temperature, max_new, generator)``;
                    None shows no samples.
        n_samples:  responses drawn per temperature (seeded; cached per T).
    """

    temperatures = np.round(np.linspace(0.0, 3.0, 61), 2)          # the slider's grid

    def __init__(self, model, prompt="7+5=", generate=None, n_samples=8, seed=0):
        self.model, self.prompt, self.generate = model, prompt, generate
        self.n_samples, self.seed = n_samples, seed
        self.logits = two_token_logits(model, prompt)                # (V,), (V, V), cached
        self._samples = {}
        h1, h2 = [], []
        for t in self.temperatures:
            first, second = two_token_policy(self.logits, t)
            h1.append(entropy(first))
            h2.append(entropy(joint(first, second)))
        self.h_first, self.h_pair = np.array(h1), np.array(h2)
        self.frame = None                                            # the figure, built on first use
        self.samples(1.0)                                            # runs the student's generate once

    def _build(self):
        self.fig = Figure(figsize=(12.5, 3.6), dpi=DPI, layout="constrained")
        ax1, ax2, ax3 = self.fig.subplots(1, 3, width_ratios=[1.2, 1, 1.1])
        self.bars = ax1.bar(range(VOCAB_SIZE), np.zeros(VOCAB_SIZE), color="tab:blue")
        ax1.set_xticks(range(VOCAB_SIZE), LABELS, fontsize=8)
        ax1.set_ylim(0, 1)
        ax1.set_ylabel("probability")
        self.ax_bars = ax1
        self.image = _heatmap(ax2, np.zeros((VOCAB_SIZE, VOCAB_SIZE)), "log10 pi_T(y1 y2 | x)",
                              vmin=np.log10(PROB_FLOOR), vmax=0, cmap="viridis")
        self.fig.colorbar(self.image, ax=ax2, shrink=0.8)
        ax3.plot(self.temperatures, self.h_first, label="H(y1): next token")
        ax3.plot(self.temperatures, self.h_pair, label="H(y1 y2): two tokens")
        self.markers = ax3.plot([1, 1], [0, 0], "o", color="black")[0]
        self.vline = ax3.axvline(1.0, color="gray", lw=1, ls="--")
        ax3.set_xlabel("temperature T")
        ax3.set_ylabel("entropy (nats)")
        ax3.legend(fontsize=8, loc="upper left")
        ax3.set_title("entropy of pi_T", fontsize=9)
        ax1.set_title(f"next token pi_T(y1 | {self.prompt}) at T = 1", fontsize=9)
        self.frame = _FastFigure(self.fig, [*self.bars, ax1.title, self.image, self.markers, self.vline])

    def distributions(self, temperature):
        """(first (V,), pair (V, V)) of pi_T, from the cached logits."""
        first, second = two_token_policy(self.logits, temperature)
        return first, joint(first, second)

    def samples(self, temperature):
        """Responses of ``generate`` at this temperature (same seed at every T; cached)."""
        if self.generate is None:
            return []
        key = round(float(temperature), 6)
        if key not in self._samples:
            gen = torch.Generator().manual_seed(self.seed)
            out = self.generate(self.model, [self.prompt] * self.n_samples, temperature=temperature,
                                generator=gen)
            self._samples[key] = [text or "(empty)" for text in decode_responses(out)]
        return self._samples[key]

    def update(self, temperature):
        """Re-plot at ``temperature``; returns the figure as PNG bytes."""
        if self.frame is None:
            self._build()
        temperature = float(temperature)
        first, pair = self.distributions(temperature)
        self.temperature, self.first, self.pair = temperature, first, pair
        self.h = (entropy(first), entropy(pair))
        self.sampled = self.samples(temperature)
        for bar, p in zip(self.bars, first):
            bar.set_height(p)
        self.ax_bars.set_title(f"next token pi_T(y1 | {self.prompt}) at T = {temperature:g}", fontsize=9)
        self.image.set_data(_log_probs_image(pair))
        self.markers.set_data([temperature, temperature], list(self.h))
        self.vline.set_xdata([temperature, temperature])
        return self.frame.png()

    def caption(self):
        text = (f"T = {self.temperature:g}: H(y1) = {self.h[0]:.3f}, H(y1 y2) = {self.h[1]:.3f} nats")
        if self.sampled:
            text += f"<br>samples from <code>generate</code>: {' | '.join(self.sampled)}"
        return text

    def show(self):
        """The slider (T from 0 to 3) and the plot."""
        if grading():
            return
        import ipywidgets as widgets

        slider = widgets.SelectionSlider(options=[float(t) for t in self.temperatures], value=1.0,
                                         description="T", continuous_update=True)
        self.widget = _show_slider(self, slider, "T")


# ----------------------------------------------------------------------------- beta
class BetaView:
    """beta -> pi_ref, the reward and the tilted optimum pi*, with E[r], KL and J against beta.

    Args:
        ref_first, ref_second: the two-token reference policy, (V,) and (V, V).
        rewards:               (V, V) reward table.
        tilted_optimum, kl_objective: the lab's functions (Task 4).
    """

    betas = np.logspace(-2, 2, 81)

    def __init__(self, ref_first, ref_second, rewards, tilted_optimum, kl_objective):
        self.ref = joint(ref_first, ref_second)
        self.rewards = np.asarray(rewards, dtype=float)
        self.tilted_optimum, self.kl_objective = tilted_optimum, kl_objective
        self.curves = np.array([self.scores(b) for b in self.betas])   # (81, 4)
        self.mean_r, self.kl, self.J, self.beta_log_Z = self.curves.T
        self.frame = None                                            # the figure, built on first use

    def scores(self, beta):
        """(E_pi*[r], KL(pi* || pi_ref), J(pi*), beta log Z) at ``beta``, with the lab's functions."""
        pi_star, log_Z = self.tilted_optimum(self.ref, self.rewards, beta)
        pi_star = np.asarray(pi_star, dtype=float)
        J = float(self.kl_objective(pi_star, self.ref, self.rewards, beta))
        mean_r = float((pi_star * self.rewards).sum())
        return mean_r, (mean_r - J) / beta, J, beta * float(log_Z)

    def _build(self):
        self.fig = Figure(figsize=(15, 3.7), dpi=DPI, layout="constrained")
        ax = self.fig.subplots(1, 4, width_ratios=[1, 1, 1, 1.35])
        lo = np.log10(PROB_FLOOR)
        _heatmap(ax[0], _log_probs_image(self.ref), "log10 pi_ref(y1 y2)", vmin=lo, vmax=0, cmap="viridis")
        rim = _heatmap(ax[1], self.rewards, "reward r(y1 y2)", vmin=-1, vmax=1, cmap="RdYlGn")
        self.fig.colorbar(rim, ax=ax[1], shrink=0.8)
        self.image = _heatmap(ax[2], _log_probs_image(self.ref), "log10 pi*", vmin=lo, vmax=0,
                              cmap="viridis")
        self.fig.colorbar(self.image, ax=ax[2], shrink=0.8)
        c = ax[3]
        c.semilogx(self.betas, self.mean_r, label="E_pi*[r]", color="tab:green")
        c.semilogx(self.betas, self.kl, label="KL(pi* || pi_ref)", color="tab:red")
        c.semilogx(self.betas, self.J, label="J(pi*)", color="tab:blue")
        c.semilogx(self.betas, self.beta_log_Z, ls=":", color="black", lw=1.5, label="beta log Z")
        self.dots = c.plot([1.0] * 3, [0, 0, 0], "o", color="black", zorder=5)[0]
        self.vline = c.axvline(1.0, color="gray", lw=1, ls="--")
        c.set_xlabel("beta")
        finite = self.curves[np.isfinite(self.curves)]
        c.set_ylim(min(-0.05, finite.min() - 0.05), max(1.1, finite.max() + 0.05))
        c.legend(fontsize=8, loc="upper right")
        c.set_title("E[r] = 0.000   KL = 0.000   J = 0.000", fontsize=9)
        self.ax_curves = c
        self.frame = _FastFigure(self.fig, [self.image, ax[2].title, self.dots, self.vline, c.title])

    def update(self, beta):
        """Re-plot at ``beta``; returns the figure as PNG bytes."""
        if self.frame is None:
            self._build()
        beta = float(beta)
        pi_star, _ = self.tilted_optimum(self.ref, self.rewards, beta)
        self.beta, self.pi_star = beta, np.asarray(pi_star, dtype=float)
        self.values = self.scores(beta)
        mean_r, kl, J, _ = self.values
        self.image.set_data(_log_probs_image(self.pi_star))
        self.image.axes.set_title(f"log10 pi* at beta = {beta:.3g}", fontsize=9)
        self.dots.set_data([beta] * 3, [mean_r, kl, J])
        self.vline.set_xdata([beta, beta])
        self.ax_curves.set_title(f"E[r] = {mean_r:.3f}   KL = {kl:.3f}   J = {J:.3f}", fontsize=9)
        return self.frame.png()

    def caption(self):
        mean_r, kl, J, beta_log_Z = self.values
        return (f"beta = {self.beta:.3g}: E_pi*[r] = {mean_r:.3f}, KL(pi* || pi_ref) = {kl:.3f}, "
                f"J(pi*) = {J:.3f}, beta log Z = {beta_log_Z:.3f}")

    def show(self):
        """The slider (beta from 0.01 to 100, log scale) and the plot."""
        _show_beta_slider(self)


def _show_beta_slider(view):
    """Display ``view`` under a log-scale beta slider (0.01 to 100); nothing while grading."""
    if grading():
        return
    import ipywidgets as widgets

    slider = widgets.FloatLogSlider(value=1.0, base=10, min=-2, max=2, step=0.05,
                                    description="beta", continuous_update=True)
    view.widget = _show_slider(view, slider, "beta")


# ----------------------------------------------------------------------------- KL estimators
class KLEstimatorExperiment:
    """Bias and spread of the KL estimators k1, k2, k3 on the enumerable two-token toy.

    pi_ref is the toy LM at T = 1 and pi is the same model at another temperature, so the exact
    KL(pi || pi_ref) is known (``pair_kl``). For each temperature, ``n_samples`` responses y ~ pi
    give one-sample estimates k(y) from log pi(y) - log pi_ref(y) (sums over the two tokens):
    bias = mean(k) - KL and std = standard deviation of k, both relative to the exact KL.

    Args:
        kl_estimators: the lab's function (Task 3).
    """

    def __init__(self, model, prompt, kl_estimators, temperatures=(1.02, 1.05, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0, 2.5),
                 n_samples=200_000, seed=0):
        if grading():
            n_samples = min(n_samples, 2000)                         # nothing is shown while grading
        logits = two_token_logits(model, prompt)
        ref_first, ref_second = two_token_policy(logits, 1.0)
        ref = joint(ref_first, ref_second).ravel()
        gen = torch.Generator().manual_seed(seed)
        self.n_samples = n_samples
        self.rows = []
        for t in temperatures:
            first, second = two_token_policy(logits, t)
            p = joint(first, second).ravel()
            draws = torch.multinomial(torch.from_numpy(p), n_samples, replacement=True, generator=gen)
            logp = torch.log(torch.from_numpy(p))[draws]
            ref_logp = torch.log(torch.from_numpy(ref))[draws]
            ks = [np.asarray(k, dtype=float) for k in kl_estimators(logp, ref_logp)]
            exact = pair_kl(first, second, ref_first, ref_second)
            row = {"T": float(t), "kl": exact}
            for name, k in zip(("k1", "k2", "k3"), ks):
                row[name] = {"mean": float(k.mean()), "bias": float(k.mean() - exact) / exact,
                             "std": float(k.std()) / exact,
                             "se": float(k.std()) / exact / np.sqrt(n_samples)}   # of the bias
            self.rows.append(row)

    def table(self):
        """The results as text: one line per temperature."""
        head = f"{'T':>5} {'KL exact':>9} | " + " | ".join(
            f"{k + ' bias':>8} {k + ' std':>7}" for k in ("k1", "k2", "k3"))
        lines = [head, "-" * len(head)]
        for r in self.rows:
            lines.append(f"{r['T']:5.2f} {r['kl']:9.4f} | " + " | ".join(
                f"{r[k]['bias']:+8.3f} {r[k]['std']:7.2f}" for k in ("k1", "k2", "k3")))
        lines.append("bias and std are relative to the exact KL (one sample per estimate)")
        return "\n".join(lines)

    def figure(self):
        """Relative bias and relative std of each estimator against the exact KL, as PNG bytes."""
        fig = Figure(figsize=(10, 3.6), dpi=DPI, layout="constrained")
        ax1, ax2 = fig.subplots(1, 2)
        kl = [r["kl"] for r in self.rows]
        for name, color in (("k1", "tab:blue"), ("k2", "tab:orange"), ("k3", "tab:green")):
            ax1.errorbar(kl, [r[name]["bias"] for r in self.rows], yerr=[2 * r[name]["se"] for r in self.rows],
                         fmt="o-", color=color, label=name, capsize=3)
            ax2.loglog(kl, [r[name]["std"] for r in self.rows], "o-", color=color, label=name)
        ax1.axhline(0, color="gray", lw=1)
        ax1.set_xscale("log")
        ax1.set_title(f"bias / KL  (0 = unbiased; bars: 2 standard errors of {self.n_samples} samples)",
                      fontsize=9)
        ax2.set_title("std of one sample / KL  (lower = less noisy)", fontsize=9)
        for ax in (ax1, ax2):
            ax.set_xlabel("exact KL(pi_T || pi_ref)")
            ax.legend(fontsize=8)
        return figure_png(fig, dpi="figure")

    def show(self):
        """Print the table and show the plot."""
        if grading():
            return
        from IPython.display import Image, display

        print(self.table())
        display(Image(data=self.figure(), format="png"))


# ----------------------------------------------------------------------------- soft values
class SoftValueView:
    """beta -> the token-level optimum: pi*(y1) against pi_ref(y1), and the soft values.

    Left: the first-token policies pi_ref(y1) and pi*(y1) = pi_ref(y1) exp((V(y1) - V0) / beta).
    Right: V0 = beta log Z and V(token) against beta, between their limits: the expected reward under
    pi_ref (beta -> infinity, dashed) and the best reward reachable (beta -> 0, dotted).
    ``max_gap(beta)`` compares Task 5 with Task 4: the largest difference between
    first_star[:, None] * second_star and the tilted pi*.
    """

    betas = np.logspace(-2, 2, 81)

    def __init__(self, ref_first, ref_second, rewards, token_level_optimum, tilted_optimum, token=1):
        self.first, self.second = np.asarray(ref_first, dtype=float), np.asarray(ref_second, dtype=float)
        self.rewards = np.asarray(rewards, dtype=float)
        self.token_level_optimum, self.tilted_optimum = token_level_optimum, tilted_optimum
        self.token = token
        curves = []
        for b in self.betas:
            _, _, V, V0 = token_level_optimum(self.first, self.second, self.rewards, b)
            curves.append((float(V0), float(np.asarray(V, dtype=float)[token])))
        self.V0_curve, self.V_curve = np.array(curves).T
        pair = joint(self.first, self.second)
        reachable = np.where(self.second > 0, self.rewards, -np.inf)
        self.limits = {"V0": (float((pair * self.rewards).sum()), float(reachable.max(1)[self.first > 0].max())),
                       "V": (float((self.second[token] * self.rewards[token]).sum()), float(reachable[token].max()))}
        self.frame = None                                            # the figure, built on first use
        self.max_gap(1.0)                                            # runs both student functions once

    def max_gap(self, beta):
        first_star, second_star, _, _ = self.token_level_optimum(self.first, self.second, self.rewards, beta)
        pi_star, _ = self.tilted_optimum(joint(self.first, self.second), self.rewards, beta)
        return float(np.abs(np.asarray(first_star)[:, None] * np.asarray(second_star)
                            - np.asarray(pi_star)).max())

    def _build(self):
        self.fig = Figure(figsize=(12, 3.6), dpi=DPI, layout="constrained")
        ax1, ax2 = self.fig.subplots(1, 2)
        x = np.arange(VOCAB_SIZE)
        ax1.bar(x - 0.2, self.first, width=0.4, color="gray", label="pi_ref(y1)")
        self.bars = ax1.bar(x + 0.2, self.first, width=0.4, color="tab:blue", label="pi*(y1)")
        ax1.set_xticks(x, LABELS, fontsize=8)
        ax1.set_ylim(0, 1.05)
        ax1.set_ylabel("probability of the first token")
        ax1.legend(fontsize=8, loc="upper right")
        ax1.set_title("pi*(y1) at beta = 1", fontsize=9)
        name = LABELS[self.token]
        for curve, key, color, label in ((self.V0_curve, "V0", "tab:purple", "V0 = beta log Z"),
                                         (self.V_curve, "V", "tab:blue", f"V({name})")):
            ax2.semilogx(self.betas, curve, color=color, label=label)
            ax2.axhline(self.limits[key][0], color=color, ls="--", lw=1)
            ax2.axhline(self.limits[key][1], color=color, ls=":", lw=1)
        self.dots = ax2.plot([1.0, 1.0], [0, 0], "o", color="black", zorder=5)[0]
        self.vline = ax2.axvline(1.0, color="gray", lw=1)
        ax2.set_xlabel("beta")
        ax2.set_ylabel("soft value")
        ax2.legend(fontsize=8, loc="lower left", title="dashed: E_ref[r], dotted: best reachable r",
                   title_fontsize=8)
        ax2.set_title("soft values against beta", fontsize=9)
        self.ax_bars = ax1
        self.frame = _FastFigure(self.fig, [*self.bars, ax1.title, self.dots, self.vline])

    def update(self, beta):
        """Re-plot at ``beta``; returns the figure as PNG bytes."""
        if self.frame is None:
            self._build()
        beta = float(beta)
        first_star, _, V, V0 = self.token_level_optimum(self.first, self.second, self.rewards, beta)
        self.beta, self.first_star = beta, np.asarray(first_star, dtype=float)
        self.V, self.V0 = np.asarray(V, dtype=float), float(V0)
        self.gap = self.max_gap(beta)
        for bar, p in zip(self.bars, self.first_star):
            bar.set_height(p)
        self.ax_bars.set_title(f"pi*(y1) at beta = {beta:.3g}", fontsize=9)
        self.dots.set_data([beta, beta], [self.V0, self.V[self.token]])
        self.vline.set_xdata([beta, beta])
        return self.frame.png()

    def caption(self):
        return (f"beta = {self.beta:.3g}: V0 = beta log Z = {self.V0:.4f}, V({LABELS[self.token]}) = "
                f"{self.V[self.token]:.4f}; largest gap between the token-level and the tilted pi*: "
                f"{self.gap:.1e}")

    def show(self):
        """The slider (beta from 0.01 to 100, log scale) and the plot."""
        _show_beta_slider(self)


__all__ = ["TemperatureView", "BetaView", "KLEstimatorExperiment", "SoftValueView", "entropy", "grading"]
