"""Machine rates for benchmark floors (GEMM FLOP/s, copy bandwidth) and a count of XLA compiles."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp

# ------------------------------------------------------------------ XLA compiles
COMPILES = {"n": 0, "s": 0.0}


def _count_compile(event: str, duration: float, **kwargs) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        COMPILES["n"] += 1
        COMPILES["s"] += duration


# Backend compiles, not jit cache entries: an entry can be added without compiling (same HLO).
jax.monitoring.register_event_duration_secs_listener(_count_compile)


# ------------------------------------------------------------------ machine rates and the floor
def best_time(fn, reps: int) -> float:
    """Fastest of `reps` calls of `fn` (which blocks until its work is done)."""
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def machine_rates(dtype: str) -> dict:
    """This machine's GEMM rate (FLOP/s) and copy bandwidth (bytes/s), both best of a few."""
    n = 2048
    key_a, key_b = jax.random.split(jax.random.PRNGKey(0))
    a_NxN = jax.random.normal(key_a, (n, n), dtype)
    b_NxN = jax.random.normal(key_b, (n, n), dtype)
    # f32 accumulation, as the model's matmuls.
    mm = jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32))
    mm(a_NxN, b_NxN).block_until_ready()
    gemm_s = best_time(lambda: mm(a_NxN, b_NxN).block_until_ready(), 5)
    # 1 GiB, twice the weights: far past the caches. Scaled in place (donated), one read and one
    # write per element as a copy, but without a fresh output buffer whose first-touch page
    # faults would dominate the timing (a non-donated copy measured ~3 GB/s here, not ~20).
    x_N = jnp.ones((2**28,), jnp.float32)
    nbytes = x_N.nbytes
    scale = jax.jit(lambda x: x * 1.0001, donate_argnums=0)
    box = [scale(x_N).block_until_ready()]

    def copy():
        box[0] = scale(box[0])
        box[0].block_until_ready()

    copy_s = best_time(copy, 7)
    return {
        "gemm_flops_per_s": 2 * n**3 / gemm_s,
        "gemm_n": n,
        "copy_bytes_per_s": 2 * nbytes / copy_s,
        "copy_bytes": nbytes,
    }


def step_floor(cfg, n_params: int, batch: int, context: float, dtype: str, rates: dict):
    """(floor seconds, FLOPs, bytes) of one decode step of `batch` rows at mean `context`."""
    e, v, layers = cfg.hidden_size, cfg.vocab_size, cfg.num_layers
    h, k, d = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
    # Every parameter is a matmul weight used once per token (norm scales are noise), except an
    # untied input embedding, of which a step gathers only `batch` rows. Attention: q.k and
    # p.v over the valid context.
    matmul_params = n_params - (0 if cfg.tie_word_embeddings else v * e)
    flops = batch * (2 * matmul_params + 4 * layers * h * d * context)
    itemsize = jnp.dtype(dtype).itemsize
    weight_bytes = matmul_params * itemsize
    kv_bytes = batch * context * layers * 2 * k * d * itemsize
    nbytes = weight_bytes + kv_bytes
    floor = max(flops / rates["gemm_flops_per_s"], nbytes / rates["copy_bytes_per_s"])
    return floor, flops, nbytes
