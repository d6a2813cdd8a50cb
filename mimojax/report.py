"""The run report: what a run's compute bought, from WORKDIR/metrics.jsonl (and run_info.json).

`write_report(workdir)` writes a self-contained report.html (headline numbers, the plots as
embedded PNGs, the run's config) and report.png (all panels in one figure). Metric names follow
verl. `perf/total_num_tokens` is read as verl logs it: the tokens of that step, so the run's total
is their sum. Held-out accuracy is `val-core/<env>/acc/greedy`; with several envs the headline
uses their mean.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import re

GREEDY_RE = re.compile(r"^val-core/(?P<env>.+)/acc/greedy$")
PASSK_RE = re.compile(r"^val-core/(?P<env>.+)/pass@(?P<k>\d+)$")
THRESHOLDS_POINTS = (10, 20, 30)
# Stack order of the timing panel: the order of phases within one step.
PHASE_ORDER = ("gen", "reward", "old_log_prob", "ref", "values", "adv", "update_critic")
PHASE_ORDER += ("update_actor", "sync_weights")
# Thresholds compare float differences of fractions; 0.5 - 0.3 must count as +20 points.
_EPS = 1e-9


def read_metrics_jsonl(path: str) -> list[dict]:
    """One row per step from a metrics.jsonl, sorted by step; a trailing partial line is skipped.

    Lines repeating a step (an eval line, or steps logged again after a resume) merge into that
    step's row, later values winning.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no metrics file at {path} (the trainer writes it to its workdir)")
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    by_step: dict[int, dict] = {}
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            # Only the last line can be cut short (a writer killed mid-write); it has no newline.
            if i == len(lines) - 1:
                continue
            raise ValueError(f"{path}:{i + 1}: not valid JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{i + 1}: expected a JSON object, got {type(row).__name__}")
        step = row.get("step")
        if isinstance(step, bool) or not isinstance(step, (int, float)) or step != int(step):
            raise ValueError(f"{path}:{i + 1}: 'step' must be an integer, got {step!r}")
        by_step.setdefault(int(step), {}).update(row, step=int(step))
    if not by_step:
        raise ValueError(f"{path}: no complete metrics rows")
    return [by_step[s] for s in sorted(by_step)]


def _num(v) -> float | None:
    """A finite float, or None for anything else (missing, NaN, strings, bools)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of the rows where `key` holds a finite number."""
    pairs = [(r["step"], _num(r.get(key))) for r in rows]
    pairs = [(s, v) for s, v in pairs if v is not None]
    return [s for s, _ in pairs], [v for _, v in pairs]


def _is_train_row(row: dict) -> bool:
    return any(k != "step" and not k.startswith("val-") for k in row)


def _cumulative_wall_s(rows: list[dict]) -> list[float] | None:
    """Training wall seconds reached at each row, or None when the run logs no timing."""
    if any(_num(r.get("perf/wall_s")) is not None for r in rows):
        # Carried forward: an eval-only row sits at the time the training before it ended.
        out, last = [], 0.0
        for r in rows:
            v = _num(r.get("perf/wall_s"))
            last = last if v is None else v
            out.append(last)
        return out
    if any(_num(r.get("timing_s/step")) is not None for r in rows):
        return _cumsum(_num(r.get("timing_s/step")) or 0.0 for r in rows)
    return None


def _cumsum(values) -> list[float]:
    out, total = [], 0.0
    for v in values:
        total += v
        out.append(total)
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _eval_points(rows: list[dict], wall_s, tokens) -> list[dict]:
    """Per eval row: step, minutes, tokens, {(env, "greedy" | "pass@k"): value}, and their means.

    `acc` is the mean greedy accuracy over envs, `pass` maps k to the mean pass@k over envs.
    """
    points = []
    for i, r in enumerate(rows):
        vals, passk = {}, {}
        for key, v in r.items():
            if _num(v) is None:
                continue
            if m := GREEDY_RE.match(key):
                vals[m["env"], "greedy"] = float(v)
            elif m := PASSK_RE.match(key):
                vals[m["env"], f"pass@{m['k']}"] = float(v)
                passk.setdefault(int(m["k"]), []).append(float(v))
        if vals:
            points.append(
                {
                    "step": r["step"],
                    "minutes": None if wall_s is None else wall_s[i] / 60.0,
                    "tokens": None if tokens is None else tokens[i],
                    "vals": vals,
                    "acc": _mean([v for (_, kind), v in vals.items() if kind == "greedy"]),
                    "pass": {k: _mean(v) for k, v in sorted(passk.items())},
                }
            )
    return points


def _derive(rows: list[dict]):
    """(cumulative wall s per row or None, cumulative tokens per row or None, eval points)."""
    wall_s = _cumulative_wall_s(rows)
    tokens = None
    if any(_num(r.get("perf/total_num_tokens")) is not None for r in rows):
        tokens = _cumsum(_num(r.get("perf/total_num_tokens")) or 0.0 for r in rows)
    return wall_s, tokens, _eval_points(rows, wall_s, tokens)


def _set(out: dict, key: str, value) -> None:
    """Store only what the run logged: a missing metric leaves its key out."""
    if value is not None:
        out[key] = value


def summarize_run(rows: list[dict]) -> dict:
    """Headline numbers: time, tokens, held-out accuracy lift and its rate, phase split, lag."""
    train = [r for r in rows if _is_train_row(r)]
    out: dict = {"steps": len(train)}
    _set(out, "last_step", rows[-1]["step"] if rows else None)
    wall_s, tokens, points = _derive(rows)
    if wall_s is not None:
        out["train_wall_s"] = wall_s[-1]
        out["train_minutes"] = wall_s[-1] / 60.0
    if tokens is not None:
        out["total_tokens"] = tokens[-1]
    _set(out, "mean_tokens_per_s", _mean(_series(rows, "perf/throughput")[1]))

    evals = [p for p in points if p["acc"] is not None]
    if evals:
        base, final = evals[0], evals[-1]
        best = max(evals, key=lambda p: p["acc"])
        out.update(base_acc=base["acc"], base_step=base["step"], final_acc=final["acc"])
        out.update(final_step=final["step"], best_acc=best["acc"], best_step=best["step"])
        out["envs"] = sorted({env for p in evals for env, kind in p["vals"] if kind == "greedy"})
        out["lift_points"] = 100.0 * (final["acc"] - base["acc"])
        out["best_lift_points"] = 100.0 * (best["acc"] - base["acc"])
        # The rates charge the lift to the compute spent between the base and the final eval.
        if final["minutes"] is not None and base["minutes"] is not None:
            minutes = final["minutes"] - base["minutes"]
            out["eval_minutes"] = minutes
            if minutes > 0:
                out["points_per_minute"] = out["lift_points"] / minutes
        if final["tokens"] is not None and base["tokens"] is not None:
            spent = final["tokens"] - base["tokens"]
            out["eval_tokens"] = spent
            if spent > 0:
                out["points_per_million_tokens"] = out["lift_points"] / (spent / 1e6)
        out["time_to_points"] = {
            t: next(
                (
                    {"step": p["step"], "minutes": p["minutes"], "tokens": p["tokens"]}
                    for p in evals
                    if 100.0 * (p["acc"] - base["acc"]) >= t - _EPS
                ),
                None,
            )
            for t in THRESHOLDS_POINTS
        }
    pass_at_k = {}
    for p in points:
        for k, v in p["pass"].items():
            pass_at_k.setdefault(k, {"base": v})["final"] = v
    if pass_at_k:
        out["pass_at_k"] = dict(sorted(pass_at_k.items()))

    _phase_split(train, out)
    lag = _series(train, "rollout/policy_version_lag")[1]
    if lag:
        out.update(policy_version_lag_mean=_mean(lag), policy_version_lag_max=max(lag))
    skipped = _series(train, "train/skipped_updates")[1]
    if skipped:
        out["skipped_updates"] = sum(skipped)
    return out


def _phase_names(rows: list[dict]) -> list[str]:
    """The timing_s/* phases logged (not the step total), in step order then by name."""
    found = {k[len("timing_s/") :] for r in rows for k in r if k.startswith("timing_s/")}
    found.discard("step")
    order = {p: i for i, p in enumerate(PHASE_ORDER)}
    return sorted(found, key=lambda p: (order.get(p, len(order)), p))


def _phase_split(train: list[dict], out: dict) -> None:
    """Mean seconds per step and each phase's share of timing_s/step (summed over steps)."""
    steps = [r for r in train if _num(r.get("timing_s/step")) is not None]
    if not steps:
        return
    total = sum(_num(r["timing_s/step"]) for r in steps)
    out["step_s"] = total / len(steps)
    phases = {p: [_num(r.get(f"timing_s/{p}")) or 0.0 for r in steps] for p in _phase_names(steps)}
    out["phase_s"] = {p: sum(v) / len(steps) for p, v in phases.items()}
    if total > 0:
        out["phase_share"] = {p: sum(v) / total for p, v in phases.items()}
        # Async runs overlap phases, so the shares may sum past 1; then there is no remainder.
        rest = 1.0 - sum(out["phase_share"].values())
        if rest > 0.005:
            out["phase_share"]["other"] = rest
            out["phase_s"]["other"] = rest * out["step_s"]


# ---------------------------------------------------------------------------------------------
# Panels: each draws on one Axes and returns False when the run logged nothing for it.


def _panel_reward(ax, run) -> bool:
    steps, mean = _series(run["rows"], "critic/score/mean")
    if not steps:
        return False
    lo = dict(zip(*_series(run["rows"], "critic/score/min")))
    hi = dict(zip(*_series(run["rows"], "critic/score/max")))
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
            ax.axhline(xy[0][1], ls="--", color=color, lw=1, label=f"{tag}base")
    xlabel = "training wall time (min)" if timed else "step"
    ax.set(title="held-out accuracy (%)", xlabel=xlabel)
    ax.legend(fontsize=7)
    return True


def _panel_length(ax, run) -> bool:
    steps, mean = _series(run["rows"], "response_length/mean")
    if not steps:
        return False
    ax.plot(steps, mean, label="mean length")
    ax.set(title="response length (tokens)", xlabel="step")
    cs, clip = _series(run["rows"], "response_length/clip_ratio")
    if cs:
        twin = ax.twinx()
        twin.plot(cs, [100 * c for c in clip], color="C3", alpha=0.7, label="clipped (%)")
        twin.set_ylabel("clipped (%)", color="C3", fontsize=8)
    return True


def _panel_kl_entropy(ax, run) -> bool:
    rows = run["rows"]
    kl_key = "actor/kl_loss" if _series(rows, "actor/kl_loss")[0] else "actor/ppo_kl"
    ks, kl = _series(rows, kl_key)
    es, ent = _series(rows, "actor/entropy")
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
    train = [r for r in run["rows"] if _is_train_row(r)]
    phases = _phase_names(train)
    ss, step_s = _series(train, "timing_s/step")
    if not phases and not ss:
        return False
    if phases:
        steps = [r["step"] for r in train]
        stack = [[_num(r.get(f"timing_s/{p}")) or 0.0 for r in train] for p in phases]
        ax.stackplot(steps, stack, labels=phases, alpha=0.8)
    if ss:
        ax.plot(ss, step_s, "k--", lw=1, label="step")
    ax.set(title="seconds per step by phase", xlabel="step")
    ax.legend(fontsize=6, ncol=2, loc="upper left")
    return True


def _panel_throughput(ax, run) -> bool:
    steps, tps = _series(run["rows"], "perf/throughput")
    if not steps:
        return False
    ax.plot(steps, tps)
    ax.set(title="throughput (tokens/s)", xlabel="step")
    return True


def _panel_lag(ax, run) -> bool:
    steps, lag = _series(run["rows"], "rollout/policy_version_lag")
    if not lag or max(lag) <= 0:  # a synchronous run has lag 0 throughout: nothing to show
        return False
    ax.plot(steps, lag)
    ax.set(title="policy version lag", xlabel="step")
    return True


PANELS = (
    _panel_reward,
    _panel_heldout,
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


def _render(run) -> tuple[bytes, list[tuple[str, bytes]]]:
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


# ---------------------------------------------------------------------------------------------
# HTML


def _fmt(v, digits: int = 2) -> str:
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return html.escape(str(v))


def _fmt_tokens(n: float) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n:.0f}"


def _headline_rows(s: dict) -> list[tuple[str, str]]:
    """(label, value) lines of the headline table, only for numbers the run has."""
    rows = []
    if "lift_points" in s:
        rows.append(("points gained (held-out greedy)", f"{s['lift_points']:+.1f}"))
        acc = f"{100 * s['base_acc']:.1f}% (step {s['base_step']}) → {100 * s['final_acc']:.1f}%"
        rows.append(("held-out accuracy", f"{acc} (step {s['final_step']})"))
        best = f"{100 * s['best_acc']:.1f}% at step {s['best_step']}"
        rows.append(("best held-out accuracy", f"{best} ({s['best_lift_points']:+.1f} points)"))
        if len(s["envs"]) > 1:
            rows.append(("envs (mean)", ", ".join(s["envs"])))
    if "eval_minutes" in s:
        rows.append(("training minutes, base → final eval", f"{s['eval_minutes']:.1f}"))
    if "eval_tokens" in s:
        rows.append(("tokens, base → final eval", _fmt_tokens(s["eval_tokens"])))
    if "points_per_minute" in s:
        rows.append(("points per minute of training", f"{s['points_per_minute']:.3f}"))
    if "points_per_million_tokens" in s:
        rows.append(("points per million tokens", f"{s['points_per_million_tokens']:.3f}"))
    for t, hit in s.get("time_to_points", {}).items():
        if hit is None:
            rows.append((f"time to +{t} points", "not reached"))
            continue
        when = f"step {hit['step']}"
        if hit["minutes"] is not None:
            when += f", {hit['minutes']:.1f} min"
        if hit["tokens"] is not None:
            when += f", {_fmt_tokens(hit['tokens'])} tokens"
        rows.append((f"time to +{t} points", when))
    for k, v in s.get("pass_at_k", {}).items():
        rows.append((f"pass@{k}", f"{100 * v['base']:.1f}% → {100 * v['final']:.1f}%"))
    rows.append(("training steps", str(s["steps"])))
    if "train_minutes" in s:
        rows.append(("training wall time (excl. eval)", f"{s['train_minutes']:.1f} min"))
    if "total_tokens" in s:
        rows.append(("total tokens", _fmt_tokens(s["total_tokens"])))
    if "mean_tokens_per_s" in s:
        rows.append(("mean throughput", f"{s['mean_tokens_per_s']:,.0f} tokens/s"))
    if "step_s" in s:
        rows.append(("seconds per step", f"{s['step_s']:.2f}"))
    if "policy_version_lag_mean" in s:
        lag = f"mean {s['policy_version_lag_mean']:.2f}, max {s['policy_version_lag_max']:.0f}"
        rows.append(("policy version lag", lag))
    if "skipped_updates" in s:
        rows.append(("skipped updates (non-finite)", f"{s['skipped_updates']:.0f}"))
    return rows


def _table(rows, header=None) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header) if header else ""
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<table>{f'<tr>{head}</tr>' if head else ''}{body}</table>"


def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def read_run_info(path: str) -> dict | None:
    """The run_info.json next to the metrics, or None when the run wrote none."""
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            info = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: not valid JSON ({e.msg}, line {e.lineno})") from None
    if not isinstance(info, dict) or not isinstance(info.get("config", {}), dict):
        raise ValueError(f"{path}: expected an object with a 'config' object")
    return info


def _run_info_html(info: dict) -> str:
    top = [
        (k, v) for k in ("model", "devices", "started", "seed") if (v := info.get(k)) is not None
    ]
    cfg = _flatten(info.get("config", {}))
    cfg_rows = [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in sorted(cfg.items())]
    parts = ["<h2>Run</h2>", _table(top)]
    if cfg_rows:
        parts.append(f"<details><summary>config ({len(cfg_rows)} keys)</summary>")
        parts.append(_table(cfg_rows, ("key", "value")) + "</details>")
    return "\n".join(parts)


_CSS = """body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:3px 8px;
text-align:left;font-size:14px}img{max-width:100%}h1{font-size:22px}h2{font-size:18px}"""


def _html(workdir: str, summary: dict, panels, info: dict | None, last: dict | None) -> str:
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>run report: {html.escape(workdir)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Run report: {html.escape(workdir)}</h1>",
        "<h2>What did this compute buy?</h2>",
        _table(_headline_rows(summary)),
    ]
    if "phase_s" in summary:
        share = summary.get("phase_share", {})
        rows = [
            (p, f"{s:.2f}", f"{100 * share[p]:.1f}%" if p in share else "")
            for p, s in summary["phase_s"].items()
        ]
        parts += ["<h3>Seconds per step by phase</h3>", _table(rows, ("phase", "s/step", "share"))]
    if panels:
        parts.append("<h2>Plots</h2>")
    for title, png in panels:
        data = base64.b64encode(png).decode("ascii")
        parts.append(f"<img alt='{html.escape(title)}' src='data:image/png;base64,{data}'>")
    if info is not None:
        parts.append(_run_info_html(info))
    if last:
        rows = [(k, _fmt(v, 4)) for k, v in sorted(last.items()) if k != "step"]
        parts.append(f"<details><summary>metrics at step {last['step']}</summary>")
        parts.append(_table(rows, ("metric", "value")) + "</details>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(workdir: str, out_dir: str | None = None) -> str:
    """Write report.html (self-contained) and report.png for a run; return the html path."""
    rows = read_metrics_jsonl(os.path.join(workdir, "metrics.jsonl"))
    info = read_run_info(os.path.join(workdir, "run_info.json"))
    summary = summarize_run(rows)
    grid, panels = _render({"rows": rows, "evals": _derive(rows)[2]})
    out_dir = workdir if out_dir is None else out_dir
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "report.png"), "wb") as f:
        f.write(grid)
    train = [r for r in rows if _is_train_row(r)]
    page = _html(os.path.abspath(workdir), summary, panels, info, train[-1] if train else None)
    path = os.path.join(out_dir, "report.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path
