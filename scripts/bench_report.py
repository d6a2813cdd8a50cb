"""Run every benchmark with `--json` into one dir and print one table of the must-show ratios.

    python scripts/bench_report.py                       # all benches -> runs/bench/<timestamp>/
    python scripts/bench_report.py --only prefill,generate
    python scripts/bench_report.py --from runs/bench/X --doc docs/benchmarks.md   # re-render only

A bench that crashes or writes no JSON shows as "failed" and the script exits non-zero.
`--doc` replaces the text between `<!-- bench:begin -->` and `<!-- bench:end -->`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
from pathlib import Path

PY = sys.executable
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def benches(minutes: float) -> dict[str, list[str]]:
    """name -> command; `{json}` is replaced by the output path."""
    return {
        "forward": [PY, "scripts/bench_forward.py", "--json", "{json}"],
        "update": [PY, "scripts/bench_update.py", "--json", "{json}"],
        "prefill": [PY, "scripts/bench_prefill.py", "--json", "{json}"],
        "generate": [PY, "scripts/bench_generate.py", "--batches", "32,64", "--json", "{json}"],
        "trl": [PY, "scripts/bench_vs_trl.py", "--minutes", str(minutes), "--out", "{dir}/trl"],
    }


def _get(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d


def rows_for(name: str, data: dict | None) -> list[dict]:
    """Table rows (metric, mine, peer, ratio, target) from one bench's JSON; None = failed."""
    if data is None:
        return [{"bench": name, "metric": name, "failed": True}]
    out = []
    if name == "generate":
        for b in ("32", "64"):
            m = _get(data, "results", b, "mimojax", "decode_tok_s")
            h = _get(data, "results", b, "hf", "decode_tok_s")
            out.append(row(name, f"decode tok/s vs HF generate, batch {b}", m, h, 2.0))
    elif name == "prefill":
        out.append(
            row(
                name,
                f"prefill {data.get('prompts')} prompts: batched vs one-at-a-time (s)",
                data.get("together_s"),
                data.get("one_at_a_time_s"),
                5.0,
                ratio=data.get("ratio"),
            )
        )
    elif name == "forward":
        for phase, p in (data.get("phases") or {}).items():
            out.append(
                row(
                    name,
                    f"logprob {phase} vs torch (s)",
                    _get(p, "mimojax", "min_s"),
                    _get(p, "torch", "min_s"),
                    p.get("speedup_goal"),
                    ratio=p.get("speedup"),
                )
            )
    elif name == "update":
        out.append(
            row(
                name,
                "actor update tok/s: response-only head vs old",
                data.get("new_tok_s"),
                data.get("old_tok_s"),
                1.5,
            )
        )
        g = data.get("grad_rel")
        out.append(row(name, "update gradients, relative L2 new vs old (<= 1e-5)", g, None, None))
        if g is not None:
            out[-1]["met"] = g <= 1e-5
    elif name == "trl":
        out.append(
            row(
                name,
                "GRPO s/step vs TRL",
                _get(data, "sides", "mimojax", "s_per_step_median"),
                _get(data, "sides", "trl", "s_per_step_median"),
                2.5,
                ratio=data.get("ratio_s_per_step"),
            )
        )
    return out or [{"bench": name, "metric": name, "failed": True}]


def row(bench, metric, mine, peer, target, ratio=None) -> dict:
    if ratio is None and mine is not None and peer:
        ratio = mine / peer
    met = None if ratio is None or target is None else ratio >= target
    return {
        "bench": bench,
        "metric": metric,
        "mimojax": mine,
        "peer": peer,
        "ratio": ratio,
        "target": target,
        "met": met,
        "failed": False,
    }


def load(out_dir: Path, name: str) -> dict | None:
    path = out_dir / ("trl/summary.json" if name == "trl" else f"{name}.json")
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError:
        return None


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def table(rows: list[dict], commands: dict[str, str]) -> list[str]:
    lines = [
        "| metric | mimojax | peer/floor | ratio | target | met? | command |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cmd = f"`{commands.get(r['bench'], '')}`"
        if r["failed"]:
            lines.append(f"| {r['metric']} | - | - | - | - | failed | {cmd} |")
            continue
        met = "-" if r["met"] is None else ("yes" if r["met"] else "no")
        tgt = "-" if r["target"] is None else f">= {r['target']:g}x"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}x"
        lines.append(
            f"| {r['metric']} | {fmt(r['mimojax'])} | {fmt(r['peer'])} | {ratio} "
            f"| {tgt} | {met} | {cmd} |"
        )
    return lines


def summarize(out_dir: Path, names: list[str], commands: dict[str, str]) -> dict:
    rows = [r for n in names for r in rows_for(n, load(out_dir, n))]
    s = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "loadavg": list(os.getloadavg()),
        "commands": commands,
        "rows": rows,
    }
    (out_dir / "summary.json").write_text(json.dumps(s, indent=2))
    return s


def render_doc(text: str, s: dict) -> str:
    la = ", ".join(f"{x:.2f}" for x in s["loadavg"])
    block = "\n".join(
        [
            BEGIN,
            f"Generated by `scripts/bench_report.py` on {s['date']}, load average {la}.",
            "",
            *table(s["rows"], s["commands"]),
            END,
        ]
    )
    pat = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    if not pat.search(text):
        raise SystemExit(f"no {BEGIN} ... {END} block in the file")
    return pat.sub(lambda _: block, text)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="")
    p.add_argument("--skip", default="")
    p.add_argument("--from", dest="from_dir", help="re-render from existing JSONs; run nothing")
    p.add_argument("--out", help="default runs/bench/<timestamp>")
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--doc", help="a markdown file whose bench block is rewritten")
    a = p.parse_args(argv)
    all_b = benches(a.minutes)
    names = [n for n in all_b if not a.only or n in a.only.split(",")]
    names = [n for n in names if n not in a.skip.split(",")]
    out_dir = Path(a.from_dir or a.out or f"runs/bench/{datetime.datetime.now():%Y%m%d-%H%M%S}")
    out_dir.mkdir(parents=True, exist_ok=True)
    commands = {}
    for n in names:
        cmd = [
            c.replace("{json}", str(out_dir / f"{n}.json")).replace("{dir}", str(out_dir))
            for c in all_b[n]
        ]
        commands[n] = " ".join(c if c != PY else "python" for c in cmd)
        if not a.from_dir:
            print(f"== {n}: {commands[n]}", flush=True)
            rc = subprocess.call(cmd)
            if rc:
                print(f"== {n} exited {rc}", flush=True)
                (out_dir / f"{n}.json").unlink(missing_ok=True)
    s = summarize(out_dir, names, commands)
    print("\n".join(table(s["rows"], commands)))
    print(f"wrote {out_dir / 'summary.json'}")
    if a.doc:
        path = Path(a.doc)
        path.write_text(render_doc(path.read_text(), s))
    return 1 if any(r["failed"] for r in s["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
