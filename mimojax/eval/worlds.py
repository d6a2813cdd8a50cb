"""Held-out scores of one model on every task world: mean score, pass@k, per-rule dimensions,
infra failures and grader cost; written as JSON and a small HTML table (`mimojax eval --env`).

Worlds are discovered, not listed: every package under mimojax.envs with a held-out file
`data/*_test.jsonl` (or .parquet) is one, named after its package.
"""

from __future__ import annotations

import html
import importlib.resources
import json
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from mimojax.engine.sampling import SamplingParams
from mimojax.eval.held_out import _EVAL_REQUEST_BASE
from mimojax.rewards.pool import summarize
from mimojax.rollout.agent_loop import rollout
from mimojax.rollout.agents import AgentSettings

_COST_DIMS = ("judge_calls", "judge_tokens", "judge_s")


def discover_worlds() -> dict[str, Path]:
    """{world name: its held-out file} for every package under mimojax.envs that ships one."""
    root = importlib.resources.files("mimojax.envs")
    worlds = {}
    for pkg in sorted(root.iterdir(), key=lambda p: p.name):
        data = pkg / "data"
        if not (pkg.is_dir() and (pkg / "__init__.py").is_file() and data.is_dir()):
            continue
        held = sorted(
            p.name for p in data.iterdir() if p.name.endswith(("_test.jsonl", "_test.parquet"))
        )
        if held:
            worlds[pkg.name] = Path(str(data / held[0]))
    return worlds


def score_world(
    engine,
    tokenizer,
    examples: Sequence[dict],
    pool,
    *,
    greedy: SamplingParams,
    sampled: SamplingParams | None = None,
    pass_k: int = 0,
    agent: AgentSettings | None = None,
) -> dict:
    """One world's summary: greedy mean score and accuracy, pass@k / mean@k (score >= 1 counts
    as solved, as in evaluation.py), per-dimension means, infra failures, grader cost."""
    t0 = time.perf_counter()
    out: dict = {"examples": len(examples)}
    runs = [("greedy", greedy, 1)]
    if pass_k > 0 and sampled is not None:
        runs.append(("sampled", sampled, pass_k))
    all_results, errors = [], []
    for kind, sp, n in runs:
        trajs = rollout(
            engine, tokenizer, examples, n, sp, agent or AgentSettings(),
            request_id_base=_EVAL_REQUEST_BASE,
        )  # fmt: skip
        results = pool.score([t.grader_item() for t in trajs])
        all_results += results
        errors += [r.error for r in results if not r.valid and r.error]
        solved = defaultdict(list)
        for t, r in zip(trajs, results):
            solved[t.group].append(r.valid and r.score >= 1.0)
        if kind == "greedy":
            valid = [r for r in results if r.valid]
            # infra failures count as 0 in the mean (and are reported beside it)
            out["mean_score"] = sum(r.score for r in valid) / max(len(results), 1)
            out["acc_greedy"] = sum(c[0] for c in solved.values()) / max(len(solved), 1)
            out["response_length"] = sum(len(t.response_ids) for t in trajs) / max(len(trajs), 1)
            dims = defaultdict(list)
            for r in valid:
                for k, v in r.dims.items():
                    if k not in _COST_DIMS:
                        dims[k].append(v)
            out["dims"] = {k: sum(v) / len(v) for k, v in sorted(dims.items())}
            out["example"] = {
                "prompt": examples[0].get("prompt") if examples else None,
                "response": tokenizer.decode(trajs[0].response_ids, skip_special_tokens=True)
                if trajs
                else None,
                "score": results[0].score if results else None,
            }
        else:
            out[f"pass@{n}"] = sum(any(c) for c in solved.values()) / max(len(solved), 1)
            out[f"mean@{n}"] = sum(sum(c) / len(c) for c in solved.values()) / max(len(solved), 1)
    pool_metrics = summarize(all_results)
    out["infra_failures"] = int(pool_metrics["reward/infra_failures"])
    out["infra_errors"] = sorted(set(errors))[:5]
    out["graded"] = len(all_results)
    out["grader_s"] = sum(r.seconds for r in all_results)
    out["grader_cpu_s"] = pool_metrics["reward/grader_cpu_s/sum"]
    for k in _COST_DIMS:
        out[k] = sum(r.dims.get(k, 0.0) for r in all_results if r.valid)
    out["wall_s"] = time.perf_counter() - t0
    return out


def table_rows(report: dict) -> list[list[str]]:
    """Header + one row per world, as strings (the console and HTML tables)."""
    k = report.get("pass_k", 0)
    head = ["world", "n", "mean score", "acc (greedy)", f"pass@{k}" if k else "pass@k",
            "infra fail", "grader s", "judge tok", "wall s", "dimensions"]  # fmt: skip
    rows = [head]
    for name, w in report["worlds"].items():
        if "error" in w:
            rows.append([name, "-", "-", "-", "-", "-", "-", "-", "-", "error: " + w["error"]])
            continue
        dims = ", ".join(f"{d}={v:.2f}" for d, v in w["dims"].items())
        passk = f"{w[f'pass@{k}']:.3f}" if k and f"pass@{k}" in w else "-"
        rows.append([
            name, str(w["examples"]), f"{w['mean_score']:.3f}", f"{w['acc_greedy']:.3f}", passk,
            f"{w['infra_failures']}/{w['graded']}", f"{w['grader_s']:.1f}",
            f"{int(w['judge_tokens'])}", f"{w['wall_s']:.0f}", dims,
        ])  # fmt: skip
    return rows


def format_table(report: dict) -> str:
    """A plain-text table (what the command prints)."""
    rows = table_rows(report)
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def write_report(report: dict, out_dir: str | Path) -> tuple[Path, Path]:
    """Writes eval.json and eval.html into out_dir; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    js, page = out / "eval.json", out / "eval.html"
    js.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    rows = table_rows(report)
    cells = lambda tag, r: "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in r)  # noqa: E731
    body = "\n".join(f"<tr>{cells('td', r)}</tr>" for r in rows[1:])
    page.write_text(
        "<!doctype html><meta charset='utf-8'><title>mimojax eval</title>"
        "<style>body{font-family:sans-serif}td,th{padding:4px 10px;border-bottom:1px solid #ddd;"
        "text-align:left}</style>"
        f"<h1>mimojax eval: {html.escape(str(report['model']))}</h1>"
        f"<p>{html.escape(report.get('command', ''))}</p>"
        f"<table><tr>{cells('th', rows[0])}</tr>\n{body}</table>\n"
    )
    return js, page
