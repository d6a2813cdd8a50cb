"""The critic's value head, and bfloat16 compute against the float32 forward."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from tiny_configs import TINY_CONFIGS

from mimojax.models import Decoder, ValueModel


def test_value_model_from_policy_shares_trunk_and_trains():
    cfg = TINY_CONFIGS["qwen2"]
    policy = Decoder(cfg, rngs=nnx.Rngs(0))
    critic = ValueModel.from_decoder(policy, seed=1)
    np.testing.assert_array_equal(
        np.asarray(critic.backbone.layers.q_proj[...]), np.asarray(policy.layers.q_proj[...])
    )
    ids = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 6)))
    mask = jnp.asarray([[1] * 6, [1] * 4 + [0] * 2])
    values = critic(ids, attention_mask=mask)
    assert values.shape == (2, 6) and values.dtype == jnp.float32
    hidden = policy.hidden_states(ids, mask)
    want = np.asarray(hidden) @ np.asarray(critic.value_head[...]) + float(critic.value_bias[...])
    np.testing.assert_allclose(np.asarray(values), want, atol=1e-5)
    graphdef, state = nnx.split(critic)
    grads = jax.grad(lambda s: (nnx.merge(graphdef, s)(ids, mask) * mask).sum())(state)
    assert float(jnp.abs(grads["value_head"][...]).sum()) > 0
    assert float(jnp.abs(grads["backbone"]["layers"]["down_proj"][...]).sum()) > 0


def test_bfloat16_compute_tracks_float32():
    cfg = TINY_CONFIGS["qwen3"]
    f32 = Decoder(cfg, rngs=nnx.Rngs(0))
    bf16 = Decoder(cfg.replace(dtype="bfloat16"), rngs=nnx.Rngs(0))
    assert bf16.layers.q_proj[...].dtype == jnp.float32  # params stay float32
    ids = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 9)))
    a, b = np.asarray(f32(ids)), np.asarray(bf16(ids))
    assert b.dtype == np.float32  # logits accumulate in float32
    assert np.abs(a - b).max() < 0.05 * np.abs(a).max()
    bf16_params = Decoder(cfg.replace(dtype="bfloat16", param_dtype="bfloat16"), rngs=nnx.Rngs(0))
    assert bf16_params.embed[...].dtype == jnp.bfloat16
    assert np.isfinite(np.asarray(bf16_params(ids))).all()
