"""Shared by the benchmark scripts: how much CPU other processes took while we timed."""

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
