"""Benchmark prefill: 32 chat prompts one at a time vs together (JaxEngine.prefill_batch).

Same SmolLM2 engine, same prompts (SmolLM2's chat template, 30-60 tokens), greedy first tokens:

  one at a time  engine.prefill per prompt, each waited for (what a batch submitted at once
                 cost before batched prefill: the scheduler's old path)
  together       the scheduler's path: prompts grouped by padded-length bucket, one
                 prefill_batch per bucket, first tokens fetched

Both are compiled before timing (best of --repeats). The first tokens must agree. The floor is
the real prompt tokens' FLOPs at this machine's measured GEMM rate. Prints load average: on a
shared CPU the ratio is only meaningful with the box idle.

    python scripts/bench_prefill.py                 # 32 prompts, ~1-2 min
    python scripts/bench_prefill.py --prompts 64 --json /tmp/prefill.json
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import sys
import time

import jax
import numpy as np
from bench_common import cpu_snapshot, others_cpu_frac, verdict  # sibling files in scripts/
from bench_machine import machine_rates
from bench_prompts import chat_prompts
from flax import nnx

from mimojax.engine import JaxEngine, SamplingParams, sample_key
from mimojax.models import load_model

MODEL = "smollm2-135m-instruct"
MAX_PREFILL = 64  # as bench_generate.py: every prompt fits one bucket of at most this
TARGET = 5.0  # together / one-at-a-time speed-up from the issue


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"))
    p.add_argument("--repeats", type=int, default=3, help="timed runs of each side (best kept)")
    p.add_argument("--json", metavar="PATH", help="also write the results here")
    return p.parse_args(argv)


def one_at_a_time(engine, prompts) -> list[int]:
    params = engine.load_params()
    first = []
    for ids in prompts:
        prefix, _ = engine.prefill(params=params, padded_tokens=ids, true_length=len(ids))
        first.append(int(np.asarray(prefix.first_token_N)[0]))
    return first


def together(engine, prompts) -> list[int]:
    """As Scheduler._prefill_together: one prefill_batch per length bucket."""
    params = engine.load_params()
    greedy = SamplingParams(temperature=0.0)
    by_bucket = collections.defaultdict(list)
    for i, ids in enumerate(prompts):
        by_bucket[engine.prefill_bucket(len(ids))].append(i)
    first = [0] * len(prompts)
    for rows in by_bucket.values():
        bp, offsets = engine.prefill_batch(
            params=params,
            prompts=[prompts[i] for i in rows],
            samplers=[greedy] * len(rows),
            rng_keys=[[sample_key(0, i)] for i in rows],
        )
        tokens_N = np.asarray(bp.first_token_N)
        for i, off in zip(rows, offsets):
            first[i] = int(tokens_N[off])
    return first


def timed(fn, repeats):
    best, out = None, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        s = time.perf_counter() - t0
        best = s if best is None else min(best, s)
    return best, out


def main(argv=None) -> int:
    args = parse_args(argv)
    print(f"date     {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    print(
        f"load     {os.getloadavg()} (1/5/15 min) on {os.cpu_count()} CPUs  jax {jax.__version__}"
    )
    model, tok = load_model(MODEL, dtype=args.dtype)
    n_params = sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param)))
    prompts = chat_prompts(tok, args.prompts)
    lens = [len(p) for p in prompts]
    engine = JaxEngine(
        model,
        tok,
        max_concurrent_decodes=args.prompts,
        max_prefill_length=MAX_PREFILL,
        max_cache_length=2 * MAX_PREFILL,
        max_prefill_batch_tokens=args.prompts * MAX_PREFILL,
    )
    t0 = time.perf_counter()
    ref = one_at_a_time(engine, prompts)  # compiles each length bucket
    got = together(engine, prompts)  # compiles each (batch, length) bucket
    print(f"warm-up  {time.perf_counter() - t0:.1f} s (compiles)")
    snap = cpu_snapshot()
    load_before = os.getloadavg()[0]
    one_s, ref = timed(lambda: one_at_a_time(engine, prompts), args.repeats)
    all_s, got = timed(lambda: together(engine, prompts), args.repeats)
    others = others_cpu_frac(snap, cpu_snapshot())
    rates = machine_rates(args.dtype)
    # Non-embedding matmuls per real prompt token (the tied head runs once per prompt).
    emb = model.config.vocab_size * model.config.hidden_size
    flops = 2 * (n_params - emb) * sum(lens) + 2 * emb * len(prompts)
    floor_s = flops / rates["gemm_flops_per_s"]
    ratio = one_s / all_s
    same = ref == got
    result = {
        "prompts": len(prompts),
        "prompt_tokens": [min(lens), max(lens), float(np.mean(lens))],
        "one_at_a_time_s": one_s,
        "together_s": all_s,
        "ratio": ratio,
        "floor_s": floor_s,
        "gemm_gflop_s": rates["gemm_flops_per_s"] / 1e9,
        "first_tokens_identical": same,
        "others_cpu_frac": others,
        "loadavg": [load_before, *os.getloadavg()],
    }
    print(
        f"prefill  {len(prompts)} prompts ({min(lens)}-{max(lens)} tokens, mean "
        f"{np.mean(lens):.0f}), {MODEL} {args.dtype}, best of {args.repeats}\n"
        f"  one at a time  {1e3 * one_s:8.1f} ms  ({1e3 * one_s / len(prompts):.1f} ms/prompt)\n"
        f"  together       {1e3 * all_s:8.1f} ms  ({flops / all_s / 1e9:.0f} GFLOP/s)\n"
        f"  floor          {1e3 * floor_s:8.1f} ms  (real-token FLOPs at the measured "
        f"{rates['gemm_flops_per_s'] / 1e9:.0f} GFLOP/s GEMM rate)\n"
        f"  ratio {ratio:.2f}x (target >= {TARGET:.0f}x) {verdict(ratio >= TARGET)}; "
        f"one-at-a-time / floor {one_s / floor_s:.2f}x; first tokens identical: {verdict(same)}\n"
        f"  load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; "
        f"other processes' CPU share {others if others is None else f'{others:.0%}'}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
