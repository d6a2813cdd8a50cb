"""Benchmark the attention kernels: our Pallas kernels vs cuDNN vs XLA (model.attention_impl).

On a GPU (bf16, causal, GQA with 4 query heads per K/V head, 16k tokens per batch, hidden 2048):
  training   flash attention fwd and fwd+bwd at seq 1k/4k/16k, head dim 64/128, in TFLOP/s and
             % of the card's peak, measured first with a big bf16 matmul
  decode     one token per slot over a full KV cache, in us per step vs the memory-bandwidth
             floor (K and V read once), bandwidth measured first with a big copy
cuDNN runs with is_causal=True (its best case; the model's "cudnn" impl passes a dense mask).
XLA materialises [T, S] scores and is skipped where they would not fit comfortably.

Elsewhere (CPU) the kernels run in interpret mode: the script checks small shapes against the
pure-jnp references, prints max |error| and exits non-zero past tolerance.

    python scripts/bench_attention.py                        # GPU: ~3-4 min including compiles
    python scripts/bench_attention.py --seqs 1024 --head-dims 128 --skip-decode
    python scripts/bench_attention.py --check                # the interpret-mode checks anywhere
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from mimojax.kernels import (
    BlockSizes,
    decode_attention,
    flash_attention,
    reference_attention,
    reference_decode_attention,
)
from mimojax.models.attention import cache_mask, causal_mask, xla_attention

TOKENS_PER_BATCH = 16384
HIDDEN = 2048
GQA_GROUP = 4
XLA_SCORE_BYTES_LIMIT = 24 * 2**30  # float32 [B, H, T, S] scores; fwd+bwd keeps ~3 of them
CHECK_TOLERANCE = {"float32": 5e-5, "bfloat16": 6e-2}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seqs", default="1024,4096,16384", help="training sequence lengths")
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--contexts", default="1024,4096,16384", help="decode KV-cache lengths")
    p.add_argument("--decode-batch", type=int, default=16, help="decode slots")
    p.add_argument("--skip-decode", action="store_true")
    p.add_argument("--check", action="store_true", help="interpret-mode checks, even on a GPU")
    p.add_argument("--budget-s", type=float, default=300.0, help="skip cases past this time")
    return p.parse_args(argv)


def _ints(csv: str) -> list[int]:
    return [int(x) for x in csv.split(",") if x]


def time_call(fn, *args, min_iters: int = 3, max_iters: int = 20, target_s: float = 0.5):
    """Median seconds per call after one untimed (compiling) call."""
    jax.block_until_ready(fn(*args))
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_iters or (
        len(times) < max_iters and time.perf_counter() - start < target_s
    ):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_tflops() -> float:
    """Measured bf16 matmul TFLOP/s (8192^3), the denominator of '% of peak'."""
    n = 8192
    a = jnp.ones((n, n), jnp.bfloat16)
    matmul = jax.jit(lambda a, b: a @ b)
    return 2 * n**3 / time_call(matmul, a, a) / 1e12


def bandwidth_gbs() -> float:
    """Measured device-memory GB/s of a 2 GiB read + 2 GiB write."""
    x = jnp.ones((2**30,), jnp.bfloat16)
    copy = jax.jit(lambda x: x + 1)
    return 2 * x.nbytes / time_call(copy, x) / 1e9


def _rand(key, shape, dtype=jnp.bfloat16):
    return jax.random.normal(key, shape, jnp.float32).astype(dtype)


def _fwd_bwd(attn):
    def run(q, k, v, do):
        out, vjp = jax.vjp(attn, q, k, v)
        return out, vjp(do)

    return jax.jit(run)


def training_impls(b: int, t: int):
    """name -> causal attention fn(q, k, v) for a [B, T] full batch."""
    q_positions = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
    mask = causal_mask(jnp.ones((b, t), jnp.int32))
    return {
        "pallas": lambda q, k, v: flash_attention(q, k, v, q_positions),
        "cudnn": lambda q, k, v: jax.nn.dot_product_attention(
            q, k, v, is_causal=True, implementation="cudnn"
        ),
        "xla": lambda q, k, v: xla_attention(q, k, v, mask),
    }


def bench_training(seqs, head_dims, peak, deadline):
    """Rows of the training table."""
    rows = []
    for d in head_dims:
        for t in seqs:
            b, h = max(1, TOKENS_PER_BATCH // t), HIDDEN // d
            kh = h // GQA_GROUP
            keys = jax.random.split(jax.random.key(0), 4)
            q, do = _rand(keys[0], (b, t, h, d)), _rand(keys[3], (b, t, h, d))
            k, v = _rand(keys[1], (b, t, kh, d)), _rand(keys[2], (b, t, kh, d))
            fwd_flops = 4 * b * h * t * t * d / 2  # causal: half of QK^T and PV
            # FlashAttention's convention: backward = 2.5x forward (5 matmuls to 2), no credit
            # for the recomputed QK^T.
            for name, attn in training_impls(b, t).items():
                for phase, fn, args, flops in (
                    ("fwd", jax.jit(attn), (q, k, v), fwd_flops),
                    ("fwd+bwd", _fwd_bwd(attn), (q, k, v, do), 3.5 * fwd_flops),
                ):
                    cell = [f"{t}", f"{d}", f"{b}x{h}/{kh}", phase, name]
                    if name == "xla" and b * h * t * t * 4 > XLA_SCORE_BYTES_LIMIT / 3:
                        rows.append(cell + ["skipped: O(T^2) scores", "", ""])
                        continue
                    if time.perf_counter() > deadline:
                        rows.append(cell + ["skipped: --budget-s", "", ""])
                        continue
                    try:
                        sec = time_call(fn, *args)
                    except Exception as e:  # one failing impl must not hide the others
                        rows.append(cell + [f"error: {type(e).__name__}: {str(e)[:80]}", "", ""])
                        continue
                    tflops = flops / sec / 1e12
                    rows.append(
                        cell + [f"{sec * 1e3:.2f}", f"{tflops:.0f}", f"{tflops / peak:.0%}"]
                    )
    return rows


def decode_impls(lengths_B):
    """name -> attention fn(q_Bx1xHxD, k, v) of one token per slot over keys < lengths_B."""
    mask = cache_mask(lengths_B - 1, 1)
    return {
        "pallas": lambda q, k, v: decode_attention(q[:, 0], k, v, lengths_B)[:, None],
        "cudnn": lambda q, k, v: jax.nn.dot_product_attention(
            q, k, v, key_value_seq_lengths=lengths_B, implementation="cudnn"
        ),
        "xla": lambda q, k, v: xla_attention(q, k, v, mask),
    }


def bench_decode(contexts, batch, bandwidth, deadline):
    """Rows of the decode table: Llama-8B-like heads (32 query, 8 K/V, D=128), full caches."""
    h, kh, d = 32, 8, 128
    rows = []
    for s in contexts:
        keys = jax.random.split(jax.random.key(1), 3)
        q = _rand(keys[0], (batch, 1, h, d))
        k, v = _rand(keys[1], (batch, s, kh, d)), _rand(keys[2], (batch, s, kh, d))
        lengths = jnp.full((batch,), s, jnp.int32)
        floor_us = 2 * k.nbytes / (bandwidth * 1e9) * 1e6
        impls = decode_impls(lengths)
        for name, attn in impls.items():
            cell = [f"{s}", f"{batch}x{h}/{kh}", name]
            if time.perf_counter() > deadline:
                rows.append(cell + ["skipped: --budget-s", f"{floor_us:.1f}", ""])
                continue
            try:
                us = time_call(jax.jit(attn), q, k, v) * 1e6
            except Exception as e:
                rows.append(cell + [f"error: {type(e).__name__}: {str(e)[:80]}", "", ""])
                continue
            rows.append(cell + [f"{us:.1f}", f"{floor_us:.1f}", f"{us / floor_us:.2f}x"])
    return rows


def _max_err(got, want) -> float:
    return max(
        float(jnp.max(jnp.abs(g.astype(jnp.float32) - w.astype(jnp.float32))))
        for g, w in zip(got, want)
    )


def interpret_checks():
    """Rows of the interpret-mode table and whether all are within tolerance."""
    rng = np.random.default_rng(0)
    rows, ok = [], True
    cases = [
        ("flash", (2, 40, 40, 4, 2, 16), "float32", BlockSizes(16, 16, 16, 16)),
        ("flash", (1, 40, 40, 4, 1, 64), "float32", None),
        ("flash", (2, 40, 40, 4, 2, 64), "bfloat16", None),
        ("decode", (4, 1, 40, 8, 2, 16), "float32", (16, 3)),
        ("decode", (4, 1, 40, 8, 2, 128), "bfloat16", (None, None)),
    ]
    for kernel, (b, t, s, h, kh, d), dtype, tiles in cases:
        q = jnp.asarray(rng.standard_normal((b, t, h, d)), dtype)
        k = jnp.asarray(rng.standard_normal((b, s, kh, d)), dtype)
        v = jnp.asarray(rng.standard_normal((b, s, kh, d)), dtype)
        if kernel == "flash":
            # Right padding that is not a multiple of any tile, plus a query row seeing nothing.
            valid = np.arange(s)[None] < np.linspace(s, s // 2 + 1, b).astype(int)[:, None]
            valid[-1, :2] = False
            mask_args = (jnp.broadcast_to(jnp.arange(t), (b, t)), jnp.asarray(valid))
            do = jnp.asarray(rng.standard_normal(q.shape), dtype)

            def fwd_bwd(fn, q, k, v, do, mask_args):
                out, vjp = jax.vjp(lambda q, k, v: fn(q, k, v, *mask_args), q, k, v)
                return (out, *vjp(do))

            ours = functools.partial(flash_attention, block_sizes=tiles)
            run = jax.jit(functools.partial(fwd_bwd, ours))
            got = run(q, k, v, do, mask_args)
            want = fwd_bwd(reference_attention, q, k, v, do, mask_args)
            errs = [("fwd", _max_err(got[:1], want[:1])), ("bwd", _max_err(got[1:], want[1:]))]
            sec = time_call(run, q, k, v, do, mask_args, min_iters=1, max_iters=3)
        else:
            lengths = jnp.asarray(np.linspace(0, s, b).astype(np.int32))
            block_k, splits = tiles
            run = jax.jit(functools.partial(decode_attention, block_k=block_k, num_splits=splits))
            got = run(q[:, 0], k, v, lengths)
            errs = [("fwd", _max_err([got], [reference_decode_attention(q[:, 0], k, v, lengths)]))]
            sec = time_call(run, q[:, 0], k, v, lengths, min_iters=1, max_iters=3)
        shape = f"B{b} T{t} S{s} H{h} K{kh} D{d}"
        for phase, err in errs:
            good = err <= CHECK_TOLERANCE[dtype]
            ok &= good
            status = "ok" if good else "FAIL"
            rows.append([kernel, phase, shape, dtype, f"{err:.1e}", status, f"{sec * 1e3:.0f}"])
    return rows, ok


def markdown(header, rows) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    args = parse_args(argv)
    device = jax.devices()[0]
    backend = jax.default_backend()
    print(f"# attention benchmark on {device.device_kind} ({backend}), jax {jax.__version__}\n")
    if args.check or backend != "gpu":
        rows, ok = interpret_checks()
        print("Pallas interpret mode vs the references (ms: one jitted call, not a speed):\n")
        header = ["kernel", "phase", "shape", "dtype", "max abs err", "within tol", "ms/call"]
        print(markdown(header, rows))
        return 0 if ok else 1

    start = time.perf_counter()
    deadline = start + args.budget_s
    peak, bandwidth = peak_tflops(), bandwidth_gbs()
    print(f"measured peak: {peak:.0f} TFLOP/s bf16 matmul, {bandwidth:.0f} GB/s copy\n")
    rows = bench_training(_ints(args.seqs), _ints(args.head_dims), peak, deadline)
    header = ["seq", "D", "BxH/K", "pass", "impl", "ms", "TFLOP/s", "% peak"]
    print("## training / prefill (causal, bf16)\n")
    print(markdown(header, rows))
    if not args.skip_decode:
        rows = bench_decode(_ints(args.contexts), args.decode_batch, bandwidth, deadline)
        print("\n## decode (one token per slot, full caches, bf16)\n")
        print(markdown(["context", "BxH/K", "impl", "us/step", "floor us", "vs floor"], rows))
    print(f"\ntotal {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
