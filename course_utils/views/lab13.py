"""Plots and sliders of Lab 13: DPO, GRPO and Lab 12's PPO held against the exact optima.

Every figure is exact (course_utils.referee: each policy enumerated over every response of the toy),
except Lab 12's PPO, which is read from the course's reference runs (data, sampled figures). The views
train with the lab's own drivers through a ``Lab13Runs`` (each run once, in ``prepare()``: nothing while
nbgrader grades), and call the student's ``dpo_loss`` where they need DPO's implicit reward; nothing
here computes a loss. A *spec* is a (driver, config) pair, e.g. ``(train_grpo, GRPOConfig(scale=False))``:

    runs = Lab13Runs(world)
    views.Frontier(runs, {"DPO": (train_dpo, DPOConfig()), "GRPO": (train_grpo, GRPOConfig())}).show()
    views.DPOEpochs(runs, train_dpo, DPOConfig(), dpo_loss).show()
    views.GRPOGrid(runs, {("std", "KL in the loss"): spec, ...}).show()      # a 2 x 2 of specs
    views.LengthBias(runs, {"sequence": spec, "token": spec}).show()
    views.GroupSignal(runs, {"GRPO": spec}).show()
    views.BetaSlider(runs, {"DPO": spec, "GRPO": spec}, betas=(0.05, 0.1, 0.2)).show()

The functions under them (``plot_frontier(referee, {label: (policy, beta)})``, ...) draw trained policies.
"""

import dataclasses
import weakref

import numpy as np
import torch

from course_utils.response_tree import complete_only, path_logprobs, response_probs
from course_utils.tinylm import MAX_NEW
from course_utils.views.base import FastFigure, Figure, PngFigure, View, log_axis, palette, series, show_slider
from course_utils.views.lab12 import REFERENCE_PATH, last_third, load_reference_curves

CURVE_BETAS = tuple(float(b) for b in np.geomspace(0.005, 20.0, 41))   # the optima's curves, from far to near pi_ref
# plain text, not mathtext: BetaSlider redraws its legend on every frame, and mathtext's parse is slow
OPTIMUM_LABELS = {"rm": "π* of the RM (the reward model's optimum)",
                  "gold": "π* of gold (the labeler's own score: a verifiable reward)"}
KL_TICKS = (0.01, 0.1, 1, 10, 100)
KL_FLOOR = 0.01           # KLs below are drawn here (the SFT model itself is at 0)


def _kl(x):
    return max(x, KL_FLOOR)


def ppo_reference(data=None):
    """Lab 12's reference PPO runs as points: [{"beta", "kl", "gold"}], each the mean over the PPO seeds
    of the last third of the run (sampled figures: train_rlhf's KL estimate and gold). ``data``: the runs
    as ``load_reference_curves`` returns them (world.ppo_curves; default: read the file); [] if none."""
    data = load_reference_curves(REFERENCE_PATH) if data is None else data
    if data is None:
        return []
    return [{"beta": beta, "kl": float(np.mean([last_third(h, "kl") for h in runs])),
             "gold": float(np.mean([last_third(h, "gold") for h in runs]))}
            for beta, runs in sorted(data["runs"].items())]


_CURVES = weakref.WeakKeyDictionary()      # {referee: {name: referee.curve(name, CURVE_BETAS)}}


def optimum_curve(referee, name):
    """``referee.curve(name, CURVE_BETAS)``, once per referee (a referee's optima never change): the
    Frontier cell draws the curves, and BetaSlider's first draw below it draws them again (50 ms)."""
    curves = _CURVES.setdefault(referee, {})
    if name not in curves:
        curves[name] = referee.curve(name, CURVE_BETAS)
    return curves[name]


def _optimum_curves(ax, referee):
    styles = {"rm": dict(color="gray", ls="--"), "gold": dict(color="black", ls=":")}
    for name in ("rm", "gold"):
        pts = optimum_curve(referee, name)
        ax.plot([_kl(p["kl"]) for p in pts], [p["gold"] for p in pts], lw=1.5, label=OPTIMUM_LABELS[name],
                **styles[name])


def _gold_vs_kl_axes(ax, sft_gold):
    ax.axhline(sft_gold, color="gray", lw=0.8, ls="-.", label="SFT model")
    log_axis(ax, "x", KL_TICKS)
    ax.set_xlim(KL_FLOOR * 0.8, 150)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel(r"KL($\pi\,\|\,\pi_{ref}$), nats per response")
    ax.set_ylabel("gold score")


def _with_beta(label, beta):
    return label if "beta" in label else f"{label}, beta {beta:g}"


def plot_frontier(referee, points, ppo_curves=None):
    """Gold against KL to the SFT model: the optima's curves over beta, Lab 12's PPO (reference runs,
    sampled) and each trained policy (exact); next to it, each policy's exact KL to both optima of its beta.

    points: {label: (policy, beta)}. Returns a PngFigure (``display(fig)``) with its alt text.
    """
    fig = PngFigure(figsize=(13, 4.8), layout="constrained")
    ax, ax_kl = fig.subplots(1, 2, width_ratios=[1.4, 1])
    sft = referee.judge(referee.sft, 0.1)["rm"]
    _optimum_curves(ax, referee)
    ppo = ppo_reference(ppo_curves)
    if ppo:
        ax.plot([_kl(p["kl"]) for p in ppo], [p["gold"] for p in ppo], "o", mfc="none", color=palette()[2], ms=8,
                label="Lab 12's PPO (reference runs, sampled)")
        for p in ppo:
            ax.annotate(f"{p['beta']:g}", (_kl(p["kl"]), p["gold"]), xytext=(4, -10), textcoords="offset points",
                        fontsize=7, color=palette()[2])
    judged, words = {}, []
    for i, (label, (policy, beta)) in enumerate(points.items()):
        f = judged[label] = referee.judge(policy, beta)
        style = series(i + 3)
        ax.plot([_kl(f["rm"]["kl"])], [f["rm"]["gold"]], ls="none", marker=style["marker"], color=style["color"],
                ms=9, label=_with_beta(label, beta))
        words.append(f"{_with_beta(label, beta)}: KL {f['rm']['kl']:.2f}, gold {f['rm']['gold']:+.2f}, "
                     f"KL to pi*_RM {f['rm']['kl_to_opt']:.2f}, to pi*_gold {f['gold']['kl_to_opt']:.2f}")
    _gold_vs_kl_axes(ax, sft["gold"])
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title("gold against KL: the optima over beta, and where each method ends", fontsize=10)
    x = np.arange(len(points))
    for k, (name, hatch) in enumerate((("rm", None), ("gold", "//"))):
        values = [_kl(judged[label][name]["kl_to_opt"]) for label in points]
        ax_kl.bar(x + (k - 0.5) * 0.38, values, 0.38, hatch=hatch, edgecolor="white",
                  color=[series(i + 3)["color"] for i in range(len(points))],
                  label=r"to $\pi^*_{RM}$" if name == "rm" else r"to $\pi^*_{gold}$ (hatched)")
    ax_kl.set_xticks(x, [_with_beta(label, beta) for label, (_, beta) in points.items()], fontsize=7, rotation=30,
                     ha="right")
    log_axis(ax_kl, "y", KL_TICKS)
    ax_kl.set_ylim(KL_FLOOR * 0.8, 150)
    ax_kl.set_ylabel(r"KL($\pi\,\|\,\pi^*$), nats per response")
    ax_kl.set_title("exact distance to each optimum of the same beta", fontsize=10)
    ax_kl.legend(fontsize=7)
    ppo_words = "; ".join(f"beta {p['beta']:g}: KL {p['kl']:.2f}, gold {p['gold']:+.2f}" for p in ppo)
    fig.alt = ("Left: gold score against KL to the SFT model (log scale). Dashed, the reward model's optimum over beta; "
               "dotted, the labeler's optimum (a verifiable reward) over beta; circles, Lab 12's PPO reference runs "
               f"({ppo_words or 'not found'}); the SFT model's gold is {sft['gold']:+.2f}. Markers: "
               + "; ".join(words) + ". Right: the same policies' exact KL to both optima (log scale).")
    return fig


def _trained(runs, specs):
    """{label: policy} of {label: (driver, cfg)}, each trained once by ``runs`` (the new ones side by side)."""
    return {label: policy for label, (policy, _) in zip(specs, runs.run_all(specs.values()))}


class _FigureView(View):
    """A view that shows one figure, ``figure()``."""

    def display(self):
        from IPython.display import display

        display(self.figure())


class Frontier(_FigureView):
    """``plot_frontier`` of the policies that ``specs`` ({label: (driver, cfg)}) train, each at its cfg.beta."""

    def __init__(self, runs, specs):
        self.runs, self.specs = runs, dict(specs)

    def _prepare(self):
        policies = _trained(self.runs, self.specs)
        self.points = {label: (policies[label], cfg.beta) for label, (_, cfg) in self.specs.items()}

    def figure(self):
        self.prepare()
        return plot_frontier(self.runs.referee, self.points, getattr(self.runs.world, "ppo_curves", None))


# ----------------------------------------------------------------------------- DPO
def implicit_reward(dpo_loss, logp, ref, beta):
    """DPO's implicit reward beta log(pi(y) / pi_ref(y)) of every complete response, (P, N): the margin
    of the student's ``dpo_loss`` between each response and one that the policy and the reference value
    alike (log-probs 0 for both)."""
    seq, seq_ref = complete_only(path_logprobs(logp)), complete_only(path_logprobs(ref))
    zero = torch.zeros(seq.numel(), dtype=seq.dtype)
    with torch.no_grad():
        _, margins = dpo_loss(seq.flatten(), zero, seq_ref.flatten(), zero, beta)
    return margins.view(seq.shape).double()


def gold_order_accuracy(referee, scores, chunk=10):
    """Exact P(scores(y) > scores(y') | gold(y) > gold(y')) for y, y' drawn from the SFT model for the same
    prompt (a tie counts 1/2), over every prompt: the accuracy a noise-free labeler's held-out pairs would
    measure with infinitely many of them. scores: (P, N)."""
    hits = total = 0.0
    for start in range(0, scores.shape[0], chunk):
        rows = slice(start, start + chunk)
        w = complete_only(response_probs([lp[rows] for lp in referee.ref]))           # (c, N) pi_ref(y)
        gold = complete_only(referee.tree.features_of(rows))[..., 0]                  # (c, N)
        for p in range(gold.shape[0]):
            s, g, m = scores[rows][p], gold[p], w[p]
            order = torch.argsort(s)
            s, g, m = s[order], g[order], m[order]
            for hi, lo in ((1.0, 0.0), (1.0, -1.0), (0.0, -1.0)):
                lo_s, lo_m = s[g == lo], m[g == lo]
                if not len(lo_s):
                    continue
                cum = torch.cat([lo_m.new_zeros(1), lo_m.cumsum(0)])
                hi_s, hi_m = s[g == hi], m[g == hi]
                below = cum[torch.searchsorted(lo_s, hi_s, right=False)]
                at_most = cum[torch.searchsorted(lo_s, hi_s, right=True)]
                hits += float((hi_m * (below + 0.5 * (at_most - below))).sum())
                total += float(hi_m.sum() * cum[-1])
    return hits / total


class DPOEpochs(_FigureView):
    """DPO epoch by epoch: the exact gold score and KL to both optima, the pair accuracy of the implicit
    reward on the training and held-out pairs (from the driver's history), and, exact, against the
    labeler's noise-free order on pairs of SFT samples (through the student's ``dpo_loss``).

    ``train_dpo(world, cfg, after=...)`` is run once with a snapshot of the policy after each epoch (its
    history's "after", "train_acc", "held_acc"). ``epochs_of(referee, epochs, beta, dpo_loss)`` draws given
    snapshots: [{"policy", "train_acc", "held_acc"}, ...].
    """

    def __init__(self, runs, train_dpo, cfg, dpo_loss=None):
        self.runs, self.train_dpo, self.cfg, self.dpo_loss = runs, train_dpo, cfg, dpo_loss
        self.beta = cfg.beta

    @classmethod
    def epochs_of(cls, referee, epochs, beta, dpo_loss=None):
        view = cls.__new__(cls)
        view.referee, view.epochs, view.beta, view.dpo_loss = referee, list(epochs), beta, dpo_loss
        view._judge()
        view._prepared = True
        return view

    def _prepare(self):
        _, hist = self.runs.run(self.train_dpo, self.cfg)
        self.referee = self.runs.referee
        self.epochs = [{"policy": p, "train_acc": a, "held_acc": b}
                       for p, a, b in zip(hist["after"], hist["train_acc"], hist["held_acc"])]
        self._judge()

    def _judge(self):
        r = self.referee
        self.rows = []
        for e in [{"policy": r.sft}] + self.epochs:
            logp = r.logp(e["policy"])                       # once per epoch: judged, then its implicit reward
            f = r.judge(logp, self.beta)
            row = {"gold": f["rm"]["gold"], "kl": f["rm"]["kl"], "kl_to_rm": f["rm"]["kl_to_opt"],
                   "kl_to_gold": f["gold"]["kl_to_opt"], "train_acc": e.get("train_acc"), "held_acc": e.get("held_acc")}
            if self.dpo_loss is not None:
                row["noise_free"] = gold_order_accuracy(r, implicit_reward(self.dpo_loss, logp, r.ref, self.beta))
            self.rows.append(row)

    def figure(self):
        self.prepare()
        fig = PngFigure(figsize=(13, 3.8), layout="constrained")
        ax_gold, ax_kl, ax_acc = fig.subplots(1, 3)
        x = np.arange(len(self.rows))
        c = palette()
        ax_gold.plot(x, [r["gold"] for r in self.rows], "o-", color=c[0], label="DPO (epoch 0: the SFT model)")
        opt = self.referee.optimum("gold", self.beta).stats.gold
        ax_gold.axhline(opt, color="black", ls=":", lw=1, label=rf"$\pi^*_{{gold}}$ at $\beta$ = {self.beta:g}")
        ax_gold.set_title("gold score, exact", fontsize=10)
        ax_kl.plot(x, [_kl(r["kl_to_rm"]) for r in self.rows], "s--", color=c[1], label=r"KL($\pi\,\|\,\pi^*_{RM}$)")
        ax_kl.plot(x, [_kl(r["kl_to_gold"]) for r in self.rows], "o-", color=c[0], label=r"KL($\pi\,\|\,\pi^*_{gold}$)")
        ax_kl.plot(x, [_kl(r["kl"]) for r in self.rows], "^:", color=c[2], label=r"KL($\pi\,\|\,\pi_{ref}$)")
        log_axis(ax_kl, "y", KL_TICKS)
        ax_kl.set_title("distances, exact (nats per response)", fontsize=10)
        for key, label, style in (("train_acc", "training pairs", "x--"), ("held_acc", "held-out pairs", "o-"),
                                  ("noise_free", "noise-free order, SFT pairs (exact)", "D:")):
            pts = [(i, r[key]) for i, r in enumerate(self.rows) if r.get(key) is not None]
            if pts:
                ax_acc.plot(*zip(*pts), style, label=label)
        ax_acc.set_title("implicit reward's pair accuracy", fontsize=10)
        for ax in (ax_gold, ax_kl, ax_acc):
            ax.set_xticks(x)
            ax.set_xlabel("epoch")
            ax.legend(fontsize=7)
        fig.alt = (f"DPO at beta {self.beta:g}, epoch by epoch (0 is the SFT model). "
                   + "; ".join(self._words(i, r) for i, r in enumerate(self.rows)) + ".")
        return fig

    def table(self):
        """The rows as text: what the figure shows, one line per epoch."""
        self.prepare()
        return "\n".join(self._words(i, r) for i, r in enumerate(self.rows))

    @staticmethod
    def _words(i, r):
        text = (f"epoch {i}: gold {r['gold']:+.3f}, KL to pi*_gold {r['kl_to_gold']:.2f}, to pi*_RM {r['kl_to_rm']:.2f}, "
                f"to the SFT model {r['kl']:.2f}")
        for key, name in (("train_acc", "training"), ("held_acc", "held-out"), ("noise_free", "noise-free exact")):
            if r.get(key) is not None:
                text += f", {name} accuracy {r[key]:.3f}"
        return text


# ----------------------------------------------------------------------------- GRPO
class GRPOGrid(_FigureView):
    """A 2 x 2 of GRPO runs: each cell's exact KL to pi*_RM of its beta, and its gold score.

    cells: {(row label, column label): (driver, cfg)}, e.g. {("std scaling", "KL in the loss"): spec, ...},
    every cfg at the same beta.
    """

    def __init__(self, runs, cells):
        self.runs, self.cells = runs, dict(cells)
        self.beta = next(iter(self.cells.values()))[1].beta

    def _prepare(self):
        policies = _trained(self.runs, self.cells)
        self.figures = {k: self.runs.referee.judge(p, self.beta)["rm"] for k, p in policies.items()}
        self.rows = list(dict.fromkeys(r for r, _ in self.cells))
        self.cols = list(dict.fromkeys(c for _, c in self.cells))

    def figure(self):
        self.prepare()
        fig = PngFigure(figsize=(10, 3.6), layout="constrained")
        axes = fig.subplots(1, 2)
        for ax, key, title, fmt in ((axes[0], "kl_to_opt", rf"KL($\pi\,\|\,\pi^*_{{RM}}$), $\beta$ = {self.beta:g}", "{:.2f}"),
                                    (axes[1], "gold", "gold score", "{:+.2f}")):
            grid = np.array([[self.figures.get((r, c), {}).get(key, np.nan) for c in self.cols] for r in self.rows])
            shown = np.log10(np.maximum(grid, KL_FLOOR)) if key == "kl_to_opt" else grid
            ax.imshow(shown, cmap="Greys" if key == "kl_to_opt" else "RdYlGn", vmin=None if key == "kl_to_opt" else -1,
                      vmax=None if key == "kl_to_opt" else 1, aspect="auto")
            for i in range(len(self.rows)):
                for j in range(len(self.cols)):
                    v = grid[i, j]
                    dark = key == "kl_to_opt" and np.isfinite(v) and shown[i, j] > np.nanmean(shown)
                    ax.text(j, i, "-" if np.isnan(v) else fmt.format(v), ha="center", va="center", fontsize=12,
                            color="white" if dark else "black")
            ax.set_xticks(range(len(self.cols)), self.cols, fontsize=8)
            ax.set_yticks(range(len(self.rows)), self.rows, fontsize=8)
            ax.set_title(title, fontsize=10)
        fig.alt = (f"GRPO's 2 x 2 at beta {self.beta:g}, exact: " + "; ".join(
            f"{r}, {c}: KL to pi*_RM {f['kl_to_opt']:.2f}, gold {f['gold']:+.2f}" for (r, c), f in self.figures.items()) + ".")
        return fig


class LengthBias(View):
    """Response lengths, exact: for the SFT model and each policy, P(L tokens) for L = 1..4, and how much
    a response of L tokens weighs in a token mean relative to a response mean, L / E[L] (a batch of many
    responses: each token weighs 1/N there, N = B E[L]; a response 1/B here)."""

    def __init__(self, runs, specs):
        self.runs, self.specs = runs, dict(specs)

    def _prepare(self):
        r = self.runs.referee
        self.dist = {"SFT model": r.lengths(r.sft), **{k: r.lengths(p) for k, p in _trained(self.runs, self.specs).items()}}
        self.mean = {k: float((d * torch.arange(1, MAX_NEW + 1)).sum()) for k, d in self.dist.items()}

    def table(self):
        self.prepare()
        head = f"{'':<28}" + "".join(f"{f'L = {L}':>9}" for L in range(1, MAX_NEW + 1)) + f"{'E[L]':>9}"
        lines = ["P(a response has L tokens), exact, and a response's weight in a token mean / in a response mean",
                 head]
        for k, d in self.dist.items():
            lines.append(f"{k:<28}" + "".join(f"{x:9.3f}" for x in d.tolist()) + f"{self.mean[k]:9.2f}")
            lines.append(f"{'  token / response weight':<28}"
                         + "".join(f"{L / self.mean[k]:9.2f}" for L in range(1, MAX_NEW + 1)))
        return "\n".join(lines)

    def display(self):
        print(self.table())


def reward_levels(rewards, chunk=10):
    """The distinct rewards of the complete responses, sorted: (G,), as ``torch.unique(complete_only(rewards))``,
    from ``chunk`` prompts at a time. rewards: tree tensors (P, S_d, 13)."""
    P = rewards[0].shape[0]
    return torch.unique(torch.cat([torch.unique(complete_only([r[start:start + chunk] for r in rewards]))
                                   for start in range(0, P, chunk)]))


def no_signal(referee, policy, ks, chunk=10):
    """Exact P(all k responses to a prompt get the same score) (a GRPO group with no advantage) for each k,
    averaged over the prompts, scored by the reward model and by the labeler's gold score:
    {"rm": [...], "gold": [...]}. ``chunk`` prompts at a time: no (P, N) temporaries."""
    logp = referee.logp(policy)
    rewards = {name: referee.rewards[name] for name in ("rm", "gold")}
    levels = {name: reward_levels(r, chunk) for name, r in rewards.items()}                 # (G,) each
    P = logp[0].shape[0]
    mass = {name: logp[0].new_zeros(P, len(lv)) for name, lv in levels.items()}            # (P, G): pi(level)
    for start in range(0, P, chunk):
        rows = slice(start, start + chunk)
        probs = complete_only(response_probs([lp[rows] for lp in logp]))                   # (c, N)
        for name, r in rewards.items():
            which = torch.searchsorted(levels[name], complete_only([t[rows] for t in r]))   # (c, N) each one's level
            mass[name][rows].scatter_add_(1, which, probs)
    return {name: [float((m ** k).sum(1).mean()) for k in ks] for name, m in mass.items()}


def plot_group_signal(referee, policies, ks=(2, 3, 4, 6, 8, 12, 16)):
    """The share of GRPO's groups that carry no signal, over the group size k, exact, for each policy:
    scored by the reward model (solid) and by the labeler's gold score, a verifiable reward (dashed)."""
    fig = PngFigure(figsize=(7, 3.8), layout="constrained")
    ax = fig.subplots()
    words = []
    for i, (label, policy) in enumerate(policies.items()):
        zero = no_signal(referee, policy, ks)
        color = palette()[i]
        ax.plot(ks, zero["rm"], "o-", color=color, label=f"{label}, reward model")
        ax.plot(ks, zero["gold"], "s--", color=color, label=f"{label}, gold (verifiable)")
        words.append(f"{label}: reward model " + ", ".join(f"k={k} {v:.2f}" for k, v in zip(ks, zero["rm"]))
                     + "; gold " + ", ".join(f"k={k} {v:.2f}" for k, v in zip(ks, zero["gold"])))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ks, [str(k) for k in ks])
    ax.minorticks_off()
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("group size k")
    ax.set_ylabel("P(every score in the group equal)")
    ax.set_title("groups with no signal (advantage 0 for all k), exact", fontsize=10)
    ax.legend(fontsize=7)
    fig.alt = "Share of groups whose k scores are all equal, exact, over k: " + "; ".join(words) + "."
    return fig


class GroupSignal(_FigureView):
    """``plot_group_signal`` of the SFT model and of the policies ``specs`` ({label: (driver, cfg)}) train."""

    def __init__(self, runs, specs, ks=(2, 3, 4, 6, 8, 12, 16)):
        self.runs, self.specs, self.ks = runs, dict(specs), ks

    def _prepare(self):
        self.policies = {"SFT model": self.runs.world.sft, **_trained(self.runs, self.specs)}

    def figure(self):
        self.prepare()
        return plot_group_signal(self.runs.referee, self.policies, self.ks)


# ----------------------------------------------------------------------------- the slider
def _clear_of(legend, artists, renderer):
    """Whether none of ``artists`` (at any beta: hidden ones too) touches ``legend``'s box: then the legend can
    stay in the static background, under them, with the same pixels as drawn over them (~20 ms a frame less)."""
    box = legend.get_window_extent(renderer)
    return not any(a.get_window_extent(renderer).overlaps(box) for a in artists if a.axes is legend.axes)


def _frame(fig, moving, legend):
    """FastFigure of ``fig`` with the ``moving`` artists, and ``legend`` in the static background if no moving
    artist touches it (``_clear_of``), else drawn over them each frame (a second first render)."""
    frame = FastFigure(fig, moving)
    return frame if _clear_of(legend, moving, frame.canvas.get_renderer()) else FastFigure(fig, moving + [legend])


class BetaSlider(View):
    """Every trained policy at one beta: where it ends on the gold-against-KL plane with the optima's
    curves, and its exact KL to both optima of that beta. ``update(beta)`` -> PNG bytes.

    specs: {label: (driver, cfg)}, run at each of ``betas`` (``dataclasses.replace(cfg, beta=...)``). Each
    run is trained and judged once: show them in an earlier cell (``Frontier``) and a frame costs tens of
    milliseconds. ``BetaSlider.of(referee, {beta: {label: policy}})`` draws given policies.
    """

    def __init__(self, runs, specs, betas=(0.05, 0.1, 0.2), beta=None):
        self.source, self.specs, self.betas = runs, dict(specs), tuple(float(b) for b in betas)
        self.beta = float(beta) if beta is not None else self.betas[len(self.betas) // 2]

    @classmethod
    def of(cls, referee, policies, beta=None):
        view = cls.__new__(cls)
        view.referee, view.runs = referee, {float(b): dict(r) for b, r in policies.items()}
        view.beta = float(beta) if beta is not None else sorted(view.runs)[len(view.runs) // 2]
        return view

    def _prepare(self):
        if not hasattr(self, "runs"):
            self.referee = self.source.referee
            trained = _trained(self.source, {(b, label): (driver, dataclasses.replace(cfg, beta=b))
                                             for b in self.betas for label, (driver, cfg) in self.specs.items()})
            self.runs = {b: {label: trained[b, label] for label in self.specs} for b in self.betas}
        self.figures = {b: {k: self.referee.judge(p, b) for k, p in r.items()} for b, r in self.runs.items()}
        self.labels = list(dict.fromkeys(k for r in self.runs.values() for k in r))
        self.optima = {name: {b: self.referee.optimum(name, b).stats for b in self.runs} for name in ("rm", "gold")}
        self.fig = Figure(figsize=(12, 4), dpi=75)
        self.fig.subplots_adjust(left=0.07, right=0.98, bottom=0.17, top=0.88, wspace=0.25)
        self.ax, self.ax_kl = self.fig.subplots(1, 2)
        _optimum_curves(self.ax, self.referee)
        _gold_vs_kl_axes(self.ax, self.referee.judge(self.referee.sft, self.beta)["rm"]["gold"])
        self.shown = {b: self._artists(b) for b in sorted(self.runs)}        # each beta's points and bars
        self._legend(self.ax, loc="lower left")
        self.ax_kl.set_xticks(range(len(self.labels)), self.labels, fontsize=8)
        log_axis(self.ax_kl, "y", KL_TICKS)
        self.ax_kl.set_ylim(KL_FLOOR * 0.8, 150)
        self.ax_kl.set_title("KL(π ‖ π*) to both optima of this β, exact", fontsize=10, y=1.0)
        self._legend(self.ax_kl)
        moving = [a for artists in self.shown.values() for a in artists] + [self.ax.title]
        self.frame, self.frames = _frame(self.fig, moving, self.ax.legend_), {}   # axes, curves and labels drawn once

    def _artists(self, beta):
        """The points of both optima and of every policy at ``beta`` (left) and their bars of KL to both
        optima (right, one slot per policy label): the artists a frame of ``beta`` shows."""
        figs, artists = self.figures[beta], []
        for name, marker in (("rm", "P"), ("gold", "X")):
            s = self.optima[name][beta]
            artists += self.ax.plot([_kl(s.kl)], [s.gold], marker, color="black", ms=10,
                                    label=f"π* of {'the RM' if name == 'rm' else name} at this β")
        for i, label in enumerate(self.labels):
            if label in figs:
                f, style = figs[label]["rm"], series(i + 3)
                artists += self.ax.plot([_kl(f["kl"])], [f["gold"]], ls="none", marker=style["marker"],
                                        color=style["color"], ms=9, label=label)
        x = np.array([self.labels.index(label) for label in figs])
        for k, (name, hatch) in enumerate((("rm", None), ("gold", "//"))):
            artists += self.ax_kl.bar(x + (k - 0.5) * 0.38, [_kl(f[name]["kl_to_opt"]) for f in figs.values()], 0.38,
                                      hatch=hatch, edgecolor="white",
                                      color=[series(self.labels.index(lb) + 3)["color"] for lb in figs],
                                      label=r"to $\pi^*_{RM}$" if name == "rm" else r"to $\pi^*_{gold}$ (hatched)").patches
        return artists

    @staticmethod
    def _legend(ax, **kwargs):
        """A legend of ``ax`` naming each label once (every beta has its own artists of the same labels)."""
        entries = dict(zip(*reversed(ax.get_legend_handles_labels())))                    # {label: handle}
        ax.legend(list(entries.values()), list(entries), fontsize=7, **kwargs)

    def draw(self, beta):
        """Show the artists of ``beta`` only, and its title."""
        for b, artists in self.shown.items():
            for a in artists:
                a.set_visible(b == beta)
        # plain text, y given: a new title is a new mathtext parse, and automatic placement is slow
        self.ax.set_title(f"β = {beta:g}: gold against KL (curves: the optima over β)", fontsize=10, y=1.0)

    def update(self, value):
        """The frame at beta ``value``: drawn on its first visit, then kept (a beta's frame is fixed by its
        runs, and the slider has a few betas: show_slider's static picture draws them all)."""
        self.prepare()
        self.beta = float(value)
        if self.beta not in self.frames:
            self.draw(self.beta)
            self.frames[self.beta] = self.frame.png()
        return self.frames[self.beta]

    def caption(self):
        figs = self.figures[self.beta]
        return (f"beta = {self.beta:g}: " + ", ".join(
            f"{k} gold {f['rm']['gold']:+.2f}, KL to pi*_RM {f['rm']['kl_to_opt']:.2f}" for k, f in figs.items())
            + f"; pi*_RM gold {self.optima['rm'][self.beta].gold:+.2f}, pi*_gold gold {self.optima['gold'][self.beta].gold:+.2f}")

    def alt(self):
        return ("Left: gold against KL to the SFT model, with the two optima's curves over beta and, at this beta, "
                "both optima and every trained policy; right: each policy's exact KL to both optima. " + self.caption() + ".")

    def display(self):
        import ipywidgets as W

        slider = W.SelectionSlider(options=[(f"{b:g}", b) for b in sorted(self.runs)], value=self.beta,
                                   description="beta", continuous_update=False)
        show_slider(self, slider, "beta")


__all__ = ["CURVE_BETAS", "ppo_reference", "plot_frontier", "Frontier", "implicit_reward", "gold_order_accuracy",
           "DPOEpochs", "GRPOGrid", "LengthBias", "reward_levels", "no_signal", "plot_group_signal", "GroupSignal", "BetaSlider"]
