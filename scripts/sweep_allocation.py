"""Compute allocation at a fixed budget: prompts per step x rollouts per prompt x grader effort.

    python scripts/sweep_allocation.py --arms 4x8 8x4 16x2 8x8 --budget-s 240 \\
        --target 0.6 --usd-per-hour 0.05 --out runs/allocation

Each arm trains the config (default: the default job, `configs/grpo_arith_smollm2.py`) with
`data.batch_size = P` prompts per step, `rollout.n = N` rollouts per prompt and one optimizer
update per step (`trainer.mini_batch_size = P`), until it has spent the same budget, then
evaluates held-out greedy accuracy. The arms run one after the other, each in its own process.

The budget clock (`--clock`):
- `cpu` (default; for CPU-only hosts, where the CPU is the device): CPU-seconds of the trainer
  process (all its threads) and of its child processes (the grader workers), counted inside
  training steps only; evaluation, checkpointing and start-up are excluded. On a shared box
  this is the run's own work, which other processes' load inflates far less than wall time.
- `wall` (accelerators): training wall seconds (the trainer's `perf/wall_s` clock, evaluation
  excluded) x the number of devices: device-seconds as `mimojax/observe/run_costs.py` bills them.
An arm stops after the step that crosses the budget (the overshoot is reported: "spent").
Held-out is evaluated at the start (once, on the first arm, and shared: every arm starts from
the same weights and greedy decoding), when the clock crosses each of `--eval-fractions` of the
budget, and at the end. The gain per device-minute is (after - before) / spent minutes; the
device-seconds and $ to `--target` are those of the first evaluation at or above it (an upper
bound at the evaluation spacing).

Grader effort (`PxNxE`): E = hidden tests run per training trajectory, for worlds whose rows
carry `extra.hidden_tests` (the code world): the arm trains on copies of the train files with
each row's tests cut to its first E (held-out evaluation keeps them all). The math world's
grader is one sympy comparison per sample with nothing to turn, so its arms are `PxN`.
An E at or above a row's test count grades it on all its tests. The table reports what each
arm's grader did, measured: hidden tests per sample and grader CPU-seconds per sample. The tests
run only on samples with code to test (a random-weight model writes none: 0 grader CPU-s).

Writes OUT/sweep.json (the notebook `notebooks/compute_allocation.ipynb` reads it), OUT/sweep.md
(the table) and OUT/sweep.png (held-out vs device-seconds per arm). `--summarize-only` re-reads
the arms' workdirs; an arm whose workdir has `arm_done.json` is not rerun.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shutil
import subprocess
import sys
import time

from mimojax.observe.metrics import read_metrics

DEFAULT_CONFIG = "configs/grpo_arith_smollm2.py"
DONE = "arm_done.json"
SPEC = "arm_spec.json"


# ------------------------------------------------------------------ arms
def parse_arm(text: str) -> dict:
    """`PxN` or `PxNxE` -> {"label", "prompts", "n", "effort"} (effort None = the world's own)."""
    parts = text.lower().split("x")
    if len(parts) not in (2, 3) or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"arm {text!r}: expected PxN or PxNxE with positive integers")
    p, n = int(parts[0]), int(parts[1])
    effort = int(parts[2]) if len(parts) == 3 else None
    return {"label": text.lower(), "prompts": p, "n": n, "effort": effort}


def arm_overrides(
    arm: dict, *, eval_at_start: bool, micro_batch_size: int, train_files: list[str] | None = None
):
    """Config overrides of one arm (KEY=VALUE, as after `--config.`); the config's micro-batch
    size is cut to a divisor of the arm's samples per step (memory per pass stays at most it)."""
    out = [
        f"data.batch_size={arm['prompts']}",
        f"rollout.n={arm['n']}",
        f"trainer.mini_batch_size={arm['prompts']}",  # one optimizer update per step
        f"trainer.micro_batch_size={math.gcd(micro_batch_size, arm['prompts'] * arm['n'])}",
        "trainer.total_steps=1000000",  # the budget stops it
        "trainer.time_limit_minutes=0.0",
        "trainer.eval_at_minutes=()",
        "trainer.eval_every=0",
        f"eval.at_start={eval_at_start}",
        "eval.at_end=True",
        "checkpoint.every_steps=0",
        "logging.wandb.mode=disabled",
    ]
    if train_files:
        out.append("data.train_files=(" + "".join(f"'{f}'," for f in train_files) + ")")
    return out


def cap_hidden_tests(train_files: list[str], effort: int, out_dir: str) -> list[str]:
    """Copies of `train_files` with each row's `extra.hidden_tests` cut to the first `effort`."""
    os.makedirs(out_dir, exist_ok=True)
    out = []
    for i, path in enumerate(train_files):
        dst = os.path.join(out_dir, f"train{i}_tests{effort}.jsonl")
        n_rows = 0
        with open(path, encoding="utf-8") as f, open(dst, "w", encoding="utf-8") as g:
            for line in f:
                if not line.strip():
                    continue
                row = json.loads(line)
                tests = (row.get("extra") or {}).get("hidden_tests")
                if not tests:
                    raise ValueError(
                        f"grader effort: {path} has a row without extra.hidden_tests; its world "
                        "has no hidden-test count to turn (use PxN arms)"
                    )
                row["extra"]["hidden_tests"] = list(tests)[:effort]
                g.write(json.dumps(row) + "\n")
                n_rows += 1
        out.append(os.path.abspath(dst))
    return out


# ------------------------------------------------------------------ the budget clock
class Clock:
    """Seconds spent since the last `delta()`: CPU-seconds of this process and its children
    (`cpu`), or wall seconds x `devices` (`wall`)."""

    def __init__(self, kind: str, devices: int = 1):
        if kind not in ("cpu", "wall"):
            raise ValueError(f"clock {kind!r}: expected 'cpu' or 'wall'")
        self.kind, self.devices = kind, devices
        self._wall = time.perf_counter()
        self._cpu: dict[int, float] = {}
        if kind == "cpu":
            import psutil

            self._me = psutil.Process()
            self._cpu_delta()  # children alive now are counted from here on

    def _cpu_delta(self) -> float:
        import psutil

        total = 0.0
        for p in [self._me, *self._me.children(recursive=True)]:
            try:
                t = p.cpu_times()
            except psutil.Error:  # exited between the listing and the read
                continue
            v = t.user + t.system
            total += v - self._cpu.get(p.pid, 0.0)  # a child started since counts in full
            self._cpu[p.pid] = v
        return total

    def delta(self) -> float:
        if self.kind == "cpu":
            return self._cpu_delta()
        now = time.perf_counter()
        out, self._wall = (now - self._wall) * self.devices, now
        return out


def budget_trainer(budget_s: float, clock: Clock, eval_fractions=(), **kw):
    """A Trainer that stops when its training steps have spent `budget_s` on `clock`, and also
    evaluates when the spend first crosses each fraction of the budget. Logs `perf/device_s`
    (cumulative spend on the clock) and `perf/cpu_s` / `perf/budget_s` on every step."""
    from mimojax.train.trainer import Trainer

    class BudgetTrainer(Trainer):
        spent = 0.0
        _fractions_done: set = set()

        def train_step(self):
            clock.delta()  # what ran between steps (eval, logging) is not billed
            metrics = super().train_step()
            self.spent += clock.delta()
            metrics["perf/device_s"] = self.spent
            metrics["perf/budget_s"] = float(budget_s)
            return metrics

        def _time_up(self) -> bool:
            return self.spent >= budget_s

        def _eval_due(self) -> bool:
            due = super()._eval_due()
            hit = {f for f in eval_fractions if self.spent >= f * budget_s}
            fresh = hit - self._fractions_done
            self._fractions_done = self._fractions_done | fresh
            return (due or bool(fresh)) and bool(self.eval_examples)

    return BudgetTrainer(**kw)


def run_arm(spec: dict, progress: bool = True) -> dict:
    """Trains one arm in this process (`spec` as written by `prepare_arm`); returns its record."""
    import jax

    from mimojax.cli.train import fixed_mmap_threshold
    from mimojax.config.loader import load_config

    fixed_mmap_threshold()
    cfg = load_config(spec["config"], spec["overrides"])
    clock = Clock(spec["clock"], devices=len(jax.devices()))
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    trainer = budget_trainer(
        spec["budget_s"], clock, tuple(spec["eval_fractions"]),
        cfg=cfg, workdir=spec["workdir"], progress=progress,
    )  # fmt: skip
    trainer.train()
    done = {
        **spec,
        "spent_s": trainer.spent,
        "steps": trainer.step,
        "process_wall_s": time.perf_counter() - t0,
        "load_avg_1m": [load_before, os.getloadavg()[0]],
        "finished": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    with open(os.path.join(spec["workdir"], DONE), "w", encoding="utf-8") as f:
        json.dump(done, f, indent=1)
    return done


def prepare_arm(arm: dict, args, first: bool) -> dict:
    """The arm's workdir (emptied unless done) and its spec (config, overrides, budget)."""
    wd = os.path.join(args.out, arm["label"])
    from mimojax.config.loader import load_config

    base, train_files = load_config(args.config, args.override), None
    if arm["effort"] is not None:
        train_files = cap_hidden_tests(list(base.data.train_files), arm["effort"], wd + "_data")
    overrides = [
        *args.override,
        *arm_overrides(
            arm, eval_at_start=first or not args.shared_baseline,
            micro_batch_size=int(base.trainer.micro_batch_size), train_files=train_files,
        ),
    ]  # fmt: skip
    return {
        "arm": arm,
        "config": args.config,
        "overrides": overrides,
        "workdir": wd,
        "clock": args.clock,
        "budget_s": args.budget_s,
        "eval_fractions": list(args.eval_fractions),
    }


# ------------------------------------------------------------------ summary
def accuracy(row: dict) -> float | None:
    """Mean held-out greedy accuracy over the row's worlds (`val-core/*/acc/greedy`)."""
    vals = [v for k, v in row.items() if k.startswith("val-core/") and k.endswith("/acc/greedy")]
    return sum(vals) / len(vals) if vals else None


def summarize_arm(workdir: str, baseline: float | None = None) -> dict:
    """One arm from its metrics.jsonl: steps, spend, evals [(device_s, wall_s, step, acc)]."""
    rows = read_metrics(workdir)
    steps = [r for r in rows if "timing_s/step" in r]
    evals = []
    for r in rows:
        acc = accuracy(r)
        if acc is not None:
            evals.append((r.get("perf/device_s", 0.0), r.get("perf/wall_s", 0.0), r["step"], acc))
    if baseline is not None and not any(s == 0 for _, _, s, _ in evals):
        evals.insert(0, (0.0, 0.0, 0, baseline))  # the shared step-0 evaluation
    last = steps[-1] if steps else {}
    return {
        "steps": len(steps),
        "device_s": last.get("perf/device_s", 0.0),
        "budget_s": last.get("perf/budget_s", float("nan")),
        "wall_s": last.get("perf/wall_s", 0.0),
        "s_per_step": (last.get("perf/wall_s", 0.0) / len(steps)) if steps else float("nan"),
        "evals": evals,
        "reward_mean": (
            sum(r.get("critic/score/mean", 0.0) for r in steps) / len(steps) if steps else None
        ),
        **grader_work(steps),
    }


def grader_work(steps: list[dict]) -> dict:
    """The training grader's measured work per graded sample, averaged over steps (an arm's
    steps all grade P x N samples): CPU-seconds (the grader's process and the sandboxes it
    waited for; `reward/grader_cpu_s/mean`) and, in the code world, the hidden tests a sample
    is graded on (`reward/tests_total/mean`; they run only for samples with code to test,
    `reward/format/mean`). None where the steps do not log it."""

    def mean(key):
        vals = [r[key] for r in steps if key in r]
        return sum(vals) / len(vals) if vals else None

    return {
        "grader_cpu_s_per_sample": mean("reward/grader_cpu_s/mean"),
        "tests_per_sample": mean("reward/tests_total/mean"),
    }


def to_target(evals, target: float, usd_per_hour: float = 0.0) -> dict | None:
    """The first evaluation at or above `target`: its device-seconds, wall seconds, step, $."""
    for dev_s, wall_s, step, acc in evals:
        if acc >= target - 1e-9:
            usd = dev_s * usd_per_hour / 3600.0 if usd_per_hour > 0 else None
            return {"device_s": dev_s, "wall_s": wall_s, "step": step, "acc": acc, "usd": usd}
    return None


def finish(summary: dict, target: float, usd_per_hour: float) -> dict:
    """Adds before / after / gain / gain per device-minute / to-target to an arm's summary."""
    evals = summary["evals"]
    before = evals[0][3] if evals and evals[0][2] == 0 else None
    after = evals[-1][3] if evals and evals[-1][2] > 0 else None
    gain = None if before is None or after is None else after - before
    minutes = summary["device_s"] / 60.0
    return {
        **summary,
        "before": before,
        "after": after,
        "gain": gain,
        "gain_per_device_min": None if gain is None or minutes <= 0 else gain / minutes,
        "usd": summary["device_s"] * usd_per_hour / 3600.0 if usd_per_hour > 0 else None,
        "to_target": to_target(evals, target, usd_per_hour),
    }


def summarize(arm_dirs: dict[str, dict], target: float, usd_per_hour: float) -> list[dict]:
    """Per arm (in order), its summary; arms without their own step-0 eval share the first's."""
    out, baseline = [], None
    for label, arm in arm_dirs.items():
        s = summarize_arm(arm["workdir"], baseline)
        if baseline is None and s["evals"] and s["evals"][0][2] == 0:
            baseline = s["evals"][0][3]
        done = os.path.join(arm["workdir"], DONE)
        info = {}
        if os.path.isfile(done):
            with open(done, encoding="utf-8") as f:
                info = json.load(f)
        out.append(
            {
                "label": label,
                "prompts": arm["prompts"],
                "n": arm["n"],
                "effort": arm["effort"],
                "load_avg_1m": info.get("load_avg_1m"),
                **finish(s, target, usd_per_hour),
            }
        )
    return out


def _f(x, fmt: str, none: str = "–") -> str:
    return none if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def table(arms: list[dict], meta: dict) -> str:
    """The markdown table of a sweep (meta: clock, target, usd_per_hour)."""
    unit = "CPU-s" if meta["clock"] == "cpu" else "device-s"
    target, rate = meta["target"], meta["usd_per_hour"]
    lines = [
        f"| arm (prompts × n) | samples/step | grader effort | grader CPU-s/sample | steps | "
        f"{unit} spent (budget) | "
        f"train wall s | held-out before → after | gain (pts) | pts per {unit[:-2]}-min | "
        f"{unit} to {target:.2f} | $ to {target:.2f} |",
        "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for a in arms:
        hit = a["to_target"]
        effort = "full" if a["effort"] is None else f"{a['effort']} tests"
        if a.get("tests_per_sample") is not None:  # measured: the rows' own counts, capped
            effort += f" ({a['tests_per_sample']:.1f}/sample)"
        gain = None if a["gain"] is None else 100 * a["gain"]
        per_min = None if a["gain_per_device_min"] is None else 100 * a["gain_per_device_min"]
        lines.append(
            f"| {a['prompts']} × {a['n']} | {a['prompts'] * a['n']} | {effort} | "
            f"{_f(a.get('grader_cpu_s_per_sample'), '.3f')} | {a['steps']} | "
            f"{a['device_s']:.0f} ({_f(a['budget_s'], '.0f')}) | {a['wall_s']:.0f} | "
            f"{_f(a['before'], '.2f')} → {_f(a['after'], '.2f')} | {_f(gain, '+.0f')} | "
            f"{_f(per_min, '+.1f')} | "
            + ("not reached | not reached |" if hit is None else
               f"{hit['device_s']:.0f} (step {hit['step']}) | {_f(hit['usd'], '.4f', 'no rate')} |")
        )  # fmt: skip
    if rate > 0:
        lines.append(
            f"\n$ at {rate} per {'CPU-core' if meta['clock'] == 'cpu' else 'device'}-hour."
        )
    return "\n".join(lines)


def plot(arms: list[dict], meta: dict, path: str) -> None:
    """Held-out accuracy vs device-seconds, one line per arm, the target dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for a in arms:
        xs = [e[0] for e in a["evals"]]
        ys = [e[3] for e in a["evals"]]
        effort = "" if a.get("effort") is None else f", {a['effort']} tests"
        ax.plot(xs, ys, marker="o", label=f"{a['prompts']} prompts × {a['n']}{effort}")
    ax.axhline(meta["target"], ls="--", c="gray", lw=1, label=f"target {meta['target']:.2f}")
    unit = "CPU-seconds" if meta["clock"] == "cpu" else "device-seconds"
    ax.set_xlabel(f"{unit} spent in training steps")
    ax.set_ylabel("held-out greedy accuracy")
    ax.set_title(f"Same budget ({meta['budget_s']:.0f} {unit}), different allocations")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------ main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=DEFAULT_CONFIG, help="PATH[:ARGS] of the job to sweep")
    p.add_argument("--arms", nargs="+", default=["4x8", "8x4", "16x2", "8x8"], help="PxN[xE]")
    p.add_argument("--budget-s", type=float, default=240.0, help="per arm, on --clock")
    p.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    p.add_argument("--eval-fractions", type=float, nargs="*", default=[0.5])
    p.add_argument("--target", type=float, default=0.6, help="held-out accuracy target")
    p.add_argument("--usd-per-hour", type=float, default=0.0, help="per clock unit-hour; 0 = no $")
    p.add_argument("--override", action="append", default=[], help="KEY=VALUE, every arm")
    p.add_argument("--no-shared-baseline", dest="shared_baseline", action="store_false",
                   help="evaluate the start on every arm, not only the first")  # fmt: skip
    p.add_argument("--out", default="runs/allocation")
    p.add_argument("--summarize-only", action="store_true")
    p.add_argument("--run-arm", default=None, help=argparse.SUPPRESS)  # internal: one arm
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.run_arm:
        with open(args.run_arm, encoding="utf-8") as f:
            run_arm(json.load(f))
        return 0
    arms = [parse_arm(a) for a in args.arms]
    if len({a["label"] for a in arms}) != len(arms):
        raise SystemExit("sweep_allocation: the same arm twice")
    os.makedirs(args.out, exist_ok=True)
    specs = {}
    for i, arm in enumerate(arms):
        spec = prepare_arm(arm, args, first=i == 0)
        specs[arm["label"]] = spec
        wd = spec["workdir"]
        if args.summarize_only or os.path.isfile(os.path.join(wd, DONE)):
            continue
        shutil.rmtree(wd, ignore_errors=True)  # a partial arm starts over
        os.makedirs(wd)
        with open(os.path.join(wd, SPEC), "w", encoding="utf-8") as f:
            json.dump(spec, f, indent=1)
        cmd = [sys.executable, os.path.abspath(__file__), "--run-arm", os.path.join(wd, SPEC)]
        print(f"+ arm {arm['label']}: {' '.join(cmd)}", flush=True)
        subprocess.run(cmd, check=True)
    arm_dirs = {label: {**s["arm"], "workdir": s["workdir"]} for label, s in specs.items()}
    results = summarize(arm_dirs, args.target, args.usd_per_hour)
    meta = {
        "config": args.config,
        "overrides": args.override,
        "clock": args.clock,
        "budget_s": args.budget_s,
        "eval_fractions": list(args.eval_fractions),
        "target": args.target,
        "usd_per_hour": args.usd_per_hour,
        "shared_baseline": args.shared_baseline,
        "date": datetime.date.today().isoformat(),
        "host_cpus": os.cpu_count(),
    }
    md = table(results, meta)
    print(md)
    with open(os.path.join(args.out, "sweep.json"), "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "arms": results}, f, indent=1)
    with open(os.path.join(args.out, "sweep.md"), "w", encoding="utf-8") as f:
        f.write(md + "\n")
    plot(results, meta, os.path.join(args.out, "sweep.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
