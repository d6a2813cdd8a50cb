"""On a GPU: the Triton-compiled kernels against their references at training-like shapes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mimojax.kernels import (
    decode_attention,
    flash_attention,
    reference_attention,
    reference_decode_attention,
)

pytestmark = pytest.mark.gpu


def _rand(key, shape, dtype):
    return jax.random.normal(key, shape, jnp.float32).astype(dtype)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("dtype,atol", [(jnp.bfloat16, 6e-2), (jnp.float32, 2e-3)])
def test_flash_on_gpu_matches_reference(d, dtype, atol):
    b, t, h, k = 2, 1000, 8, 2  # 1000: the last tiles are padded
    keys = jax.random.split(jax.random.key(0), 4)
    q, do = _rand(keys[0], (b, t, h, d), dtype), _rand(keys[3], (b, t, h, d), dtype)
    kk, v = _rand(keys[1], (b, t, k, d), dtype), _rand(keys[2], (b, t, k, d), dtype)
    positions = jnp.broadcast_to(jnp.arange(t), (b, t))
    valid = jnp.arange(t)[None] < jnp.array([t, 700])[:, None]

    def fwd_bwd(fn):
        out, vjp = jax.vjp(lambda q, k, v: fn(q, k, v, positions, valid), q, kk, v)
        return [x.astype(jnp.float32) for x in (out, *vjp(do))]

    got = jax.jit(lambda: fwd_bwd(flash_attention))()
    want = jax.jit(lambda: fwd_bwd(reference_attention))()
    for label, g, w in zip(("out", "dq", "dk", "dv"), got, want):
        np.testing.assert_allclose(
            np.asarray(g), np.asarray(w), atol=atol, rtol=atol, err_msg=label
        )


def test_decode_on_gpu_matches_reference():
    b, s, h, k, d = 8, 4096, 32, 8, 128
    keys = jax.random.split(jax.random.key(1), 3)
    q = _rand(keys[0], (b, h, d), jnp.bfloat16)
    kk, v = _rand(keys[1], (b, s, k, d), jnp.bfloat16), _rand(keys[2], (b, s, k, d), jnp.bfloat16)
    lengths = jnp.array([0, 1, 100, 1024, 2047, 3000, 4095, 4096], jnp.int32)
    got = jax.jit(decode_attention)(q, kk, v, lengths).astype(jnp.float32)
    want = reference_decode_attention(q, kk, v, lengths).astype(jnp.float32)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-2, rtol=2e-2)
