"""Plots and sliders of Lab 11 (the language model as a policy).

Every view takes the student's functions as arguments (nothing here solves a task) and follows the
protocol of ``views.base``: the constructor keeps its arguments, ``show()`` calls the student's
functions, draws and displays (nothing while nbgrader grades), and a slider's ``update(value)``
re-draws one frame:

    with needs("Task 2 (sample_with_temperature)"):
        views.TemperatureView(model, "7+5=", generate).show()    # slider + plot in JupyterLab

    view = BetaView(ref_first, ref_second, rewards, tilted_optimum, kl_objective).prepare()
    png = view.update(0.3)                       # re-plot at beta = 0.3: PNG bytes, within a move's budget (make bench)
                                                 # (the first call also draws the axes, ~1 s)
    LogprobTable(model, "7+5=", response_logprobs, sequence_logprob).prepare().table()
    KLEstimatorExperiment(model, "7+5=", kl_estimators).prepare().rows   # bias and std of k1, k2, k3
    SoftValueView(ref_first, ref_second, rewards, token_level_optimum, tilted_optimum).prepare()

An unfinished task raises its NotImplementedError inside the notebook's ``with needs(...)`` block
(a one-line message, no traceback); errors raised later, while a slider moves, are printed under it.
"""

import numpy as np
import torch

from course_utils.tinylm import TOKENS, VOCAB_SIZE, _allowed_logits, decode_responses, sample
from course_utils.twotoken import joint, two_token_logits, two_token_policy
from course_utils.views.base import FastFigure, Figure, View, few_ticks, figure_png, log_axis, palette, series, show_png, show_slider

LABELS = [t.strip("<>") for t in TOKENS]        # short tick labels: 0..9 + = bos eos pad
DPI = 72
PROB_FLOOR = 1e-6                               # log-scale heatmaps show log10 max(p, 1e-6)


def entropy(p, axis=None):
    """Entropy in nats of probabilities ``p`` (0 log 0 = 0), summed over ``axis``."""
    p = np.asarray(p, dtype=float)
    safe = np.where(p > 0, p, 1.0)
    return -(p * np.log(safe)).sum(axis=axis)


def _log_probs_image(p):
    return np.log10(np.maximum(np.asarray(p, dtype=float), PROB_FLOOR))


def _heatmap(ax, data, title, rows=True, **kwargs):
    """A V x V table: row = first token, column = second token. ``rows=False``: no row labels (a heatmap
    right of one with the same rows: each labelled tick is a few ms of a slider's first draw)."""
    im = ax.imshow(data, interpolation="nearest", **kwargs)
    ax.set_xticks(range(VOCAB_SIZE), LABELS, fontsize=7, rotation=90)
    ax.set_xlabel("second token y2", fontsize=8)
    if rows:
        ax.set_yticks(range(VOCAB_SIZE), LABELS, fontsize=7)
        ax.set_ylabel("first token y1", fontsize=8)
    else:
        ax.set_yticks([])
    ax.set_title(title, fontsize=9, y=1.0)     # y given: no automatic title placement (slow)
    return im


def _beta_slider():
    """The log-scale beta slider of BetaView and SoftValueView (0.01 to 100)."""
    import ipywidgets as widgets

    return widgets.FloatLogSlider(value=1.0, base=10, min=-2, max=2, step=0.05, description="beta",
                                  continuous_update=True)


# ----------------------------------------------------------------------------- log-probs (Task 1)
class LogprobTable(View):
    """Responses the toy LM samples for one prompt, scored with the lab's Task 1 functions.

    The logits forbid BOS and PAD (-inf), as when the model samples, so padding positions have
    log pi = -inf: ``sequence_logprob`` must still give a finite log pi(y | x).

    Args:
        model: a TinyLM; prompt: e.g. "7+5="; response_logprobs, sequence_logprob: the lab's functions.
        n: responses (seeded).
    """

    def __init__(self, model, prompt, response_logprobs, sequence_logprob, n=8, seed=0):
        self.model, self.prompt, self.n, self.seed = model, prompt, n, seed
        self.response_logprobs, self.sequence_logprob = response_logprobs, sequence_logprob

    def _prepare(self):
        rollout = sample(self.model, [self.prompt] * self.n, generator=torch.Generator().manual_seed(self.seed))
        with torch.no_grad():
            logits = _allowed_logits(self.model(rollout["ids"]))
        self.texts = decode_responses(rollout)
        self.tok_logp = self.response_logprobs(logits, rollout["ids"], rollout["prompt_len"])
        self.seq_logp = self.sequence_logprob(self.tok_logp, rollout["mask"])

    def table(self):
        """One line per response: its per-token log-probs, log pi(y|x) and pi(y|x)."""
        lines = [f"{'response':>9} | {'log pi(y_t | s_t) per token':^34} | log pi(y|x) | pi(y|x)"]
        for text, row, lp in zip(self.texts, self.tok_logp.tolist(), self.seq_logp.tolist()):
            cells = " ".join(f"{v:7.3f}" for v in row)
            lines.append(f"{text or '(empty)':>9} | {cells} | {lp:11.3f} | {np.exp(lp):7.3f}")
        return "\n".join(lines)

    def display(self):
        print(self.table())


# ----------------------------------------------------------------------------- temperature
class TemperatureView(View):
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
        self.frame = None                                            # the figure, built on first use

    def _prepare(self):
        self.logits = two_token_logits(self.model, self.prompt)      # the model runs once
        self._tables, self._samples = {}, {}
        pairs = [self.distributions(t) for t in self.temperatures]   # cached: the slider only looks up
        self.h_first = np.array([entropy(first) for first, _ in pairs])
        self.h_pair = np.array([entropy(pair) for _, pair in pairs])
        self.samples(1.0)                                            # runs the student's generate once

    def _build(self):
        self.fig = Figure(figsize=(12.5, 3.6), dpi=DPI)      # a fixed layout: constrained layout costs 0.1 s
        ax1, ax2, ax3 = self.fig.subplots(1, 3, width_ratios=[1.3, 1.15, 1.05], gridspec_kw={
            "left": 0.045, "right": 0.995, "bottom": 0.135, "top": 0.93, "wspace": 0.32})
        self.bars = ax1.bar(range(VOCAB_SIZE), np.zeros(VOCAB_SIZE), color=palette()[0])
        ax1.set_xticks(range(VOCAB_SIZE), LABELS, fontsize=8)
        ax1.set_ylim(0, 1)
        ax1.set_ylabel("probability")
        self.ax_bars = ax1
        self.image = _heatmap(ax2, np.zeros((VOCAB_SIZE, VOCAB_SIZE)), "log10 pi_T(y1 y2 | x)",
                              vmin=np.log10(PROB_FLOOR), vmax=0, cmap="viridis")
        few_ticks(self.fig.colorbar(self.image, ax=ax2, shrink=0.8, fraction=0.08, pad=0.03).ax.yaxis)
        ax3.plot(self.temperatures, self.h_first, label="H(y1): next token", **series(0))
        ax3.plot(self.temperatures, self.h_pair, label="H(y1 y2): two tokens", **series(1))
        self.markers = ax3.plot([1, 1], [0, 0], "o", color="black")[0]
        self.vline = ax3.axvline(1.0, color="gray", lw=1, ls="--")
        ax3.set_xlabel("temperature T")
        ax3.set_ylabel("entropy (nats)")
        ax3.legend(fontsize=8, loc="upper left")
        ax3.set_title("entropy of pi_T", fontsize=9, y=1.0)
        ax1.set_title(f"next token pi_T(y1 | {self.prompt}) at T = 1", fontsize=9, y=1.0)
        self.frame = FastFigure(self.fig, [*self.bars, ax1.title, self.image, self.markers, self.vline])

    def distributions(self, temperature):
        """(first (V,), pair (V, V)) of pi_T, from the cached logits (cached per T)."""
        key = round(float(temperature), 6)
        if key not in self._tables:
            first, second = two_token_policy(self.logits, temperature)
            self._tables[key] = first, joint(first, second)
        return self._tables[key]

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
        self.prepare()
        if self.frame is None:
            self._build()
        temperature = float(temperature)
        first, pair = self.distributions(temperature)
        self.temperature, self.first, self.pair = temperature, first, pair
        self.h = (entropy(first), entropy(pair))
        self.sampled = self.samples(temperature)
        for bar, p in zip(self.bars, first):
            bar.set_height(p)
        self.ax_bars.set_title(f"next token pi_T(y1 | {self.prompt}) at T = {temperature:g}", fontsize=9, y=1.0)
        self.image.set_data(_log_probs_image(pair))
        self.markers.set_data([temperature, temperature], list(self.h))
        self.vline.set_xdata([temperature, temperature])
        return self.frame.png()

    def alt(self):
        top = int(np.argmax(self.first))
        return (f"Three panels at temperature T = {self.temperature:g}. Left, bars: the next-token distribution "
                f"for {self.prompt}; the most likely token is {LABELS[top]} with probability {self.first[top]:.2f}. "
                f"Middle: a heatmap of log10 of the probability of each pair of tokens. Right: the entropy of the "
                f"next token and of the two tokens against T from 0 to 3, both rising with T; here "
                f"H(y1) = {self.h[0]:.3f} and H(y1 y2) = {self.h[1]:.3f} nats.")

    def caption(self):
        text = (f"T = {self.temperature:g}: H(y1) = {self.h[0]:.3f}, H(y1 y2) = {self.h[1]:.3f} nats")
        if self.sampled:
            text += f"<br>samples from <code>generate</code>: {' | '.join(self.sampled)}"
        return text

    def display(self):
        """The slider (T from 0 to 3) and the plot."""
        import ipywidgets as widgets

        slider = widgets.SelectionSlider(options=[float(t) for t in self.temperatures], value=1.0,
                                         description="T", continuous_update=True)
        self.widget = show_slider(self, slider, "T")


# ----------------------------------------------------------------------------- beta
class BetaView(View):
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
        self.frame = None                                            # the figure, built on first use

    def _prepare(self):
        self._scores = {}
        self.curves = np.array([self.scores(b) for b in self.betas])   # (81, 4)
        self.mean_r, self.kl, self.J, self.beta_log_Z = self.curves.T

    def scores(self, beta):
        """(E_pi*[r], KL(pi* || pi_ref), J(pi*), beta log Z) at ``beta``, with the lab's functions
        (cached per beta, with pi* in ``self.optima``)."""
        key = round(float(beta), 9)
        if key not in self._scores:
            pi_star, log_Z = self.tilted_optimum(self.ref, self.rewards, beta)
            pi_star = np.asarray(pi_star, dtype=float)
            J = float(self.kl_objective(pi_star, self.ref, self.rewards, beta))
            mean_r = float((pi_star * self.rewards).sum())
            self._scores[key] = pi_star, (mean_r, (mean_r - J) / beta, J, beta * float(log_Z))
        return self._scores[key][1]

    def _build(self):
        self.fig = Figure(figsize=(15, 3.7), dpi=DPI)          # a fixed layout: constrained layout's first pass costs 0.3 s
        self.fig.subplots_adjust(left=0.03, right=0.99, bottom=0.16, top=0.92, wspace=0.25)
        ax = self.fig.subplots(1, 4, width_ratios=[1, 1, 1, 1.35])
        lo = np.log10(PROB_FLOOR)
        _heatmap(ax[0], _log_probs_image(self.ref), "log10 pi_ref(y1 y2)", vmin=lo, vmax=0, cmap="viridis")
        rim = _heatmap(ax[1], self.rewards, "reward r(y1 y2)", rows=False, vmin=-1, vmax=1, cmap="PuOr")   # colour-blind safe
        few_ticks(self.fig.colorbar(rim, ax=ax[1], shrink=0.8).ax.yaxis)
        self.image = _heatmap(ax[2], _log_probs_image(self.ref), "log10 pi*", rows=False, vmin=lo, vmax=0,
                              cmap="viridis")
        few_ticks(self.fig.colorbar(self.image, ax=ax[2], shrink=0.8).ax.yaxis)
        c = ax[3]
        c.semilogx(self.betas, self.mean_r, label="E_pi*[r]", **series(0))
        c.semilogx(self.betas, self.kl, label="KL(pi* || pi_ref)", **series(1))
        c.semilogx(self.betas, self.J, label="J(pi*)", **series(2))
        c.semilogx(self.betas, self.beta_log_Z, ls=":", color="black", lw=1.5, label="beta log Z")
        self.dots = c.plot([1.0] * 3, [0, 0, 0], "o", color="black", zorder=5)[0]
        self.vline = c.axvline(1.0, color="gray", lw=1, ls="--")
        log_axis(c, "x", [0.01, 0.1, 1, 10, 100])         # plain labels, no minor ticks: a fifth of the first draw
        few_ticks(c.yaxis)
        c.set_xlabel("beta")
        finite = self.curves[np.isfinite(self.curves)]
        c.set_ylim(min(-0.05, finite.min() - 0.05), max(1.1, finite.max() + 0.05))
        c.legend(fontsize=8, loc="upper right")
        c.set_title("E[r] = 0.000   KL = 0.000   J = 0.000", fontsize=9, y=1.0)
        self.ax_curves = c
        self.frame = FastFigure(self.fig, [self.image, ax[2].title, self.dots, self.vline, c.title])

    def update(self, beta):
        """Re-plot at ``beta``; returns the figure as PNG bytes."""
        self.prepare()
        if self.frame is None:
            self._build()
        beta = float(beta)
        self.values = self.scores(beta)
        self.beta, self.pi_star = beta, self._scores[round(beta, 9)][0]
        mean_r, kl, J, _ = self.values
        self.image.set_data(_log_probs_image(self.pi_star))
        self.image.axes.set_title(f"log10 pi* at beta = {beta:.3g}", fontsize=9, y=1.0)
        self.dots.set_data([beta] * 3, [mean_r, kl, J])
        self.vline.set_xdata([beta, beta])
        self.ax_curves.set_title(f"E[r] = {mean_r:.3f}   KL = {kl:.3f}   J = {J:.3f}", fontsize=9, y=1.0)
        return self.frame.png()

    def alt(self):
        mean_r, kl, J, _ = self.values
        return (f"Four panels at beta = {self.beta:.3g}. Heatmaps of log10 pi_ref, of the reward of each pair of "
                f"tokens, and of log10 pi*, the tilted optimum, which puts its mass on high-reward pairs as beta "
                f"falls. Right: E[r], KL(pi* || pi_ref), J and beta log Z against beta from 0.01 to 100 (log "
                f"scale): E[r] and the KL fall as beta grows. Here E[r] = {mean_r:.3f}, KL = {kl:.3f}, "
                f"J = {J:.3f}.")

    def caption(self):
        mean_r, kl, J, beta_log_Z = self.values
        return (f"beta = {self.beta:.3g}: E_pi*[r] = {mean_r:.3f}, KL(pi* || pi_ref) = {kl:.3f}, "
                f"J(pi*) = {J:.3f}, beta log Z = {beta_log_Z:.3f}")

    def display(self):
        """The slider (beta from 0.01 to 100, log scale) and the plot."""
        self.widget = show_slider(self, _beta_slider(), "beta")


# ----------------------------------------------------------------------------- KL estimators
class KLEstimatorExperiment(View):
    """Bias and spread of the KL estimators k1, k2, k3 on the enumerable two-token toy.

    pi_ref is the toy LM at T = 1 and pi is the same model at another temperature, so the exact
    KL(pi || pi_ref) is known: a sum over the 225 responses. For each temperature, ``n_samples`` responses y ~ pi
    give one-sample estimates k(y) from log pi(y) - log pi_ref(y) (sums over the two tokens):
    bias = mean(k) - KL and std = standard deviation of k, both relative to the exact KL.

    Args:
        kl_estimators: the lab's function (Task 3).
    """

    def __init__(self, model, prompt, kl_estimators, temperatures=(1.02, 1.05, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0, 2.5),
                 n_samples=200_000, seed=0):
        self.model, self.prompt, self.kl_estimators = model, prompt, kl_estimators
        self.temperatures, self.n_samples, self.seed = temperatures, n_samples, seed

    def _prepare(self):
        logits = two_token_logits(self.model, self.prompt)
        ref = joint(*two_token_policy(logits, 1.0)).ravel()
        gen = torch.Generator().manual_seed(self.seed)
        n_samples = self.n_samples
        self.rows = []
        for t in self.temperatures:
            p = joint(*two_token_policy(logits, t)).ravel()
            draws = torch.multinomial(torch.from_numpy(p), n_samples, replacement=True, generator=gen)
            logp = torch.log(torch.from_numpy(p))[draws]
            ref_logp = torch.log(torch.from_numpy(ref))[draws]
            ks = [np.asarray(k, dtype=float) for k in self.kl_estimators(logp, ref_logp)]
            support = p > 0                                           # pi_T never misses pi_ref's support
            exact = float((p[support] * np.log(p[support] / ref[support])).sum())
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
        for i, name in enumerate(("k1", "k2", "k3")):
            style = series(i, markevery=None)
            ax1.errorbar(kl, [r[name]["bias"] for r in self.rows], yerr=[2 * r[name]["se"] for r in self.rows],
                         label=name, capsize=3, **style)
            ax2.loglog(kl, [r[name]["std"] for r in self.rows], label=name, **style)
        ax1.axhline(0, color="gray", lw=1)
        ax1.set_xscale("log")
        ax1.set_title(f"bias / KL  (0 = unbiased; bars: 2 standard errors of {self.n_samples} samples)",
                      fontsize=9)
        ax2.set_title("std of one sample / KL  (lower = less noisy)", fontsize=9)
        for ax in (ax1, ax2):
            ax.set_xlabel("exact KL(pi_T || pi_ref)")
            ax.legend(fontsize=8)
        return figure_png(fig, dpi="figure")

    def alt(self):
        """What the figure shows, in words, from the measured rows."""
        def worst(name, key):
            return max(abs(r[name][key]) for r in self.rows)
        return (f"Two panels against the exact KL(pi_T || pi_ref), for T from {self.rows[0]['T']:g} to "
                f"{self.rows[-1]['T']:g}, log scale. Left: the bias of k1, k2 and k3 relative to the KL, with "
                f"bars of two standard errors; the largest |bias| is {worst('k1', 'bias'):.3f} for k1, "
                f"{worst('k2', 'bias'):.3f} for k2 and {worst('k3', 'bias'):.3f} for k3. Right: the standard "
                f"deviation of one sample relative to the KL; at the smallest KL it is "
                f"{self.rows[0]['k1']['std']:.3g} for k1, {self.rows[0]['k2']['std']:.3g} for k2 and "
                f"{self.rows[0]['k3']['std']:.3g} for k3.")

    def display(self):
        """Print the table and show the plot."""
        print(self.table())
        show_png(self.figure(), self.alt())


# ----------------------------------------------------------------------------- soft values
class SoftValueView(View):
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
        self.frame = None                                            # the figure, built on first use

    def _prepare(self):
        self._optima = {}
        curves = []
        for b in self.betas:
            _, _, V, V0 = self.optimum(b)
            curves.append((V0, V[self.token]))
        self.V0_curve, self.V_curve = np.array(curves).T
        pair = joint(self.first, self.second)
        reachable = np.where(self.second > 0, self.rewards, -np.inf)
        t = self.token
        self.limits = {"V0": (float((pair * self.rewards).sum()), float(reachable.max(1)[self.first > 0].max())),
                       "V": (float((self.second[t] * self.rewards[t]).sum()), float(reachable[t].max()))}
        self.max_gap(1.0)                                            # runs the student's tilted_optimum once

    def optimum(self, beta):
        """token_level_optimum at ``beta`` as float arrays (first_star, second_star, V, V0); cached."""
        key = round(float(beta), 9)
        if key not in self._optima:
            first_star, second_star, V, V0 = self.token_level_optimum(self.first, self.second, self.rewards, beta)
            self._optima[key] = (np.asarray(first_star, dtype=float), np.asarray(second_star, dtype=float),
                                 np.asarray(V, dtype=float), float(V0))
        return self._optima[key]

    def max_gap(self, beta):
        """The largest |first_star[:, None] * second_star - pi*| at ``beta``: Task 5 against Task 4."""
        first_star, second_star, _, _ = self.optimum(beta)
        pi_star, _ = self.tilted_optimum(joint(self.first, self.second), self.rewards, beta)
        return float(np.abs(first_star[:, None] * second_star - np.asarray(pi_star, dtype=float)).max())

    def _build(self):
        self.fig = Figure(figsize=(12, 3.6), dpi=DPI)        # a fixed layout: constrained layout costs 0.1 s
        ax1, ax2 = self.fig.subplots(1, 2, gridspec_kw={"left": 0.046, "right": 0.995, "bottom": 0.142, "top": 0.93,
                                                        "wspace": 0.12})
        x = np.arange(VOCAB_SIZE)
        ax1.bar(x - 0.2, self.first, width=0.4, color="gray", label="pi_ref(y1)")
        self.bars = ax1.bar(x + 0.2, self.first, width=0.4, color=palette()[0], hatch="//", label="pi*(y1)")
        ax1.set_xticks(x, LABELS, fontsize=8)
        ax1.set_ylim(0, 1.05)
        ax1.set_ylabel("probability of the first token")
        ax1.legend(fontsize=8, loc="upper right")
        ax1.set_title("pi*(y1) at beta = 1", fontsize=9, y=1.0)
        name = LABELS[self.token]
        for i, (curve, key, label) in enumerate(((self.V0_curve, "V0", "V0 = beta log Z"),
                                                 (self.V_curve, "V", f"V({name})"))):
            style = series(i)
            color = style["color"]
            ax2.semilogx(self.betas, curve, label=label, **{**style, "ls": "-"})
            ax2.axhline(self.limits[key][0], color=color, ls="--", lw=1)
            ax2.axhline(self.limits[key][1], color=color, ls=":", lw=1)
        self.dots = ax2.plot([1.0, 1.0], [0, 0], "o", color="black", zorder=5)[0]
        self.vline = ax2.axvline(1.0, color="gray", lw=1)
        log_axis(ax2, "x", [0.01, 0.1, 1, 10, 100])       # plain labels, no minor ticks
        ax2.set_xlabel("beta")
        ax2.set_ylabel("soft value")
        ax2.legend(fontsize=8, loc="lower left", title="dashed: E_ref[r], dotted: best reachable r",
                   title_fontsize=8)
        ax2.set_title("soft values against beta", fontsize=9, y=1.0)
        self.ax_bars = ax1
        self.frame = FastFigure(self.fig, [*self.bars, ax1.title, self.dots, self.vline])

    def update(self, beta):
        """Re-plot at ``beta``; returns the figure as PNG bytes."""
        self.prepare()
        if self.frame is None:
            self._build()
        beta = float(beta)
        self.beta = beta
        self.first_star, _, self.V, self.V0 = self.optimum(beta)
        self.gap = self.max_gap(beta)
        for bar, p in zip(self.bars, self.first_star):
            bar.set_height(p)
        self.ax_bars.set_title(f"pi*(y1) at beta = {beta:.3g}", fontsize=9, y=1.0)
        self.dots.set_data([beta, beta], [self.V0, self.V[self.token]])
        self.vline.set_xdata([beta, beta])
        return self.frame.png()

    def alt(self):
        top = int(np.argmax(self.first_star))
        name = LABELS[self.token]
        return (f"Two panels at beta = {self.beta:.3g}. Left, bars: the first-token policies pi_ref(y1) and "
                f"pi*(y1); pi* gives {LABELS[top]} the most probability, {self.first_star[top]:.2f}. Right: the "
                f"soft values V0 = beta log Z and V({name}) against beta from 0.01 to 100 (log scale), each moving "
                f"from the best reachable reward at small beta to the expected reward under pi_ref at large beta; "
                f"here V0 = {self.V0:.3f} and V({name}) = {self.V[self.token]:.3f}.")

    def caption(self):
        return (f"beta = {self.beta:.3g}: V0 = beta log Z = {self.V0:.4f}, V({LABELS[self.token]}) = "
                f"{self.V[self.token]:.4f}; largest gap between the token-level and the tilted pi*: "
                f"{self.gap:.1e}")

    def display(self):
        """The slider (beta from 0.01 to 100, log scale) and the plot."""
        self.widget = show_slider(self, _beta_slider(), "beta")


__all__ = ["LogprobTable", "TemperatureView", "BetaView", "KLEstimatorExperiment", "SoftValueView", "entropy"]


# ----------------------------------------------------------------------------- KL estimators, both sides of T = 1
class KLEstimatorBothSides(View):
    """The spread of k1 and k3 computed exactly, for policies sharper (T < 1) and flatter (T > 1) than pi_ref.

    pi_ref is the toy LM at T = 1 and pi = pi_T. Every two-token response y is enumerated: the exact
    mean and standard deviation of a one-sample estimate k(y), y ~ pi_T, are weighted sums over the
    responses pi_T can produce (no sampling noise). ``rows`` holds, per temperature, the exact KL and
    std(k) / KL for k1 and k3, from the student's ``kl_estimators``.
    """

    temperatures = (0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95,
                    1.05, 1.1, 1.2, 1.35, 1.5, 1.75, 2.0, 2.5)
    shown = (0.4, 0.6, 0.8, 0.95, 1.05, 1.5, 2.5)                    # the rows of the printed table

    def __init__(self, model, prompt, kl_estimators):
        self.model, self.prompt, self.kl_estimators = model, prompt, kl_estimators

    def _prepare(self):
        logits = two_token_logits(self.model, self.prompt)
        ref = joint(*two_token_policy(logits, 1.0)).ravel()
        self.rows = []
        for t in self.temperatures:
            p = joint(*two_token_policy(logits, t)).ravel()
            support = p > 0                                          # the same support as pi_ref's
            w = p[support]
            logp = torch.log(torch.from_numpy(w))
            ref_logp = torch.log(torch.from_numpy(ref[support]))
            k1, _, k3 = (np.asarray(k, dtype=float) for k in self.kl_estimators(logp, ref_logp))
            kl = float((w * (np.log(w) - np.log(ref[support]))).sum())
            std = {name: float(np.sqrt((w * (k - (w * k).sum()) ** 2).sum())) / kl for name, k in
                   (("k1", k1), ("k3", k3))}
            mean = {name: float((w * k).sum()) / kl for name, k in (("k1", k1), ("k3", k3))}
            self.rows.append({"T": float(t), "kl": kl, "std": std, "mean": mean})

    def table(self):
        """The exact figures as text, at a few temperatures."""
        head = f"{'T':>5} {'KL exact':>9} {'k1 std/KL':>10} {'k3 std/KL':>10} {'std k1 / std k3':>16}"
        lines = [head, "-" * len(head)]
        for r in self.rows:
            if r["T"] in self.shown:
                lines.append(f"{r['T']:5.2f} {r['kl']:9.4f} {r['std']['k1']:10.3g} {r['std']['k3']:10.3g} "
                             f"{r['std']['k1'] / r['std']['k3']:16.3g}")
        lines.append("exact: every two-token response enumerated, std of one sample y ~ pi_T, relative to the KL")
        return "\n".join(lines)

    def figure(self):
        """std(k) / KL of k1 and k3 against T (log scale), as PNG bytes."""
        fig = Figure(figsize=(7, 3.6), dpi=DPI, layout="constrained")
        ax = fig.subplots()
        temps = [r["T"] for r in self.rows]
        for i, name in enumerate(("k1", "k3")):
            ax.semilogy(temps, [r["std"][name] for r in self.rows], label=name, ms=4, **series(i, markevery=None))
        ax.axvline(1.0, color="gray", lw=1, ls=":")
        ax.set_xlabel("temperature T of pi = pi_T (pi_ref: T = 1)")
        ax.set_ylabel("std of one sample / KL")
        ax.set_title("exact spread of k1 and k3 for pi_T against pi_ref, T from 0.35 to 2.5", fontsize=9)
        ax.legend(fontsize=8)
        return figure_png(fig, dpi="figure")

    def alt(self):
        """What the figure shows, in words, from the exact rows."""
        ratio = [r["std"]["k1"] / r["std"]["k3"] for r in self.rows]
        sharp, flat = self.rows[0], self.rows[-1]
        return (f"One panel, log scale: the standard deviation of one sample of k1 and of k3, relative to the "
                f"KL, against the temperature T of pi from {sharp['T']:g} to {flat['T']:g}, with pi_ref at T = 1. "
                f"At T = {sharp['T']:g} (sharper than pi_ref) k1's is {sharp['std']['k1']:.3g} and k3's "
                f"{sharp['std']['k3']:.3g}; at T = {flat['T']:g} (flatter) k1's is {flat['std']['k1']:.3g} and "
                f"k3's {flat['std']['k3']:.3g}. The ratio std k1 / std k3 goes from {min(ratio):.3g} to "
                f"{max(ratio):.3g} over the range.")

    def display(self):
        print(self.table())
        show_png(self.figure(), self.alt())
