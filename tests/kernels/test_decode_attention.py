"""Flash-decoding (interpret mode on CPU) against its dense reference, ragged lengths, GQA."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mimojax.kernels import decode_attention, reference_decode_attention
from mimojax.kernels.decode_attention import default_num_splits


@pytest.mark.parametrize(
    "dtype,splits,atol", [(jnp.float32, 3, 2e-6), (jnp.bfloat16, None, 2e-2)], ids=["f32", "bf16"]
)
def test_decode_matches_reference(dtype, splits, atol):
    rng = np.random.default_rng(0)
    b, s, h, k, d = 5, 40, 8, 2, 16
    q = jnp.asarray(rng.standard_normal((b, h, d)), dtype)
    kk = jnp.asarray(rng.standard_normal((b, s, k, d)), dtype)
    v = jnp.asarray(rng.standard_normal((b, s, k, d)), dtype)
    # Empty row, one key, a length inside the second tile, a full cache, one past a tile edge.
    lengths = jnp.asarray([0, 1, 21, 40, 17], jnp.int32)
    # block_k=16: S = 40 is not a multiple; 3 splits of one tile each exercise the combine.
    run = jax.jit(lambda *a: decode_attention(*a, block_k=16, num_splits=splits))
    got = np.asarray(run(q, kk, v, lengths), np.float32)
    want = np.asarray(reference_decode_attention(q, kk, v, lengths), np.float32)
    np.testing.assert_allclose(got, want, atol=atol, rtol=atol)
    assert not got[0].any()  # a row that sees no key gives 0


def test_num_splits_fill_the_gpu_and_tile_evenly():
    assert default_num_splits(rows=1 * 8, num_blocks=128, interpret=False) == 32
    assert default_num_splits(rows=64 * 8, num_blocks=128, interpret=False) == 1
    assert default_num_splits(rows=4, num_blocks=6, interpret=False) == 6
    assert default_num_splits(rows=4, num_blocks=7, interpret=False) == 7
    assert default_num_splits(rows=2, num_blocks=6, interpret=True) == 1
