"""What a run's compute cost: device- and CPU-seconds per phase, $ per step and to a target.

Also its restarts and the work they lost. Pure functions of a run's metrics rows
(`mimojax.observe.metrics`) and its run_info.json; no config, no plotting, so the static report and
the live dashboard share them.

The accounting, stated once:
- Billed seconds of a step: `timing_s/step` (or `perf/time_per_step`) plus `timing_s/eval` when
  the row evaluated. Every device and CPU of the run is held for all of it.
- Device-seconds = seconds x the run's devices (run_info "devices"); CPU-seconds = seconds x its
  host CPU cores (run_info "cpus"). A run_info without them counts 1 and says so.
- Per phase: `timing_s/<phase>` x devices (or CPUs); "other" is the step time no phase covers.
  Phases overlap in async modes, so the phases may add up past the step total.
- $ = device-hours x `cost.device_per_hour` + CPU-hours x `cost.cpu_per_hour` (run_info "cost");
  a rate of 0 means unknown, and with both unknown there is no $ figure (None), only seconds.
- $ to a held-out target: the billed $ up to the first eval whose mean greedy accuracy reaches it.
"""

from __future__ import annotations

from mimojax.observe.summary import eval_points, finite, is_train_row, phase_names

_EPS = 1e-9


def resources(info: dict | None) -> dict:
    """Devices, CPU cores and $/hour rates of a run from its run_info (1, 1, None when absent)."""
    info = info or {}
    devices = info.get("devices")
    cpus = info.get("cpus")
    cost = info.get("cost") or {}
    dph = finite(cost.get("device_per_hour")) or 0.0
    cph = finite(cost.get("cpu_per_hour")) or 0.0
    return {
        "devices": len(devices) if isinstance(devices, list) and devices else 1,
        "devices_known": isinstance(devices, list) and bool(devices),
        "cpus": int(cpus) if finite(cpus) and cpus >= 1 else 1,
        "cpus_known": bool(finite(cpus)) and cpus >= 1,
        "device_per_hour": dph,
        "cpu_per_hour": cph,
        "priced": dph > 0 or cph > 0,
    }


def usd(device_s: float, cpu_s: float, res: dict) -> float | None:
    """Dollars for these device- and CPU-seconds at the run's rates; None when it has none."""
    if not res["priced"]:
        return None
    return (device_s * res["device_per_hour"] + cpu_s * res["cpu_per_hour"]) / 3600.0


def _step_s(row: dict) -> float:
    v = finite(row.get("timing_s/step"))
    return (finite(row.get("perf/time_per_step")) or 0.0) if v is None else v


def billed_seconds(rows: list[dict]) -> list[float]:
    """Cumulative billed seconds (step time + eval time) at each merged row."""
    out, total = [], 0.0
    for r in rows:
        total += (_step_s(r) if is_train_row(r) else 0.0) + (finite(r.get("timing_s/eval")) or 0.0)
        out.append(total)
    return out


def cost_summary(
    rows: list[dict], info: dict | None, target: float | None = None, points=None
) -> dict:
    """Device/CPU-seconds per phase and in total, $ per step and in total, $ and time to target.

    `rows` are merged by step (`rows_by_step`); `target` is a held-out accuracy (0..1);
    `points` are `eval_points(rows)` when the caller has them already.
    """
    res = resources(info)
    train = [r for r in rows if is_train_row(r)]
    phase_s = {
        p: sum(finite(r.get(f"timing_s/{p}")) or 0.0 for r in train) for p in phase_names(train)
    }
    step_total = sum(_step_s(r) for r in train)
    rest = step_total - sum(phase_s.values())
    if rest > 1e-6 * max(step_total, 1.0):
        phase_s["other"] = rest
    eval_s = sum(finite(r.get("timing_s/eval")) or 0.0 for r in rows)
    if eval_s > 0:
        phase_s["eval"] = eval_s
    billed = billed_seconds(rows)
    total_s = billed[-1] if billed else 0.0
    out = {
        **res,
        "steps": len(train),
        "billed_s": total_s,
        "phase_s": phase_s,
        "device_s": {p: s * res["devices"] for p, s in phase_s.items()},
        "cpu_s": {p: s * res["cpus"] for p, s in phase_s.items()},
        "device_s_total": total_s * res["devices"],
        "cpu_s_total": total_s * res["cpus"],
    }
    out["usd_total"] = usd(out["device_s_total"], out["cpu_s_total"], res)
    per_step = step_total / len(train) if train else None
    out["step_s"] = per_step
    out["usd_per_step"] = (
        None if per_step is None else usd(per_step * res["devices"], per_step * res["cpus"], res)
    )
    grader = [finite(r.get("reward/grader_cpu_s/sum")) for r in train]
    if any(g is not None for g in grader):
        out["grader_cpu_s"] = sum(g or 0.0 for g in grader)
    out["target"] = target
    out["to_target"] = None if target is None else to_target(rows, billed, res, target, points)
    return out


def eval_cost_points(rows: list[dict], info: dict | None, points=None) -> list[dict]:
    """Per eval with a greedy accuracy: step, acc, training minutes, billed seconds, $, device-h."""
    res = resources(info)
    billed = dict(zip((r["step"] for r in rows), billed_seconds(rows)))
    out = []
    for p in eval_points(rows) if points is None else points:
        if p["acc"] is None:
            continue
        s = billed[p["step"]]
        out.append(
            {
                "step": p["step"],
                "acc": p["acc"],
                "train_minutes": p["minutes"],
                "billed_s": s,
                "device_hours": s * res["devices"] / 3600.0,
                "usd": usd(s * res["devices"], s * res["cpus"], res),
            }
        )
    return out


def to_target(rows, billed, res: dict, target: float, points=None) -> dict | None:
    """The first eval reaching `target` accuracy: its step, billed seconds and $; None if none."""
    at = dict(zip((r["step"] for r in rows), billed))
    for p in eval_points(rows) if points is None else points:
        if p["acc"] is not None and p["acc"] >= target - _EPS:
            s = at[p["step"]]
            return {
                "step": p["step"],
                "acc": p["acc"],
                "billed_s": s,
                "train_minutes": p["minutes"],
                "usd": usd(s * res["devices"], s * res["cpus"], res),
            }
    return None


def restart_summary(lines: list[dict], info: dict | None = None) -> dict:
    """Restarts and the work they lost, from the metrics lines in file order (not merged).

    The trainer logs cumulative `restarts/*` on every step after a resume; when a run has none
    (an older run, another writer), restarts are derived from a training step that does not
    exceed the last one already logged: each such drop is one restart, losing the steps back
    to it and the `perf/wall_s` between them.
    """
    res = resources(info)
    logged = [r for r in lines if finite(r.get("restarts/count")) is not None]
    if logged:
        last = max(logged, key=lambda r: (r["step"], r["restarts/count"]))
        out = {
            "source": "logged",
            "count": int(finite(last["restarts/count"])),
            "steps_redone": finite(last.get("restarts/steps_redone")) or 0.0,
            "wall_s_lost": finite(last.get("restarts/wall_s_lost")) or 0.0,
        }
    else:
        out = {"source": "derived from step numbers", "count": 0, "steps_redone": 0.0}
        out["wall_s_lost"] = 0.0
        attempt: list[tuple[int, float]] = []  # (step, seconds) logged since the last restart
        for r in (r for r in lines if is_train_row(r)):
            if attempt and r["step"] <= attempt[-1][0]:
                lost = [s for st, s in attempt if st >= r["step"]]
                out["count"] += 1
                out["steps_redone"] += float(len(lost))
                out["wall_s_lost"] += sum(lost)
                attempt = [(st, s) for st, s in attempt if st < r["step"]]
            attempt.append((r["step"], _step_s(r)))
    s = out["wall_s_lost"]
    out["usd_lost"] = usd(s * res["devices"], s * res["cpus"], res)
    return out
