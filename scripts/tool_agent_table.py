"""The table of tool-agent recipe runs (configs/agent_arith_tools_smollm2.py), one row a workdir.

    python scripts/tool_agent_table.py --workdir s0=runs/tools_s0 --workdir s1=runs/tools_s1

Per run: held-out greedy of the base model, after the warm-up (RL step 0) and after RL, each
phase's lift, the warm-up's and RL's seconds, RL steps, and the final evaluation's tool use
(share of trajectories that called the calculator, calls that ran, correct answers that used
it). Prints a Markdown table (docs/benchmarks.md, "A tool agent on the hard split").
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from mimojax.observe.metrics import read_metrics  # noqa: E402
from mimojax.observe.summary import WARMUP_RECORD, read_warmup_record  # noqa: E402

ACC = "val-core/math/acc/greedy"


def run_row(name: str, workdir: str) -> dict:
    """One run's numbers; a run without a finished warm-up or evaluation raises ValueError."""
    done = read_warmup_record(workdir)
    if done is None:
        raise ValueError(f"{workdir}: no finished warm-up ({WARMUP_RECORD} is missing)")
    evals = [r for r in read_metrics(workdir) if ACC in r]
    if not evals or "held_out_before" not in done:
        raise ValueError(f"{workdir}: needs the base evaluation and RL's held-out evaluations")
    base, warm, last = done["held_out_before"][ACC], evals[0][ACC], evals[-1]
    return {
        "run": name,
        "base": base,
        "warm": warm,
        "after": last[ACC],
        "warmup_s": done["warmup_s"],
        "rl_s": last.get("perf/wall_s", 0.0),
        "steps": last["step"],
        "call_rate": last.get("val-aux/math/tool_call_rate", 0.0),
        "valid": last.get("val-aux/math/valid_call_rate", 0.0),
        "with_tool": last.get("val-aux/math/correct_with_tool", 0.0),
    }


def table(rows: list[dict]) -> str:
    """The Markdown table of `rows` (run_row's dicts)."""

    def pts(x):
        return f"{100 * x:+.0f}"

    lines = [
        "| run | base | after warm-up | after RL | warm-up lift | RL lift | total | warm-up s "
        "| RL s (steps) | called the tool | calls that ran | correct answers using it |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['base']:.2f} | {r['warm']:.2f} | **{r['after']:.2f}** "
            f"| {pts(r['warm'] - r['base'])} | {pts(r['after'] - r['warm'])} "
            f"| {pts(r['after'] - r['base'])} | {r['warmup_s']:.0f} | {r['rl_s']:.0f} "
            f"({r['steps']}) | {100 * r['call_rate']:.0f}% | {100 * r['valid']:.0f}% "
            f"| {100 * r['with_tool']:.0f}% |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", action="append", required=True, metavar="NAME=DIR")
    args = p.parse_args(argv)
    rows = []
    for spec in args.workdir:
        name, _, workdir = spec.partition("=")
        try:
            rows.append(run_row(name, workdir or name))
        except ValueError as e:
            print(f"tool_agent_table: {e}", file=sys.stderr)
            return 1
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
