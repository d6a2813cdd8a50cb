"""Flash attention (interpret mode on CPU) against its dense reference: forward and dq/dk/dv."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mimojax.kernels import BlockSizes, default_block_sizes, flash_attention, reference_attention
from mimojax.kernels.tiling import pick_block
from mimojax.models.attention import AttentionMask, dense_mask, xla_attention

SMALL = BlockSizes(16, 16, 16, 16)


def _qkv(rng, b, t, s, h, k, d, dtype=jnp.float32):
    q = jnp.asarray(rng.standard_normal((b, t, h, d)), dtype)
    kk = jnp.asarray(rng.standard_normal((b, s, k, d)), dtype)
    v = jnp.asarray(rng.standard_normal((b, s, k, d)), dtype)
    return q, kk, v


def _out_and_grads(fn, q, k, v, do, mask_args):
    """(out, dq, dk, dv) of fn under one jit, cotangent `do`."""

    @jax.jit
    def run(q, k, v, do, mask_args):
        out, vjp = jax.vjp(lambda q, k, v: fn(q, k, v, *mask_args), q, k, v)
        return (out, *vjp(do))

    return [np.asarray(x, np.float32) for x in run(q, k, v, do, mask_args)]


def _case_padded_gqa(rng):
    # T = S = 40 is not a multiple of the 16-wide tiles. Row 0: no padding; row 1: left padding
    # (its first 3 queries see nothing) and right padding; row 2: all padding.
    b, t = 3, 40
    valid = np.arange(t)[None] < np.array([40, 23, 0])[:, None]
    valid[1, :3] = False
    positions = np.broadcast_to(np.arange(t), (b, t))
    qkv = _qkv(rng, b, t, t, h=4, k=2, d=16)
    return qkv, (jnp.asarray(positions), jnp.asarray(valid)), SMALL


def _case_packed_mqa(rng):
    # Three packed sequences plus 5 padding tokens, one K/V head for 4 query heads, D = 32.
    t = 40
    segments = np.array([0] * 15 + [1] * 12 + [2] * 13)[None]
    valid = np.arange(t)[None] < 35
    positions = np.arange(t)[None]
    qkv = _qkv(rng, 1, t, t, h=4, k=1, d=32)
    args = (
        jnp.asarray(positions),
        jnp.asarray(valid),
        jnp.asarray(segments),
        jnp.asarray(segments),
    )
    return qkv, args, SMALL


def _case_prefill_d64(rng):
    # A prefill of 8 tokens into a 40-slot cache at offsets 0, 20, 32; default tiles, D = 64.
    lengths = np.array([0, 20, 32])
    positions = lengths[:, None] + np.arange(8)[None]
    qkv = _qkv(rng, 3, 8, 40, h=4, k=2, d=64)
    return qkv, (jnp.asarray(positions),), None


CASES = {
    "padded_gqa": _case_padded_gqa,
    "packed_mqa": _case_packed_mqa,
    "prefill": _case_prefill_d64,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_grads_match_reference(name):
    rng = np.random.default_rng(0)
    (q, k, v), mask_args, blocks = CASES[name](rng)
    do = jnp.asarray(rng.standard_normal(q.shape), jnp.float32)
    kernel = lambda q, k, v, *m: flash_attention(q, k, v, *m, block_sizes=blocks)
    got = _out_and_grads(kernel, q, k, v, do, mask_args)
    want = _out_and_grads(reference_attention, q, k, v, do, mask_args)
    for label, g, w in zip(("out", "dq", "dk", "dv"), got, want):
        np.testing.assert_allclose(g, w, atol=2e-5, rtol=1e-5, err_msg=f"{name}: {label}")
    if name == "padded_gqa":
        # Queries that see no key: output 0 and no gradient, by definition.
        for blind in (got[0][1, :3], got[0][2], got[1][1, :3], got[1][2]):
            assert not blind.any()


def test_bfloat16_forward_and_grads():
    rng = np.random.default_rng(1)
    (q, k, v), mask_args, _ = _case_padded_gqa(rng)
    q, k, v = (x.astype(jnp.bfloat16) for x in (q, k, v))
    do = jnp.asarray(rng.standard_normal(q.shape), jnp.bfloat16)
    got = _out_and_grads(flash_attention, q, k, v, do, mask_args)
    want = _out_and_grads(reference_attention, q, k, v, do, mask_args)
    for label, g, w in zip(("out", "dq", "dk", "dv"), got, want):
        # bf16 rounding of P and dS before the matmuls, vs a float32 reference.
        np.testing.assert_allclose(g, w, atol=6e-2, rtol=5e-2, err_msg=label)


def test_reference_matches_xla_impl_where_a_key_is_visible():
    # The kernels' only departure from the xla impl: fully masked query rows (0, not uniform).
    rng = np.random.default_rng(2)
    (q, k, v), (positions, valid), _ = _case_padded_gqa(rng)
    mask = AttentionMask(positions, valid)
    sees_any_BxT = np.asarray(dense_mask(mask, k.shape[1]).any(-1))
    ref = np.asarray(reference_attention(q, k, v, positions, valid))
    xla = np.asarray(xla_attention(q, k, v, mask))
    np.testing.assert_allclose(ref[sees_any_BxT], xla[sees_any_BxT], atol=2e-6)
    assert not ref[~sees_any_BxT].any()
    # xla: uniform over all keys.
    np.testing.assert_allclose(xla[2, 0], np.repeat(np.asarray(v[2]).mean(0), 2, 0), atol=2e-6)


def test_block_sizes_follow_the_shape():
    assert pick_block(4096, 128) == 128
    assert pick_block(40, 64) == 64  # one padded tile
    assert pick_block(96, 64) == 32  # divides 96: no padding copy
    assert pick_block(200, 64) == 64  # no power of two >= 16 divides 200: pad to 256
    gpu = default_block_sizes(4096, 4096, 128, interpret=False)
    assert (gpu.block_q, gpu.block_k, gpu.num_warps) == (128, 64, 8)
    assert default_block_sizes(4096, 4096, 64, interpret=False).num_warps == 4
    assert default_block_sizes(40, 40, 16, interpret=True).block_q == 64
