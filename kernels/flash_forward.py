"""Flash-attention forward kernel: one program per (query tile, batch row, query head).

Inputs are already padded (see flash_attention.py): T and S to tile multiples, D to a power of
two. Query t sees key s iff s <= q_positions[t] and kv_segments[s] == q_segments[t].
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from mimojax.kernels import tiling


@dataclasses.dataclass(frozen=True)
class FlashParams:
    """Static parameters of one call: softmax scale, GQA group size, tiles, Triton launch."""

    scale: float
    groups: int
    block_q: int
    block_k: int
    block_q_bwd: int
    block_k_bwd: int
    num_warps: int
    num_stages: int
    interpret: bool


def _forward_kernel(
    qpos_ref, qseg_ref, kvseg_ref, q_ref, k_ref, v_ref, o_ref, lse_ref, *, p: FlashParams
):
    bk = p.block_k
    q_QxD = q_ref[...]
    qpos_Q, qseg_Q = qpos_ref[...], qseg_ref[...]
    bq, d = q_QxD.shape

    def body(j, carry):
        acc_QxD, m_Q, l_Q = carry
        start = pl.multiple_of(j * bk, bk)
        k_KxD = k_ref[pl.ds(start, bk), :]
        v_KxD = v_ref[pl.ds(start, bk), :]
        visible_QxK = tiling.visible_tile(qpos_Q, qseg_Q, start, kvseg_ref[pl.ds(start, bk)])
        s_QxK = jnp.where(visible_QxK, tiling.dot_nt(q_QxD, k_KxD) * p.scale, tiling.MASK_VALUE)
        m_new_Q = jnp.maximum(m_Q, jnp.max(s_QxK, axis=1))
        # Zeroed explicitly: a row that has seen only masked keys must keep l == 0.
        probs_QxK = jnp.where(visible_QxK, jnp.exp(s_QxK - m_new_Q[:, None]), 0.0)
        alpha_Q = jnp.exp(m_Q - m_new_Q)
        acc_QxD = acc_QxD * alpha_Q[:, None] + tiling.dot_nn(probs_QxK.astype(v_KxD.dtype), v_KxD)
        return acc_QxD, m_new_Q, l_Q * alpha_Q + jnp.sum(probs_QxK, axis=1)

    # Keys past the tile's last query position are invisible, so the loop stops there (causal
    # skipping, and the unused tail of a KV cache is never read).
    num_kv_blocks = tiling.num_blocks_up_to(jnp.max(qpos_Q), bk, k_ref.shape[0] // bk)
    init = (
        jnp.zeros((bq, d), jnp.float32),
        jnp.full((bq,), tiling.MASK_VALUE, jnp.float32),
        jnp.zeros((bq,), jnp.float32),
    )
    acc_QxD, m_Q, l_Q = lax.fori_loop(0, num_kv_blocks, body, init)
    seen_Q = l_Q > 0.0
    l_safe_Q = jnp.where(seen_Q, l_Q, 1.0)
    o_ref[...] = (acc_QxD / l_safe_Q[:, None]).astype(o_ref.dtype)
    # +inf makes exp(s - lse) == 0 in the backward pass for queries that see no key.
    lse_ref[...] = jnp.where(seen_Q, m_Q + jnp.log(l_safe_Q), jnp.inf)


def flash_forward(q_BxTxHxD, k_BxSxKxD, v_BxSxKxD, qpos_BxT, qseg_BxT, kvseg_BxS, p: FlashParams):
    """(out_BxTxHxD, lse_BxHxT) for padded inputs; lse is +inf for queries that see no key."""
    b, t, h, d = q_BxTxHxD.shape
    s = k_BxSxKxD.shape[1]
    bq, g = p.block_q, p.groups
    # Query tiles vary fastest, so programs sharing one K/V head run together (L2 reuse).
    grid = (t // bq, b, h)
    return pl.pallas_call(
        functools.partial(_forward_kernel, p=p),
        grid=grid,
        in_specs=[
            pl.BlockSpec((None, bq), lambda i, bi, hi: (bi, i)),
            pl.BlockSpec((None, bq), lambda i, bi, hi: (bi, i)),
            pl.BlockSpec((None, s), lambda i, bi, hi: (bi, 0)),
            pl.BlockSpec((None, bq, None, d), lambda i, bi, hi: (bi, i, hi, 0)),
            # GQA: query head hi reads K/V head hi // g in place; nothing is repeated.
            pl.BlockSpec((None, s, None, d), lambda i, bi, hi: (bi, 0, hi // g, 0)),
            pl.BlockSpec((None, s, None, d), lambda i, bi, hi: (bi, 0, hi // g, 0)),
        ],
        out_specs=[
            pl.BlockSpec((None, bq, None, d), lambda i, bi, hi: (bi, i, hi, 0)),
            pl.BlockSpec((None, None, bq), lambda i, bi, hi: (bi, hi, i)),
        ],
        out_shape=[
            jax.ShapeDtypeStruct(q_BxTxHxD.shape, q_BxTxHxD.dtype),
            jax.ShapeDtypeStruct((b, h, t), jnp.float32),
        ],
        interpret=p.interpret,
        compiler_params=tiling.triton_params(p.interpret, p.num_warps, p.num_stages),
        name="mimojax_flash_fwd",
    )(qpos_BxT, qseg_BxT, kvseg_BxS, q_BxTxHxD, k_BxSxKxD, v_BxSxKxD)
