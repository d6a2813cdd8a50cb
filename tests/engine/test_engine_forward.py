"""The engine's cached forward (batched prefill + one-token decode steps over per-layer caches)
reproduces the model's full causal forward."""

import jax.numpy as jnp
import numpy as np
import pytest
from cached_forward import prefill_then_decode
from flax import nnx
from tiny_configs import TINY_CONFIGS

from mimojax.models import Decoder


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
    steps = [full[np.arange(3), lengths + k] for k in range(4)]
    _, step_logits = prefill_then_decode(model, prompt_BxP, lengths, steps)
    # Reference: the plain causal forward over each full row (no cache), right-padded.
    ref_mask = (np.arange(12)[None] < (lengths + 4)[:, None]).astype(np.int32)
    ref_all = np.asarray(model(jnp.asarray(full), attention_mask=jnp.asarray(ref_mask)))
    for b, n in enumerate(lengths):
        for k in range(5):
            np.testing.assert_allclose(
                step_logits[k][b], ref_all[b, n - 1 + k], atol=2e-5, err_msg=f"row {b} step {k}"
            )
