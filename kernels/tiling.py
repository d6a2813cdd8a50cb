"""What the attention kernels share: backend choice, tile sizes, padding, Triton parameters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

# Finite, so the online-softmax rescale exp(m_old - m_new) never sees inf - inf; masked
# probabilities are zeroed explicitly, so its value never reaches an output.
MASK_VALUE = -1e30
# Segment id of keys no query may see (padding); user segment ids are >= 0.
INVALID_SEGMENT = -(2**31)
# Triton's tl.dot needs every matmul dimension >= 16.
MIN_TILE = 16


def use_interpret(interpret: bool | None) -> bool:
    """Interpret mode unless the default backend is a GPU (Pallas' Triton lowering needs one)."""
    if interpret is None:
        return jax.default_backend() != "gpu"
    return interpret


def round_up(n: int, multiple: int) -> int:
    """`n` rounded up to a multiple of `multiple`."""
    return -(-n // multiple) * multiple


def pick_block(n: int, target: int) -> int:
    """A power-of-two tile for an axis of length `n`, preferring one that divides `n`.

    Dividing tiles avoid padding copies (a padded KV cache would be copied on every step); an
    axis no longer than `target` becomes one tile.
    """
    if n <= target:
        return max(MIN_TILE, pl.next_power_of_2(n))
    block = target
    while block > MIN_TILE and n % block:
        block //= 2
    return block if n % block == 0 else target


def padded_head_dim(d: int) -> int:
    """Head dim as the kernels see it: a power of two >= MIN_TILE (zero columns change nothing)."""
    return max(MIN_TILE, pl.next_power_of_2(d))


def pad_to(x, axis: int, size: int, value=0):
    """`x` padded with `value` at the end of `axis` up to `size` (no copy when already there)."""
    extra = size - x.shape[axis]
    if extra == 0:
        return x
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jnp.pad(x, widths, constant_values=value)


def dot_nt(a, b):
    """a @ b.T with float32 accumulation."""
    return lax.dot_general(a, b, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)


def dot_nn(a, b):
    """a @ b with float32 accumulation."""
    return lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)


def dot_tn(a, b):
    """a.T @ b with float32 accumulation."""
    return lax.dot_general(a, b, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32)


def visible_tile(q_positions_Q, q_segments_Q, kv_start, kv_segments_K):
    """[Q, K] bool: key kv_start + k is at or before the query's position and in its segment."""
    kv_index_K = kv_start + jnp.arange(kv_segments_K.shape[0], dtype=jnp.int32)
    causal_QxK = kv_index_K[None, :] <= q_positions_Q[:, None]
    return causal_QxK & (kv_segments_K[None, :] == q_segments_Q[:, None])


def num_blocks_up_to(last_index, block: int, num_blocks: int):
    """How many `block`-sized tiles cover indices 0..last_index (0 when last_index < 0)."""
    # lax.div on a non-negative numerator is floor division; `//` does not lower to Triton.
    covered = lax.div(jnp.maximum(last_index + block, 0), jnp.int32(block))
    return jnp.minimum(covered, num_blocks)


def triton_params(interpret: bool, num_warps: int, num_stages: int):
    """Triton compiler parameters on GPU; None in interpret mode."""
    if interpret:
        return None
    # GPU only; tests/kernels/test_triton_lowering.py checks this path lowers, without a GPU.
    from jax.experimental.pallas import triton as plgpu

    return plgpu.CompilerParams(num_warps=num_warps, num_stages=num_stages)
