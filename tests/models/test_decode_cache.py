"""Prefill + one-token decode steps over the KV cache reproduce the full causal forward."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from tiny_configs import TINY_CONFIGS

from mimojax.models import Decoder, init_cache
from mimojax.models.kv_cache import advance


@pytest.mark.parametrize("name", sorted(TINY_CONFIGS))
def test_prefill_then_decode_equals_full_forward(name):
    cfg = TINY_CONFIGS[name]
    model = Decoder(cfg, rngs=nnx.Rngs(1))
    rng = np.random.default_rng(0)
    lengths = np.array([5, 3, 7])
    full = rng.integers(0, cfg.vocab_size, (3, 12))  # each row: prompt, then 4 decoded tokens
    prompt_BxP = np.zeros((3, 8), np.int64)
    for b, n in enumerate(lengths):
        prompt_BxP[b, :n] = full[b, :n]
    step = nnx.jit(lambda m, ids, cache: m(ids, cache=cache))
    cache = init_cache(cfg, 3, 32)
    logits, cache = step(model, jnp.asarray(prompt_BxP), cache)
    cache = advance(cache, jnp.asarray(lengths))
    step_logits = [logits[np.arange(3), lengths - 1]]
    for k in range(4):
        tok = jnp.asarray(full[np.arange(3), lengths + k])
        logits, cache = step(model, tok[:, None], cache)
        cache = advance(cache, jnp.ones(3, jnp.int32))
        step_logits.append(logits[:, 0])
    # Reference: the plain causal forward over each full row (no cache), right-padded.
    ref_mask = (np.arange(12)[None] < (lengths + 4)[:, None]).astype(np.int32)
    ref_all = np.asarray(model(jnp.asarray(full), attention_mask=jnp.asarray(ref_mask)))
    for b, n in enumerate(lengths):
        ref = ref_all[b]
        for k in range(5):
            np.testing.assert_allclose(
                np.asarray(step_logits[k][b]),
                ref[n - 1 + k],
                atol=2e-5,
                err_msg=f"row {b} step {k}",
            )
