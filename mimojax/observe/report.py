"""The run report: what a run's compute bought, from WORKDIR/metrics.jsonl (and run_info.json).

`write_report(workdir)` writes a self-contained report.html (headline numbers, the plots as
embedded PNGs, the run's config) and report.png (all panels in one figure). The numbers come
from observe/summary.py (no matplotlib there), the plots from observe/report_plots.py; this
module writes the HTML.
"""

from __future__ import annotations

import base64
import html
import json
import os

from mimojax.observe.metrics import read_metrics
from mimojax.observe.report_plots import render
from mimojax.observe.run_costs import cost_summary, restart_summary
from mimojax.observe.summary import (
    base_model_accs,
    eval_points,
    is_train_row,
    read_run_info,
    read_run_rows,
    read_warmup_record,
    summarize_run,
)

__all__ = ["read_run_info", "read_run_rows", "summarize_run", "write_report"]

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
    warm = s.get("warmup")
    if warm:  # a tool-use warm-up ran first (WORKDIR/warmup/done.json): RL's step 0 is after it
        before = base_model_accs(warm)
        if before:
            accs = ", ".join(f"{env} {100 * v:.1f}%" for env, v in sorted(before.items()))
            rows.append(("held-out accuracy of the base model (before the warm-up)", accs))
        what = f"{warm.get('traces', '?')} expert traces, {warm.get('warmup_s', 0.0):.0f} s"
        rows.append(("tool-use warm-up", what))
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


def _usd(v) -> str:
    return "rates not set (cost.device_per_hour, cost.cpu_per_hour)" if v is None else f"${v:,.4g}"


def _costs_html(c: dict, restarts: dict) -> str:
    """Device/CPU-seconds per phase, $ per step and in total, $ to the target, restarts."""
    devs = f"{c['devices']} device(s)" + ("" if c["devices_known"] else " (not recorded: 1)")
    cpus = f"{c['cpus']} CPU core(s)" + ("" if c["cpus_known"] else " (not recorded: 1)")
    rows = [
        ("held", f"{devs}, {cpus}"),
        ("device-seconds / CPU-seconds", f"{c['device_s_total']:,.0f} / {c['cpu_s_total']:,.0f}"),
        ("$ per step", _usd(c["usd_per_step"])),
        ("$ in total (training + eval)", _usd(c["usd_total"])),
    ]
    if "grader_cpu_s" in c:
        rows.append(("grader CPU-seconds (measured)", f"{c['grader_cpu_s']:,.1f}"))
    if c["target"] is not None:
        hit = c["to_target"]
        when = "not reached"
        if hit is not None:
            when = f"step {hit['step']}, {hit['billed_s'] / 60:.1f} min billed, {_usd(hit['usd'])}"
        rows.append((f"to held-out {100 * c['target']:.1f}%", when))
    r = restarts
    lost = f"{r['steps_redone']:.0f} steps redone, {r['wall_s_lost']:.0f} s lost"
    lost += f", {_usd(r['usd_lost'])}"
    rows.append(("restarts", f"{r['count']} ({r['source']}): {lost}"))
    phases = [
        (p, f"{s:,.1f}", f"{c['device_s'][p]:,.1f}", f"{c['cpu_s'][p]:,.1f}")
        for p, s in c["phase_s"].items()
    ]
    return "\n".join(
        [
            "<h2>Compute and cost</h2>",
            _table(rows),
            _table(phases, ("phase", "seconds", "device-seconds", "CPU-seconds")),
        ]
    )


def _html(workdir: str, summary: dict, panels, info: dict | None, last: dict | None,
          costs: str = "") -> str:  # fmt: skip
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
    parts.append(costs)
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


def write_report(workdir: str, out_dir: str | None = None, target: float | None = None) -> str:
    """Write report.html (self-contained) and report.png for a run; return the html path.

    `target`: a held-out accuracy (0..1) whose time and $ to reach the report states.
    """
    rows = read_run_rows(workdir)
    info = read_run_info(os.path.join(workdir, "run_info.json"))
    summary = summarize_run(rows)
    summary["warmup"] = read_warmup_record(workdir)
    run = {"rows": rows, "evals": eval_points(rows), "warmup": summary["warmup"]}
    grid, panels = render(run)
    out_dir = workdir if out_dir is None else out_dir
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "report.png"), "wb") as f:
        f.write(grid)
    train = [r for r in rows if is_train_row(r)]
    costs = _costs_html(
        cost_summary(rows, info, target), restart_summary(read_metrics(workdir), info)
    )
    last = train[-1] if train else None
    page = _html(os.path.abspath(workdir), summary, panels, info, last, costs)
    path = os.path.join(out_dir, "report.html")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path
