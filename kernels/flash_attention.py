"""Flash attention for training and prefill: `flash_attention(q, k, v, q_positions, ...)`.

Visibility is structured, never a dense [B, T, S] mask: query t of row b sees key s iff
    s <= q_positions[b, t]                      (causal, in key-index space)
    and kv_valid[b, s]                          (padding; None: every key is valid)
    and q_segment_ids[b, t] == kv_segment_ids[b, s]   (packing, ids >= 0; None: one segment).
Training uses q_positions = t; a prefill into a KV cache uses lengths[b] + t. q_positions
should be non-decreasing along T for the causal skipping to pay off (it is correct either way).

A query that sees no key (a fully masked row) gets output 0 and zero gradients. The xla impl
returns the uniform average over keys instead; the model never depends on either, because
padded query rows are masked out of every loss and padded keys are invisible to real queries.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp

from mimojax.kernels import tiling
from mimojax.kernels.flash_backward import flash_backward
from mimojax.kernels.flash_forward import FlashParams, flash_forward


@dataclasses.dataclass(frozen=True)
class BlockSizes:
    """Tiles (powers of two) and Triton launch parameters of one flash-attention call."""

    block_q: int
    block_k: int
    block_q_bwd: int
    block_k_bwd: int
    num_warps: int = 4
    num_stages: int = 2


def default_block_sizes(t: int, s: int, d: int, interpret: bool) -> BlockSizes:
    """Tiles for a [T queries, S keys, head dim D] problem.

    GPU: 128x64 forward and 64x64 backward tiles, 8 warps from D=128 on (the usual Triton
    FlashAttention-2 choices for Hopper; untuned here). Interpret mode: one big tile per axis
    where possible, since each tile is a serial loop step on the CPU.
    """
    if interpret:
        bq, bk = tiling.pick_block(t, 64), tiling.pick_block(s, 64)
        return BlockSizes(bq, bk, bq, bk)
    warps = 4 if d <= 64 else 8
    return BlockSizes(
        block_q=tiling.pick_block(t, 128),
        block_k=tiling.pick_block(s, 64),
        block_q_bwd=tiling.pick_block(t, 64),
        block_k_bwd=tiling.pick_block(s, 64),
        num_warps=warps,
        num_stages=3 if d <= 64 else 2,
    )


@functools.partial(jax.custom_vjp, nondiff_argnums=(6,))
def _flash(q, k, v, qpos, qseg, kvseg, p: FlashParams):
    return flash_forward(q, k, v, qpos, qseg, kvseg, p)[0]


def _flash_fwd(q, k, v, qpos, qseg, kvseg, p: FlashParams):
    out, lse = flash_forward(q, k, v, qpos, qseg, kvseg, p)
    return out, (q, k, v, qpos, qseg, kvseg, out, lse)


def _flash_bwd(p: FlashParams, residuals, do):
    dq, dk, dv = flash_backward(p, residuals, do)
    return dq, dk, dv, None, None, None


_flash.defvjp(_flash_fwd, _flash_bwd)


def flash_attention(
    q_BxTxHxD,
    k_BxSxKxD,
    v_BxSxKxD,
    q_positions_BxT,
    kv_valid_BxS=None,
    q_segment_ids_BxT=None,
    kv_segment_ids_BxS=None,
    *,
    block_sizes: BlockSizes | None = None,
    interpret: bool | None = None,
):
    """Causal-by-position GQA attention with padding/segments; differentiable (custom VJP)."""
    b, t, h, d = q_BxTxHxD.shape
    s, kv_heads = k_BxSxKxD.shape[1], k_BxSxKxD.shape[2]
    if h % kv_heads:
        raise ValueError(f"{h} query heads are not a multiple of {kv_heads} K/V heads")
    if (q_segment_ids_BxT is None) != (kv_segment_ids_BxS is None):
        raise ValueError("pass both q_segment_ids_BxT and kv_segment_ids_BxS, or neither")
    interpret = tiling.use_interpret(interpret)
    bs = block_sizes or default_block_sizes(t, s, d, interpret)

    # Padding keys become an invalid segment, padding queries see nothing: one mask test in
    # the kernels covers causality, padding and packing.
    if q_segment_ids_BxT is None:
        qseg_BxT = jnp.zeros((b, t), jnp.int32)
        kvseg_BxS = jnp.zeros((b, s), jnp.int32)
    else:
        qseg_BxT = q_segment_ids_BxT.astype(jnp.int32)
        kvseg_BxS = kv_segment_ids_BxS.astype(jnp.int32)
    if kv_valid_BxS is not None:
        kvseg_BxS = jnp.where(kv_valid_BxS, kvseg_BxS, tiling.INVALID_SEGMENT)

    tp = tiling.round_up(t, max(bs.block_q, bs.block_q_bwd))
    sp = tiling.round_up(s, max(bs.block_k, bs.block_k_bwd))
    dp = tiling.padded_head_dim(d)
    q = tiling.pad_to(tiling.pad_to(q_BxTxHxD, 1, tp), 3, dp)
    k = tiling.pad_to(tiling.pad_to(k_BxSxKxD, 1, sp), 3, dp)
    v = tiling.pad_to(tiling.pad_to(v_BxSxKxD, 1, sp), 3, dp)
    qpos = tiling.pad_to(q_positions_BxT.astype(jnp.int32), 1, tp, -1)
    qseg = tiling.pad_to(qseg_BxT, 1, tp)
    kvseg = tiling.pad_to(kvseg_BxS, 1, sp, tiling.INVALID_SEGMENT)

    params = FlashParams(
        scale=float(d) ** -0.5,
        groups=h // kv_heads,
        block_q=bs.block_q,
        block_k=bs.block_k,
        block_q_bwd=bs.block_q_bwd,
        block_k_bwd=bs.block_k_bwd,
        num_warps=bs.num_warps,
        num_stages=bs.num_stages,
        interpret=interpret,
    )
    out = _flash(q, k, v, qpos, qseg, kvseg, params)
    return out[:, :t, :, :d]
