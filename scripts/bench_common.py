"""Shared by the benchmark scripts: other processes' CPU share while we timed; table printing."""

from __future__ import annotations

import os
import time


def cpu_snapshot():
    """(all CPUs' busy seconds incl. steal, this process's CPU seconds, wall); None off Linux."""
    try:
        with open("/proc/stat") as f:
            jiffies = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    # idle and iowait are not busy; guest time is already inside user/nice.
    busy = sum(jiffies[:8]) - jiffies[3] - jiffies[4]
    own = os.times()
    return busy / os.sysconf("SC_CLK_TCK"), own.user + own.system, time.perf_counter()


def others_cpu_frac(before, after) -> float | None:
    """Share of all CPUs that other processes (or the hypervisor) used between two snapshots."""
    if before is None or after is None:
        return None
    busy, own, wall = (a - b for a, b in zip(after, before, strict=True))
    return max(0.0, (busy - own) / (wall * (os.cpu_count() or 1)))


def fmt(x, spec):
    """`x` formatted, or "-" when there is no value."""
    return "-" if x is None else format(x, spec)


def pct(x):
    """`x` as a percentage, or "-" when there is no value."""
    return "-" if x is None else f"{100 * x:.0f}%"


def verdict(ok: bool | None) -> str:
    return "not measured" if ok is None else ("PASS" if ok else "MISS")


def print_table(rows, header):
    """Rows as an aligned text table, first column left-aligned."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    line = lambda r: " | ".join(
        str(c).rjust(w) if i else str(c).ljust(w)
        for i, (c, w) in enumerate(zip(r, widths, strict=True))
    )
    print(line(header))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def print_markdown(rows, header):
    """Rows as a markdown table."""
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---:" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |")
