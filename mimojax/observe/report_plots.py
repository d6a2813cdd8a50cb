"""The run report's plots: one matplotlib panel per thing a run logged, and the grid of them.

`render(run)` draws every panel with data for `run` = {"rows", "evals", "warmup"} (the metrics
rows, observe/summary.py's eval_points, the tool-use warm-up's record or None) and returns the
PNGs; observe/report.py puts them in report.html and report.png.
"""

from __future__ import annotations

import io
import math

from mimojax.observe.summary import base_model_accs, finite, is_train_row, phase_names, series

# ---------------------------------------------------------------------------------------------
# Panels: each draws on one Axes and returns False when the run logged nothing for it.


def _panel_reward(ax, run) -> bool:
    steps, mean = series(run["rows"], "critic/score/mean")
    if not steps:
        return False
    lo = dict(zip(*series(run["rows"], "critic/score/min")))
    hi = dict(zip(*series(run["rows"], "critic/score/max")))
    band = [s for s in steps if s in lo and s in hi]
    if band:
        ax.fill_between(
            band, [lo[s] for s in band], [hi[s] for s in band], alpha=0.2, label="min-max"
        )
    ax.plot(steps, mean, label="mean")
    ax.set(title="reward (critic/score)", xlabel="step")
    ax.legend(fontsize=7)
    return True


def _panel_heldout(ax, run) -> bool:
    points = run["evals"]
    if not points:
        return False
    timed = all(p["minutes"] is not None for p in points)
    x = [p["minutes"] if timed else p["step"] for p in points]
    curves = sorted({key for p in points for key in p["vals"]})
    envs = sorted({env for env, _ in curves})
    for env, kind in curves:
        color = f"C{envs.index(env)}"
        tag = f"{env} " if len(envs) > 1 else ""
        xy = [
            (xi, 100 * p["vals"][env, kind]) for xi, p in zip(x, points) if (env, kind) in p["vals"]
        ]
        style = "o-" if kind == "greedy" else "s:"
        ax.plot(
            *zip(*xy), style, color=color, alpha=1 if kind == "greedy" else 0.6, label=tag + kind
        )
        if kind == "greedy":
            base = base_model_accs(run.get("warmup")).get(env)
            start = "after warm-up" if base is not None else "base"
            ax.axhline(xy[0][1], ls="--", color=color, lw=1, label=f"{tag}{start}")
            if base is not None:  # the model before the tool-use warm-up
                ax.axhline(100 * base, ls=":", color=color, lw=1, label=f"{tag}base model")
    xlabel = "training wall time (min)" if timed else "step"
    ax.set(title="held-out accuracy (%)", xlabel=xlabel)
    ax.legend(fontsize=7)
    return True


def _panel_tools(ax, run) -> bool:
    """Tool agents: how often they call, how often a call runs, and what the correct used."""
    rows, drawn = run["rows"], False
    for key, label in (
        ("agent_loop/tool_call_rate", "called a tool"),
        ("agent_loop/valid_call_rate", "calls that ran"),
        ("agent_loop/correct_with_tool", "correct answers using it"),
    ):
        steps, values = series(rows, key)
        if steps:
            ax.plot(steps, [100 * v for v in values], label=label)
            drawn = True
    if not drawn:
        return False
    cs, calls = series(rows, "tool_call_counts/mean")
    if cs:
        twin = ax.twinx()
        twin.plot(cs, calls, "k:", lw=1)
        twin.set_ylabel("calls / trajectory (dotted)", fontsize=8)
    ax.set(title="tool use (%)", xlabel="step", ylim=(-2, 102))
    ax.legend(fontsize=7)
    return True


def _panel_length(ax, run) -> bool:
    steps, mean = series(run["rows"], "response_length/mean")
    if not steps:
        return False
    ax.plot(steps, mean, label="mean length")
    ax.set(title="response length (tokens)", xlabel="step")
    cs, clip = series(run["rows"], "response_length/clip_ratio")
    if cs:
        twin = ax.twinx()
        twin.plot(cs, [100 * c for c in clip], color="C3", alpha=0.7, label="clipped (%)")
        twin.set_ylabel("clipped (%)", color="C3", fontsize=8)
    return True


def _panel_kl_entropy(ax, run) -> bool:
    rows = run["rows"]
    kl_key = "actor/kl_loss" if series(rows, "actor/kl_loss")[0] else "actor/ppo_kl"
    ks, kl = series(rows, kl_key)
    es, ent = series(rows, "actor/entropy")
    if not ks and not es:
        return False
    if ks:
        ax.plot(ks, kl, color="C0", label=kl_key)
        ax.set_ylabel(kl_key.split("/")[1], color="C0", fontsize=8)
    if es:
        other = ax.twinx() if ks else ax
        other.plot(es, ent, color="C1", label="actor/entropy")
        other.set_ylabel("entropy", color="C1", fontsize=8)
    ax.set(title="KL and entropy", xlabel="step")
    return True


def _panel_timing(ax, run) -> bool:
    train = [r for r in run["rows"] if is_train_row(r)]
    phases = phase_names(train)
    ss, step_s = series(train, "timing_s/step")
    if not phases and not ss:
        return False
    if phases:
        steps = [r["step"] for r in train]
        stack = [[finite(r.get(f"timing_s/{p}")) or 0.0 for r in train] for p in phases]
        ax.stackplot(steps, stack, labels=phases, alpha=0.8)
    if ss:
        ax.plot(ss, step_s, "k--", lw=1, label="step")
    ax.set(title="seconds per step by phase", xlabel="step")
    ax.legend(fontsize=6, ncol=2, loc="upper left")
    return True


def _panel_throughput(ax, run) -> bool:
    steps, tps = series(run["rows"], "perf/throughput")
    if not steps:
        return False
    ax.plot(steps, tps)
    ax.set(title="throughput (tokens/s)", xlabel="step")
    return True


def _panel_lag(ax, run) -> bool:
    steps, lag = series(run["rows"], "rollout/policy_version_lag")
    if not lag or max(lag) <= 0:  # a synchronous run has lag 0 throughout: nothing to show
        return False
    ax.plot(steps, lag)
    ax.set(title="policy version lag", xlabel="step")
    return True


PANELS = (
    _panel_reward,
    _panel_heldout,
    _panel_tools,
    _panel_length,
    _panel_kl_entropy,
    _panel_timing,
    _panel_throughput,
    _panel_lag,
)


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _style(ax) -> None:
    ax.title.set_fontsize(10)
    ax.tick_params(labelsize=8)
    ax.xaxis.label.set_fontsize(8)
    ax.grid(alpha=0.3)


def render(run) -> tuple[bytes, list[tuple[str, bytes]]]:
    """(the grid figure's PNG, [(title, PNG)] one per panel with data)."""
    # The object API, not pyplot: no global backend state and nothing kept alive between reports.
    from matplotlib.figure import Figure

    singles = []
    for panel in PANELS:
        fig = Figure(figsize=(6.0, 3.4), layout="constrained")
        ax = fig.add_subplot()
        if panel(ax, run):
            _style(ax)
            singles.append((panel, ax.get_title(), _png(fig)))
    if not singles:
        fig = Figure(figsize=(4.0, 1.0))
        fig.text(0.5, 0.5, "no plottable metrics in this run", ha="center", va="center")
        return _png(fig), []
    n = len(singles)
    ncols = 3 if n > 4 else min(n, 2)
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(4.3 * ncols, 3.1 * nrows), layout="constrained")
    for i, (panel, _, _) in enumerate(singles):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        panel(ax, run)
        _style(ax)
    return _png(fig), [(title, png) for _, title, png in singles]
