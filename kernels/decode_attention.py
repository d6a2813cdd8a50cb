"""Decode attention over a KV cache, flash-decoding style: one query token per row (slot).

The key axis is cut into splits; each program holds the G query heads of one K/V head and runs
an online softmax over its split, writing an unnormalised partial (acc, max, sum). A small XLA
combine rescales the partials to a common max and normalises. Splitting keeps the GPU busy when
batch * K/V heads is small and the context is long. Keys s < kv_lengths[b] are visible; a row
with length 0 gets output 0.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from mimojax.kernels import tiling

# Programs to aim for on a GPU: about two waves of an H100/H200's 132 SMs.
_TARGET_PROGRAMS = 256


def default_num_splits(rows: int, num_blocks: int, interpret: bool) -> int:
    """Key splits for `rows` = batch * K/V heads programs over `num_blocks` key tiles."""
    want = 1 if interpret else max(1, -(-_TARGET_PROGRAMS // rows))
    want = min(want, num_blocks)
    # Splits must tile the key axis evenly: the largest divisor of num_blocks <= want.
    return max(n for n in range(1, want + 1) if num_blocks % n == 0)


def _decode_kernel(len_ref, q_ref, k_ref, v_ref, acc_ref, m_ref, l_ref, *, scale, block_k):
    q_GxD = q_ref[...]
    split_len = k_ref.shape[0]
    split_start = pl.program_id(2) * split_len
    length = len_ref[...]

    def body(j, carry):
        acc_GxD, m_G, l_G = carry
        start = pl.multiple_of(j * block_k, block_k)
        k_KxD = k_ref[pl.ds(start, block_k), :]
        v_KxD = v_ref[pl.ds(start, block_k), :]
        index_K = split_start + start + jnp.arange(block_k, dtype=jnp.int32)
        visible_1xK = (index_K < length)[None, :]
        s_GxK = jnp.where(visible_1xK, tiling.dot_nt(q_GxD, k_KxD) * scale, tiling.MASK_VALUE)
        m_new_G = jnp.maximum(m_G, jnp.max(s_GxK, axis=1))
        probs_GxK = jnp.where(visible_1xK, jnp.exp(s_GxK - m_new_G[:, None]), 0.0)
        alpha_G = jnp.exp(m_G - m_new_G)
        acc_GxD = acc_GxD * alpha_G[:, None] + tiling.dot_nn(probs_GxK.astype(v_KxD.dtype), v_KxD)
        return acc_GxD, m_new_G, l_G * alpha_G + jnp.sum(probs_GxK, axis=1)

    # Only tiles below the row's length are read: a short row costs little in a long cache.
    num_blocks = tiling.num_blocks_up_to(length - split_start - 1, block_k, split_len // block_k)
    g, d = q_GxD.shape
    init = (
        jnp.zeros((g, d), jnp.float32),
        jnp.full((g,), tiling.MASK_VALUE, jnp.float32),
        jnp.zeros((g,), jnp.float32),
    )
    acc_GxD, m_G, l_G = lax.fori_loop(0, num_blocks, body, init)
    acc_ref[...] = acc_GxD
    m_ref[...] = m_G
    l_ref[...] = l_G


def decode_attention(
    q_BxHxD,
    k_BxSxKxD,
    v_BxSxKxD,
    kv_lengths_B,
    *,
    block_k: int | None = None,
    num_splits: int | None = None,
    interpret: bool | None = None,
):
    """Attention of one query per row over keys s < kv_lengths_B[b] of a [B, S, K, D] cache."""
    b, h, d = q_BxHxD.shape
    s, kv_heads = k_BxSxKxD.shape[1], k_BxSxKxD.shape[2]
    if h % kv_heads:
        raise ValueError(f"{h} query heads are not a multiple of {kv_heads} K/V heads")
    interpret = tiling.use_interpret(interpret)
    g = h // kv_heads
    bk = block_k or tiling.pick_block(s, 64 if interpret else 128)
    sp, dp = tiling.round_up(s, bk), tiling.padded_head_dim(d)
    splits = num_splits or default_num_splits(b * kv_heads, sp // bk, interpret)
    if (sp // bk) % splits:
        raise ValueError(f"num_splits={splits} does not divide {sp // bk} key tiles of {bk}")
    split_len = sp // splits

    # The G heads sharing a K/V head form the rows of one matmul; padded to a Triton tile.
    gp = max(tiling.MIN_TILE, pl.next_power_of_2(g))
    q_BxKxGxD = tiling.pad_to(tiling.pad_to(q_BxHxD.reshape(b, kv_heads, g, d), 2, gp), 3, dp)
    k = tiling.pad_to(tiling.pad_to(k_BxSxKxD, 1, sp), 3, dp)
    v = tiling.pad_to(tiling.pad_to(v_BxSxKxD, 1, sp), 3, dp)
    # Clipped so a length past the cache end cannot reach the padding.
    lengths_B = jnp.minimum(kv_lengths_B.astype(jnp.int32), s)

    acc, m, l = pl.pallas_call(
        functools.partial(_decode_kernel, scale=float(d) ** -0.5, block_k=bk),
        grid=(b, kv_heads, splits),
        in_specs=[
            pl.BlockSpec((None,), lambda bi, hi, si: (bi,)),
            pl.BlockSpec((None, None, gp, dp), lambda bi, hi, si: (bi, hi, 0, 0)),
            pl.BlockSpec((None, split_len, None, dp), lambda bi, hi, si: (bi, si, hi, 0)),
            pl.BlockSpec((None, split_len, None, dp), lambda bi, hi, si: (bi, si, hi, 0)),
        ],
        out_specs=[
            pl.BlockSpec((None, None, None, gp, dp), lambda bi, hi, si: (bi, hi, si, 0, 0)),
            pl.BlockSpec((None, None, None, gp), lambda bi, hi, si: (bi, hi, si, 0)),
            pl.BlockSpec((None, None, None, gp), lambda bi, hi, si: (bi, hi, si, 0)),
        ],
        out_shape=[
            jax.ShapeDtypeStruct((b, kv_heads, splits, gp, dp), jnp.float32),
            jax.ShapeDtypeStruct((b, kv_heads, splits, gp), jnp.float32),
            jax.ShapeDtypeStruct((b, kv_heads, splits, gp), jnp.float32),
        ],
        interpret=interpret,
        compiler_params=tiling.triton_params(interpret, num_warps=4, num_stages=2),
        name="mimojax_decode_attention",
    )(lengths_B, q_BxKxGxD, k, v)
    return combine_splits(acc, m, l)[:, :, :g, :d].reshape(b, h, d).astype(q_BxHxD.dtype)


def combine_splits(acc_BxKxNxGxD, m_BxKxNxG, l_BxKxNxG):
    """Merges per-split partial softmaxes into normalised outputs [B, K, G, D]."""
    m_max_BxKx1xG = jnp.max(m_BxKxNxG, axis=2, keepdims=True)
    # Splits that saw no key have l == 0 and contribute nothing whatever their weight.
    w_BxKxNxG = jnp.exp(m_BxKxNxG - m_max_BxKx1xG)
    l_BxKxG = jnp.sum(l_BxKxNxG * w_BxKxNxG, axis=2)
    acc_BxKxGxD = jnp.sum(acc_BxKxNxGxD * w_BxKxNxG[..., None], axis=2)
    return acc_BxKxGxD / jnp.where(l_BxKxG > 0.0, l_BxKxG, 1.0)[..., None]
