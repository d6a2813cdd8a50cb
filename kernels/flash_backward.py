"""Flash-attention backward kernels: dQ per query tile, dK/dV per key tile (FlashAttention-2).

Probabilities are recomputed from the forward's log-sum-exp; delta = rowsum(dO * O). dK/dV of
a K/V head sum over the G query heads that share it inside one program, so GQA gradients are
never materialised per query head.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from mimojax.kernels import tiling
from mimojax.kernels.flash_forward import FlashParams


def _probs_and_dscores(q_QxD, k_KxD, v_KxD, do_QxD, lse_Q, delta_Q, visible_QxK, scale):
    """One tile's recomputed probabilities and score gradients (both kernels need them)."""
    s_QxK = tiling.dot_nt(q_QxD, k_KxD) * scale
    probs_QxK = jnp.where(visible_QxK, jnp.exp(s_QxK - lse_Q[:, None]), 0.0)
    ds_QxK = probs_QxK * (tiling.dot_nt(do_QxD, v_KxD) - delta_Q[:, None])
    return probs_QxK, ds_QxK


def _dq_kernel(
    qpos_ref,
    qseg_ref,
    kvseg_ref,
    q_ref,
    k_ref,
    v_ref,
    do_ref,
    lse_ref,
    delta_ref,
    dq_ref,
    *,
    p: FlashParams,
):
    bk = p.block_k_bwd
    q_QxD, do_QxD = q_ref[...], do_ref[...]
    lse_Q, delta_Q = lse_ref[...], delta_ref[...]
    qpos_Q, qseg_Q = qpos_ref[...], qseg_ref[...]

    def body(j, dq_QxD):
        start = pl.multiple_of(j * bk, bk)
        k_KxD = k_ref[pl.ds(start, bk), :]
        v_KxD = v_ref[pl.ds(start, bk), :]
        visible_QxK = tiling.visible_tile(qpos_Q, qseg_Q, start, kvseg_ref[pl.ds(start, bk)])
        _, ds_QxK = _probs_and_dscores(
            q_QxD, k_KxD, v_KxD, do_QxD, lse_Q, delta_Q, visible_QxK, p.scale
        )
        return dq_QxD + tiling.dot_nn(ds_QxK.astype(k_KxD.dtype), k_KxD)

    num_kv_blocks = tiling.num_blocks_up_to(jnp.max(qpos_Q), bk, k_ref.shape[0] // bk)
    dq_QxD = lax.fori_loop(0, num_kv_blocks, body, jnp.zeros(q_QxD.shape, jnp.float32))
    dq_ref[...] = (dq_QxD * p.scale).astype(dq_ref.dtype)


def _dkdv_kernel(
    qpos_ref,
    qseg_ref,
    kvseg_ref,
    q_ref,
    k_ref,
    v_ref,
    do_ref,
    lse_ref,
    delta_ref,
    dk_ref,
    dv_ref,
    *,
    p: FlashParams,
):
    bq = p.block_q_bwd
    k_KxD, v_KxD = k_ref[...], v_ref[...]
    kvseg_K = kvseg_ref[...]
    bk = k_KxD.shape[0]
    kv_start = pl.program_id(0) * bk

    def group_grads(qs, visible_QxK, carry):
        dk_KxD, dv_KxD = carry
        # Static loop: the G query heads of this K/V head (G is small: 1..8 in practice).
        for g in range(p.groups):
            q_QxD = q_ref[pl.ds(qs, bq), g, :]
            do_QxD = do_ref[pl.ds(qs, bq), g, :]
            lse_Q = lse_ref[g, pl.ds(qs, bq)]
            delta_Q = delta_ref[g, pl.ds(qs, bq)]
            probs_QxK, ds_QxK = _probs_and_dscores(
                q_QxD, k_KxD, v_KxD, do_QxD, lse_Q, delta_Q, visible_QxK, p.scale
            )
            dv_KxD = dv_KxD + tiling.dot_tn(probs_QxK.astype(do_QxD.dtype), do_QxD)
            dk_KxD = dk_KxD + tiling.dot_tn(ds_QxK.astype(q_QxD.dtype), q_QxD)
        return dk_KxD, dv_KxD

    def body(i, carry):
        qs = pl.multiple_of(i * bq, bq)
        qpos_Q = qpos_ref[pl.ds(qs, bq)]
        visible_QxK = tiling.visible_tile(qpos_Q, qseg_ref[pl.ds(qs, bq)], kv_start, kvseg_K)
        # Query tiles that end before this key tile see none of it (the causal upper triangle).
        return lax.cond(
            jnp.max(qpos_Q) >= kv_start,
            functools.partial(group_grads, qs, visible_QxK),
            lambda c: c,
            carry,
        )

    # A key tile of padding only (every segment invalid) gets zero gradients without a loop.
    any_valid = jnp.max(kvseg_K) >= 0
    # Both branches int32 (not weak-typed Python ints): Triton's scf.for needs its bounds and
    # step of one type, and a weak-typed bound lowered to another width failed to verify.
    num_q_blocks = jnp.where(any_valid, jnp.int32(q_ref.shape[0] // bq), jnp.int32(0))
    zeros = jnp.zeros(k_KxD.shape, jnp.float32)
    dk_KxD, dv_KxD = lax.fori_loop(0, num_q_blocks, body, (zeros, zeros))
    dk_ref[...] = (dk_KxD * p.scale).astype(dk_ref.dtype)
    dv_ref[...] = dv_KxD.astype(dv_ref.dtype)


def flash_backward(p: FlashParams, residuals, do_BxTxHxD):
    """(dq, dk, dv) for padded inputs, from the forward's residuals."""
    q, k, v, qpos_BxT, qseg_BxT, kvseg_BxS, out_BxTxHxD, lse_BxHxT = residuals
    b, t, h, d = q.shape
    s, kv_heads = k.shape[1], k.shape[2]
    g, bq, bk = p.groups, p.block_q_bwd, p.block_k_bwd
    # Memory-bound and tiny next to the kernels: left to XLA to fuse.
    delta_BxHxT = jnp.einsum(
        "bthd,bthd->bht", out_BxTxHxD.astype(jnp.float32), do_BxTxHxD.astype(jnp.float32)
    )
    params = tiling.triton_params(p.interpret, p.num_warps, p.num_stages)

    dq = pl.pallas_call(
        functools.partial(_dq_kernel, p=p),
        grid=(t // bq, b, h),
        in_specs=[
            pl.BlockSpec((None, bq), lambda i, bi, hi: (bi, i)),
            pl.BlockSpec((None, bq), lambda i, bi, hi: (bi, i)),
            pl.BlockSpec((None, s), lambda i, bi, hi: (bi, 0)),
            pl.BlockSpec((None, bq, None, d), lambda i, bi, hi: (bi, i, hi, 0)),
            pl.BlockSpec((None, s, None, d), lambda i, bi, hi: (bi, 0, hi // g, 0)),
            pl.BlockSpec((None, s, None, d), lambda i, bi, hi: (bi, 0, hi // g, 0)),
            pl.BlockSpec((None, bq, None, d), lambda i, bi, hi: (bi, i, hi, 0)),
            pl.BlockSpec((None, None, bq), lambda i, bi, hi: (bi, hi, i)),
            pl.BlockSpec((None, None, bq), lambda i, bi, hi: (bi, hi, i)),
        ],
        out_specs=pl.BlockSpec((None, bq, None, d), lambda i, bi, hi: (bi, i, hi, 0)),
        out_shape=jax.ShapeDtypeStruct(q.shape, q.dtype),
        interpret=p.interpret,
        compiler_params=params,
        name="mimojax_flash_bwd_dq",
    )(qpos_BxT, qseg_BxT, kvseg_BxS, q, k, v, do_BxTxHxD, lse_BxHxT, delta_BxHxT)

    # One program per (key tile, row, K/V head); its q/dO/lse/delta blocks hold the G heads
    # hi*G .. hi*G+G-1 that share K/V head hi.
    dk, dv = pl.pallas_call(
        functools.partial(_dkdv_kernel, p=p),
        grid=(s // bk, b, kv_heads),
        in_specs=[
            pl.BlockSpec((None, t), lambda j, bi, hi: (bi, 0)),
            pl.BlockSpec((None, t), lambda j, bi, hi: (bi, 0)),
            pl.BlockSpec((None, bk), lambda j, bi, hi: (bi, j)),
            pl.BlockSpec((None, t, g, d), lambda j, bi, hi: (bi, 0, hi, 0)),
            pl.BlockSpec((None, bk, None, d), lambda j, bi, hi: (bi, j, hi, 0)),
            pl.BlockSpec((None, bk, None, d), lambda j, bi, hi: (bi, j, hi, 0)),
            pl.BlockSpec((None, t, g, d), lambda j, bi, hi: (bi, 0, hi, 0)),
            pl.BlockSpec((None, g, t), lambda j, bi, hi: (bi, hi, 0)),
            pl.BlockSpec((None, g, t), lambda j, bi, hi: (bi, hi, 0)),
        ],
        out_specs=[
            pl.BlockSpec((None, bk, None, d), lambda j, bi, hi: (bi, j, hi, 0)),
            pl.BlockSpec((None, bk, None, d), lambda j, bi, hi: (bi, j, hi, 0)),
        ],
        out_shape=[jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)],
        interpret=p.interpret,
        compiler_params=params,
        name="mimojax_flash_bwd_dkdv",
    )(qpos_BxT, qseg_BxT, kvseg_BxS, q, k, v, do_BxTxHxD, lse_BxHxT, delta_BxHxT)
    return dq, dk, dv
