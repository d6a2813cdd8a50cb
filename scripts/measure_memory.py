"""Peak RSS of a training run, phase by phase (a script: it patches the trainer, runs it, prints).

    python scripts/measure_memory.py [--config configs/grpo_arith_smollm2.py:minutes=1]
        [--workdir /tmp/mem] [--trim] [KEY=VALUE ...]

Runs `mimojax train` in-process with each phase (build, eval, the trainer's timed phases: gen,
reward, update_actor, sync ..., checkpoint) wrapped: the kernel's peak-RSS mark (VmHWM) is reset
when a phase starts (/proc/self/clear_refs) and read when it ends, so each row is that phase's own
peak, plus the RSS and the bytes of live jax arrays when it ended. It ends with XLA's
memory_analysis() of the actor update as compiled for the run's shapes (arguments, outputs,
temporaries). `--trim` calls glibc's malloc_trim(0) after every phase (does freed-but-kept heap
explain the peaks?); MALLOC_ARENA_MAX etc. are set from the environment as usual.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import os
import shutil
import time
from collections import defaultdict

import jax

GB = 1e9
COLUMNS = ("first", "later", "end", "live", "s")
_rows: dict[str, dict] = defaultdict(
    lambda: {"n": 0, "first": 0, "later": 0, "end": 0, "live": 0, "s": 0.0}
)
_stack: list[list] = []  # open phases: [name, peak so far]
_args: dict = {}


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _fold_peak() -> int:
    """Reads VmHWM into every open phase (a nested phase resets the mark its parents share)."""
    hwm = _status("VmHWM")
    for frame in _stack:
        frame[1] = max(frame[1], hwm)
    return hwm


@contextlib.contextmanager
def phase(name: str):
    """One measured phase: its own peak RSS, end RSS, live jax bytes, seconds."""
    _fold_peak()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current RSS
    _stack.append([name, _status("VmRSS")])
    t0 = time.perf_counter()
    try:
        yield
    finally:
        _fold_peak()
        _, peak = _stack.pop()
        if _args.get("trim"):
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        row = _rows[name]
        row["n"] += 1
        row["s"] += time.perf_counter() - t0
        # the first call of a phase compiles its jits; later calls show the steady state
        key = "first" if row["n"] == 1 else "later"
        row[key] = max(row[key], peak)
        row["end"] = _status("VmRSS")
        row["live"] = sum(x.nbytes for x in jax.live_arrays())


def _wrap(owner, attr: str, name: str | None = None):
    fn = getattr(owner, attr)

    @functools.wraps(fn)
    def wrapped(*a, **kw):
        with phase(name or attr):
            return fn(*a, **kw)

    setattr(owner, attr, wrapped)


def _patch():
    import mimojax.observe.metrics as metrics
    import mimojax.train.trainer as trainer_mod

    timer_call = metrics.Timer.__call__.__wrapped__  # the undecorated generator

    @contextlib.contextmanager
    def timed(self, name):
        with phase(name), contextlib.contextmanager(timer_call)(self, name):
            yield

    metrics.Timer.__call__ = timed
    _wrap(trainer_mod, "build_run")
    import mimojax.train.roles as roles

    _wrap(roles, "load_actor_model", "load_model")
    _wrap(roles, "engine_from_config", "engine_init")
    _wrap(trainer_mod.Trainer, "evaluate", "eval")
    _wrap(trainer_mod.Trainer, "save", "checkpoint")
    return trainer_mod


def _spec(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=getattr(x, "sharding", None))


def _capture_update(trainer):
    """Records the actor update's argument shapes on its first call (for memory_analysis)."""
    upd = trainer.actor.update
    fused = upd.fused

    def fused_capturing(*a):
        if "update_args" not in _args:
            _args["update_args"] = jax.tree.map(_spec, a)
        return fused(*a)

    upd.fused = fused_capturing
    return fused


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="configs/grpo_arith_smollm2.py:minutes=1")
    ap.add_argument("--workdir", default="/tmp/measure_memory")
    ap.add_argument("--trim", action="store_true", help="malloc_trim(0) after every phase")
    ap.add_argument("overrides", nargs="*", help="config overrides, KEY=VALUE")
    args = ap.parse_args()
    _args["trim"] = args.trim
    shutil.rmtree(args.workdir, ignore_errors=True)
    from mimojax.cli.train import fixed_mmap_threshold
    from mimojax.config.loader import load_config

    fixed_mmap_threshold()  # as `mimojax train` does

    trainer_mod = _patch()
    cfg = load_config(args.config, args.overrides)
    start_rss = _status("VmRSS")
    trainer = trainer_mod.Trainer(cfg, args.workdir, progress=False)
    fused = _capture_update(trainer)
    with phase("train (all)"):
        trainer.train()
    print(f"after imports: RSS {start_rss / GB:.2f} GB | process peak (VmHWM folded) below")
    print("phase peak RSS (GB): first call (compiles) / later calls; at the end: RSS, live jax")
    print(f"{'phase':14s} {'calls':>5s}" + "".join(f" {c:>6s}" for c in COLUMNS))
    for name, r in _rows.items():
        later = f"{r['later'] / GB:6.2f}" if r["n"] > 1 else f"{'-':>6s}"
        print(
            f"{name:14s} {r['n']:5d} {r['first'] / GB:6.2f} {later} {r['end'] / GB:6.2f}"
            f" {r['live'] / GB:6.2f} {r['s']:6.1f}"
        )
    peak = max(max(r["first"], r["later"]) for r in _rows.values())
    print(f"overall peak RSS: {peak / GB:.2f} GB")
    if "update_args" in _args:
        stack = _args["update_args"][1]
        print(f"actor update micro-batch stack: [M, rows, T] = {list(stack.input_ids_BxT.shape)}")
        ma = fused.lower(*_args["update_args"]).compile().memory_analysis()
        sizes = {
            "arguments": ma.argument_size_in_bytes,
            "outputs": ma.output_size_in_bytes,
            "aliased": ma.alias_size_in_bytes,
            "temporaries": ma.temp_size_in_bytes,
        }
        print("actor update memory_analysis (GB): " + ", ".join(
            f"{k} {v / GB:.2f}" for k, v in sizes.items()
        ))  # fmt: skip
    os._exit(0)  # skip interpreter teardown of the XLA runtime (seconds, irrelevant here)


if __name__ == "__main__":
    main()
