"""Benchmark the RL forward passes: mimojax (JAX) vs transformers (PyTorch), same weights.

Two phases, both on a full (unpadded) batch of B sequences of T random token ids:

  logprobs   per-token log p(ids[t] | ids[:t]), no grad: the trainer's old/ref logprob pass
  fwd+bwd    gradient of -sum(logp * mask) w.r.t. every parameter: the train step's core

Before timing, both implementations' log-probs are compared (max |diff| < 1e-3) so the
benchmark compares equal work. Speed goals for mimojax live here, not in tests.

    python scripts/bench_forward.py                      # SmolLM2-135M, 8x256: ~2.5 min on 2 cores
    python scripts/bench_forward.py --batch 4 --seq 128  # quick look: ~40 s
    python scripts/bench_forward.py --model tiny-random-llama --seq 64
    python scripts/bench_forward.py --skip-torch --json /tmp/bench.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
from bench_common import (  # sibling file in scripts/
    cpu_snapshot,
    fmt,
    others_cpu_frac,
    pct,
    print_table,
)
from flax import nnx

from mimojax.models import load_model, save_hf, token_logprobs

LOGP_TOLERANCE = 1e-3
# mimojax's speed goal: at least torch's speed on the same weights and work (speed-up >= goal).
# Reported, not enforced: on shared CPUs the ratio moves by tens of percent run to run.
SPEEDUP_GOALS = {"logprobs": 1.0, "fwd+bwd": 1.0}
OTHERS_CPU_WARN = 0.10  # other processes' share of the CPUs above which timings are suspect


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="smollm2-135m-instruct", help="registered name or path")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--iters", type=int, default=3, help="timed calls per phase")
    p.add_argument("--warmup", type=int, default=1, help="untimed calls per phase (at least 1)")
    p.add_argument("--skip-torch", action="store_true", help="time mimojax only")
    p.add_argument("--remat", default="dots", help="mimojax model.remat policy: none | full | dots")
    p.add_argument("--json", metavar="PATH", help="also write the results here")
    return p.parse_args(argv)


def time_calls(fn, sync, warmup: int, iters: int) -> dict:
    """First-call seconds (jit compile included), then median and min of `iters` timed calls."""
    t0 = time.perf_counter()
    out = sync(fn())
    first_s = time.perf_counter() - t0
    for _ in range(max(0, warmup - 1)):
        sync(fn())
    times = []
    snap = cpu_snapshot()
    for _ in range(iters):
        t0 = time.perf_counter()
        sync(fn())
        times.append(time.perf_counter() - t0)
    others = others_cpu_frac(snap, cpu_snapshot())
    return {
        "first_call_s": first_s,
        "s_per_call": statistics.median(times),
        "min_s": min(times),
        "times_s": times,
        "others_cpu_frac": others,
        "first_out": out,
    }


def jax_phases(model, ids_BxT, mask_BxT):
    """(logprobs fn, fwd+bwd fn, parameter count); the fns are zero-arg calls on fixed inputs."""
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)

    def logp_fn(params, ids_BxT, mask_BxT):
        m = nnx.merge(graphdef, params, rest)
        return token_logprobs(m, ids_BxT, mask_BxT)[0]

    def loss_fn(params, ids_BxT, mask_BxT):
        logp_BxT = logp_fn(params, ids_BxT, mask_BxT)
        return -(logp_BxT * mask_BxT).sum()

    fwd = jax.jit(logp_fn)
    grad = jax.jit(jax.grad(loss_fn))
    n_params = sum(x.size for x in jax.tree.leaves(params))
    run_fwd = lambda: fwd(params, ids_BxT, mask_BxT)
    run_grad = lambda: grad(params, ids_BxT, mask_BxT)
    return run_fwd, run_grad, n_params


def torch_phases(hf_dir: str, ids_np_BxT, mask_np_BxT):
    """(logprobs fn, fwd+bwd fn, parameter count, torch) for the transformers model in `hf_dir`."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(os.cpu_count() or 1)
    model = AutoModelForCausalLM.from_pretrained(
        hf_dir, dtype=torch.float32, attn_implementation="sdpa"
    )
    model.eval()  # no dropout; grads still flow
    ids = torch.from_numpy(ids_np_BxT.astype(np.int64))
    mask = torch.from_numpy(mask_np_BxT.astype(np.int64))

    def logp():
        logits_BxTxV = model(input_ids=ids, attention_mask=mask).logits[:, :-1].float()
        logp_BxT = torch.log_softmax(logits_BxTxV, dim=-1).gather(-1, ids[:, 1:, None])[..., 0]
        return torch.cat([torch.zeros_like(logp_BxT[:, :1]), logp_BxT], dim=1)

    def fwd():
        with torch.no_grad():
            return logp()

    def fwd_bwd():
        model.zero_grad(set_to_none=True)
        loss = -(logp() * mask).sum()
        loss.backward()
        return loss

    n_params = sum(p.numel() for p in model.parameters())
    return fwd, fwd_bwd, n_params, torch


def goal_text(phase: str, speedup: float | None) -> str:
    """The phase's speed-up goal and whether this run met it."""
    goal = SPEEDUP_GOALS.get(phase)
    if goal is None or speedup is None:
        return "-"
    return f">={goal:.1f}x " + ("met" if speedup >= goal else "MISSED")


def main(argv=None) -> int:
    args = parse_args(argv)
    t_start = time.perf_counter()
    backend = jax.default_backend()
    print(f"date     {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(f"devices  {jax.devices()}  backend={backend}  cpu_count={os.cpu_count()}")
    print(f"python   {platform.python_version()}  jax {jax.__version__}", end="")

    model, tok = load_model(args.model, dtype="float32", remat=args.remat)
    cfg = model.config
    if cfg.dtype != "float32" or cfg.param_dtype != "float32":
        print(f"\nwarning: model dtype {cfg.dtype}/{cfg.param_dtype}, expected float32")
    b, t = args.batch, args.seq
    tokens = b * t
    # Random ids (seeded): timing does not depend on content, and random text gives large
    # negative log-probs, the harder case for the agreement check.
    ids_np_BxT = np.random.default_rng(0).integers(0, cfg.vocab_size, (b, t), dtype=np.int32)
    mask_np_BxT = np.ones((b, t), np.int32)
    ids_BxT, mask_BxT = jnp.asarray(ids_np_BxT), jnp.asarray(mask_np_BxT)

    jax_fwd, jax_grad, n_params = jax_phases(model, ids_BxT, mask_BxT)
    jsync = jax.block_until_ready
    torch_fwd = torch_grad = tsync = None
    torch_version = None
    if not args.skip_torch:
        with tempfile.TemporaryDirectory(prefix="bench_forward_") as hf_dir:
            save_hf(model, tok, hf_dir)
            torch_fwd, torch_grad, n_torch, torch = torch_phases(hf_dir, ids_np_BxT, mask_np_BxT)
        torch_version = torch.__version__
        tsync = lambda x: x
        if n_torch != n_params:
            print(f"\nwarning: parameter counts differ: mimojax {n_params} torch {n_torch}")
        print(f"  torch {torch_version} ({torch.get_num_threads()} threads)", end="")
    print()
    print(
        f"model    {args.model}  params={n_params / 1e6:.1f}M  batch={b} seq={t} "
        f"tokens/call={tokens}  iters={args.iters} warmup={max(1, args.warmup)}"
    )

    warmup = max(1, args.warmup)
    res = {}
    for phase, jfn, tfn in (("logprobs", jax_fwd, torch_fwd), ("fwd+bwd", jax_grad, torch_grad)):
        res[phase] = {"mimojax": time_calls(jfn, jsync, warmup, args.iters)}
        if tfn is not None:
            res[phase]["torch"] = time_calls(tfn, tsync, warmup, args.iters)

    max_diff = None
    if not args.skip_torch:
        logp_jax = np.asarray(res["logprobs"]["mimojax"]["first_out"])
        logp_torch = res["logprobs"]["torch"]["first_out"].numpy()
        max_diff = float(np.abs(logp_jax - logp_torch).max())
        verdict = "OK" if max_diff < LOGP_TOLERANCE else "MISMATCH"
        print(
            f"logprob agreement: max |mimojax - torch| = {max_diff:.2e} "
            f"(tolerance {LOGP_TOLERANCE:g}) {verdict}"
        )

    # 2N FLOPs per token forward, 6N forward+backward (attention FLOPs not counted).
    flops_per_token = {"logprobs": 2 * n_params, "fwd+bwd": 6 * n_params}
    unit, scale = ("TFLOP/s", 1e12) if backend == "gpu" else ("GFLOP/s", 1e9)
    rows, first_rows, summary = [], [], {}
    for phase, r in res.items():
        js = r["mimojax"]["s_per_call"]
        ts = r["torch"]["s_per_call"] if "torch" in r else None
        rate = lambda s, p=phase: flops_per_token[p] * tokens / s / scale
        rows.append(
            [
                phase,
                f"{js:.3f}",
                fmt(ts, ".3f"),
                f"{tokens / js:,.0f}",
                "-" if ts is None else f"{tokens / ts:,.0f}",
                "-" if ts is None else f"{ts / js:.2f}x",
                f"{rate(js):.1f}",
                "-" if ts is None else f"{rate(ts):.1f}",
                goal_text(phase, None if ts is None else ts / js),
            ]
        )
        tf = r["torch"]["first_call_s"] if "torch" in r else None
        tmin = r["torch"]["min_s"] if "torch" in r else None
        first_rows.append(
            [
                phase,
                f"{r['mimojax']['first_call_s']:.2f}",
                fmt(tf, ".2f"),
                f"{r['mimojax']['min_s']:.3f}",
                fmt(tmin, ".3f"),
                pct(r["mimojax"]["others_cpu_frac"]),
                pct(r["torch"]["others_cpu_frac"] if "torch" in r else None),
            ]
        )
        summary[phase] = {
            impl: {k: v for k, v in d.items() if k != "first_out"} for impl, d in r.items()
        }
        summary[phase]["speedup"] = None if ts is None else ts / js
        summary[phase]["speedup_goal"] = SPEEDUP_GOALS.get(phase)
        summary[phase]["mimojax_" + unit] = rate(js)
        summary[phase]["torch_" + unit] = None if ts is None else rate(ts)

    print(f"\nseconds per call: median of {args.iters}; speed-up = torch s / mimojax s")
    print_table(
        rows,
        [
            "phase",
            "mimojax s/call",
            "torch s/call",
            "mimojax tok/s",
            "torch tok/s",
            "speed-up",
            f"mimojax {unit}",
            f"torch {unit}",
            "goal",
        ],
    )
    print(
        "\nfirst call (jit compile included for mimojax; not in the timings above), fastest call,"
        "\nand the CPU share other processes used during the timed calls"
    )
    print_table(
        first_rows,
        [
            "phase",
            "mimojax first s",
            "torch first s",
            "mimojax min s",
            "torch min s",
            "mimojax others",
            "torch others",
        ],
    )
    wall = time.perf_counter() - t_start
    print(f"\ntotal wall {wall:.1f} s")
    others = [d["others_cpu_frac"] for r in res.values() for d in r.values()]
    if any(x is not None and x > OTHERS_CPU_WARN for x in others):
        # torch's OpenMP kernels stall at barriers when another process holds a core; XLA's
        # work-stealing pool degrades more gently, so contention skews the ratio towards mimojax.
        print(
            "warning: other processes used the CPUs during the timed calls, so the timings "
            "(torch's most) are inflated and the speed-up is skewed. Record numbers from an "
            "idle machine."
        )

    if args.json:
        out = {
            "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "args": vars(args),
            "backend": backend,
            "devices": [str(d) for d in jax.devices()],
            "cpu_count": os.cpu_count(),
            "versions": {
                "jax": jax.__version__,
                "torch": torch_version,
                "python": platform.python_version(),
            },
            "n_params": n_params,
            "tokens_per_call": tokens,
            "logp_max_abs_diff": max_diff,
            "phases": summary,
            "wall_s": wall,
        }
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
        print(f"wrote {args.json}")
    if max_diff is not None and max_diff >= LOGP_TOLERANCE:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
