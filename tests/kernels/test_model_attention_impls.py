"""The model with attention_impl="pallas" (interpret mode on CPU) equals "xla": full forward
with padding, gradients, and the engine's prefill + decode steps over its KV caches; impl
names are checked."""

import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from mimojax.config.loader import ConfigError, load_config, validate
from mimojax.models import Decoder
from mimojax.models.attention import AttentionMask, attention

# The tiny model configs live beside the model tests, the cached-forward driver beside the
# engine tests.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from cached_forward import prefill_then_decode  # noqa: E402
from tiny_configs import TINY_CONFIGS  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _pair(name):
    cfg = TINY_CONFIGS[name]
    xla = Decoder(cfg, rngs=nnx.Rngs(0))
    pallas = Decoder(cfg.replace(attention_impl="pallas"), rngs=nnx.Rngs(0))
    return cfg, xla, pallas


@jax.jit
def _loss_and_grads(graphdef, params, ids_BxT, mask_BxT):
    def loss(params):
        logits_BxTxV = nnx.merge(graphdef, params)(ids_BxT, attention_mask=mask_BxT)
        logp_BxT = jnp.take_along_axis(
            jax.nn.log_softmax(logits_BxTxV[:, :-1]), ids_BxT[:, 1:, None], axis=-1
        )[..., 0]
        # A token counts when it and the position predicting it are both real.
        weight_BxT = mask_BxT[:, 1:] * mask_BxT[:, :-1]
        return -jnp.sum(logp_BxT * weight_BxT) / jnp.sum(weight_BxT), logits_BxTxV

    return jax.value_and_grad(loss, has_aux=True)(params)


def test_full_forward_logits_and_grads_match_xla():
    # llama_tied: 4 query heads over 2 K/V heads, head dim 8 (padded to a 16-wide tile).
    cfg, xla, pallas = _pair("llama_tied")
    rng = np.random.default_rng(0)
    ids = jnp.asarray(rng.integers(0, cfg.vocab_size, (3, 12)))
    # Full, right-padded, and left-padded rows.
    mask_BxT = (np.arange(12)[None] < np.array([12, 7, 12])[:, None]).astype(np.int32)
    mask_BxT[2, :5] = 0
    mask = jnp.asarray(mask_BxT)
    results = []
    for model in (xla, pallas):
        graphdef, params = nnx.split(model, nnx.Param)
        results.append(_loss_and_grads(graphdef, params, ids, mask))
    ((loss_x, logits_x), grads_x), ((loss_p, logits_p), grads_p) = results
    # Positions that see at least one real token agree; the leading pads of the left-padded
    # row see none (pallas: zeros, xla: uniform) and are out of every loss.
    sees_a_key_BxT = np.cumsum(mask_BxT, axis=1) > 0
    assert not sees_a_key_BxT.all()
    np.testing.assert_allclose(
        np.asarray(logits_p)[sees_a_key_BxT], np.asarray(logits_x)[sees_a_key_BxT], atol=2e-5
    )
    np.testing.assert_allclose(float(loss_p), float(loss_x), rtol=1e-6)
    flat_x = dict(nnx.to_flat_state(grads_x))
    for path, g in nnx.to_flat_state(grads_p):
        np.testing.assert_allclose(
            np.asarray(g[...]), np.asarray(flat_x[path][...]), atol=2e-6, err_msg=str(path)
        )


def test_prefill_then_decode_steps_match_xla():
    # qwen3: one K/V head (MQA), head dim 16. Right-padded prompts of 5, 3 and 7 tokens, through
    # the engine's cached forward (flash attention for the prefill, the decode kernel after).
    cfg, xla, pallas = _pair("qwen3")
    rng = np.random.default_rng(1)
    lengths = np.array([5, 3, 7])
    prompt_BxP = rng.integers(0, cfg.vocab_size, (3, 8)) * (np.arange(8)[None] < lengths[:, None])
    steps = rng.integers(0, cfg.vocab_size, (4, 3))
    want_prompt, want = prefill_then_decode(xla, prompt_BxP, lengths, steps)
    got_prompt, got = prefill_then_decode(pallas, prompt_BxP, lengths, steps)
    # Only real prompt positions count: padded ones are overwritten by the decode steps.
    real_BxP = np.arange(8)[None] < lengths[:, None]
    np.testing.assert_allclose(got_prompt[real_BxP], want_prompt[real_BxP], atol=2e-5)
    for k, (x, p) in enumerate(zip(want, got)):
        np.testing.assert_allclose(p, x, atol=2e-5, err_msg=f"step {k}")


def test_unknown_attention_impl_rejected_by_config_validation():
    cfg = load_config(str(CONFIGS / "grpo_tiny.py"), ["model.attention_impl=flash9"])
    with pytest.raises(ConfigError, match=r"model.attention_impl: unknown name 'flash9'.*pallas"):
        validate(cfg, num_devices=1)
    for impl in ("xla", "pallas", "cudnn"):
        validate(load_config(str(CONFIGS / "grpo_tiny.py"), [f"model.attention_impl={impl}"]), 1)


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="checks the off-GPU error")
def test_cudnn_off_gpu_names_the_config_key():
    q = jnp.zeros((1, 4, 2, 8), jnp.bfloat16)
    kv = jnp.zeros((1, 4, 1, 8), jnp.bfloat16)
    mask = AttentionMask(jnp.arange(4)[None])
    with pytest.raises(ValueError, match=r"model.attention_impl='cudnn'.*GPU"):
        attention(q, kv, kv, mask, impl="cudnn")


@pytest.mark.gpu
def test_cudnn_matches_xla_on_gpu():
    rng = np.random.default_rng(3)
    q = jnp.asarray(rng.standard_normal((2, 64, 8, 64)), jnp.bfloat16)
    k = jnp.asarray(rng.standard_normal((2, 64, 2, 64)), jnp.bfloat16)
    v = jnp.asarray(rng.standard_normal((2, 64, 2, 64)), jnp.bfloat16)
    valid = jnp.asarray(np.arange(64)[None] < np.array([64, 40])[:, None])
    mask = AttentionMask(jnp.broadcast_to(jnp.arange(64), (2, 64)), valid)
    got = attention(q, k, v, mask, impl="cudnn").astype(jnp.float32)
    want = attention(q, k, v, mask, impl="xla").astype(jnp.float32)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=3e-2)
