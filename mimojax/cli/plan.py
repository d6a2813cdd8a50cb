"""`mimojax plan`: per-device memory and step time of a config's run on 24 / 80 / 141 GB cards,
and which LoRA / remat / device-count choices fit (registered by cli.py)."""

from __future__ import annotations

import argparse
import json

CARD_KEYS = ("24GB", "80GB", "141GB")


def register(sub) -> None:
    """Adds `plan` to the `mimojax` parser."""
    p = sub.add_parser(
        "plan",
        help="memory and step time per device of a config's run, and what fits which card",
        allow_abbrev=False,
    )
    p.add_argument("--config", required=True, metavar="PATH[:ARGS]", help="configs/NAME.py[:args]")
    p.add_argument(
        "--devices", default=None, metavar="N", help="devices to plan for (default: the config's)"
    )
    p.add_argument(
        "--xla",
        action="store_true",
        help="also compile the actor update on this machine's devices and print XLA's "
        "memory_analysis() next to the planner's (small models only)",
    )
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config (after overrides) before the plan",
    )
    p.set_defaults(func=cmd_plan, takes_config=True)


def _devices(text: str | None) -> int | None:
    from mimojax.config.loader import ConfigError

    if text is None:
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"--devices: must be a whole number >= 1, got {text!r}")
    return n


def _table(header: list[str], rows: list[list]) -> str:
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    fmt = lambda r: "  ".join(
        c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))
    )
    return "\n".join([fmt(cells[0]), fmt(["-" * w for w in widths])] + [fmt(r) for r in cells[1:]])


def min_devices_table(plan: dict) -> str:
    """One row per (LoRA, remat) choice: peak GiB per device at each device count and the fewest
    devices of each card that hold it (fsdp over the devices; '-' = none of the counts)."""
    alts = plan["cards"][CARD_KEYS[0]]["alternatives"]
    counts = sorted({a["devices"] for a in alts})
    rows = []
    for lora in sorted({a["lora_rank"] for a in alts}):
        for remat in ("none", "dots", "full"):
            mine = [a for a in alts if a["lora_rank"] == lora and a["remat"] == remat]
            row = [f"{'LoRA r=' + str(lora) if lora else 'full weights'}, remat={remat}"]
            row += [f"{a['peak_gib']:.1f}" for a in sorted(mine, key=lambda a: a["devices"])]
            for key in CARD_KEYS:
                usable = plan["cards"][key]["usable_gib"]
                fit = [a["devices"] for a in mine if a["peak_gib"] <= usable]
                row.append(str(min(fit)) if fit else "-")
            rows.append(row)
    header = ["choice"] + [f"GiB@{n}" for n in counts] + [f"min {k}" for k in CARD_KEYS]
    return _table(header, rows)


def format_plan(plan: dict) -> str:
    """The plan as the text `mimojax plan` prints."""
    m = plan["model"]
    mesh = " ".join(f"{k}={v}" for k, v in plan["mesh"].items())
    lines = [
        f"model: {m['name_or_path']} ({m['source']}): {m['params_b']} B params, {m['layers']} "
        f"layers, hidden {m['hidden']}, heads {m['heads']}/{m['kv_heads']}, vocab {m['vocab']}"
        + (
            f"; LoRA r={plan['lora_rank']}: {m['lora_params_m']} M params"
            if plan["lora_rank"]
            else ""
        ),
        f"devices: {plan['devices']}, mesh {mesh}"
        + (f", rollout mesh {plan['rollout_mesh']}" if plan["rollout_mesh"] else "")
        + f"; dtype {plan['dtype']}, params {plan['param_dtype']}, remat {plan['remat']}, "
        f"attention {plan['attention_impl']}, sequence {plan['seq_len']} tokens",
        "",
        "per-device memory (GiB):",
        _table(["part", "GiB"], [[k, f"{v:.2f}"] for k, v in plan["components_gib"].items() if v]),
        f"resident {plan['resident_gib']:.2f} + largest phase ({plan['peak_phase']}) "
        f"= peak {plan['peak_gib']:.2f} GiB per device",
        "",
        "this run on each card (fits = peak <= 90% of the card's memory):",
    ]
    rows = []
    for key in CARD_KEYS:
        c = plan["cards"][key]
        t = c["step_time_s"]
        fits = "yes" if c["fits"] else "NO"
        times = [f"{t[k]:.1f}" for k in ("total", "generation", "update")]
        rows.append([c["card"], f"{c['usable_gib']:.1f}", fits, *times])
    lines.append(_table(["card", "usable GiB", "fits", "step s", "gen s", "update s"], rows))
    lines += ["", "choices (peak GiB per device by device count; fewest devices that fit):"]
    lines.append(min_devices_table(plan))
    return "\n".join(lines)


def cmd_plan(args: argparse.Namespace) -> int:
    """Print the plan of the configured run."""
    from mimojax.config.loader import load_config
    from mimojax.plan.from_config import plan

    cfg = load_config(args.config, args.overrides)
    result = plan(cfg, _devices(args.devices))
    if args.print_config:
        print(f"resolved config {args.config} {' '.join(args.overrides)}:\n{cfg}")
    if args.xla:
        import jax

        from mimojax.plan.run_shape import XLA_TOLERANCE
        from mimojax.plan.xla_check import compare

        # On this machine's devices (8 fake CPU devices with XLA_FLAGS, as in the tests).
        result["xla"] = c = compare(cfg, jax.devices()[: result["devices"]])
        if not args.json:
            print(
                f"actor update, XLA memory_analysis() on this machine: {c['xla_bytes'] / 2**20:.1f}"
                f" MiB, planner {c['planner_bytes'] / 2**20:.1f} MiB ({c['rel_error']:+.1%}; "
                f"stated tolerance {XLA_TOLERANCE:.0%})"
            )
    print(json.dumps(result, indent=1) if args.json else format_plan(result))
    return 0
