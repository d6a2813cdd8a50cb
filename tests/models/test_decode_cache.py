"""Prefill + one-token decode steps over the KV cache reproduce the full causal forward."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from tiny_configs import TINY_CONFIGS

from mimojax.models import Decoder, init_cache
from mimojax.models.kv_cache import advance
from mimojax.models.sampling import generate_tokens


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


def test_generate_tokens_greedy_equals_argmax_loop():
    cfg = TINY_CONFIGS["qwen2"]
    model = Decoder(cfg, rngs=nnx.Rngs(2))
    prompts = [[3, 5, 7, 9], [11, 2]]
    out = generate_tokens(model, prompts, max_new_tokens=6)
    forward = nnx.jit(lambda m, ids, mask: m(ids, attention_mask=mask))
    for prompt, got in zip(prompts, out):
        seq = list(prompt)
        for _ in range(6):
            # Full forward without a cache on a fixed-size padded buffer (one compile).
            ids, mask = np.zeros((1, 16), np.int32), np.zeros((1, 16), np.int32)
            ids[0, : len(seq)], mask[0, : len(seq)] = seq, 1
            logits = np.asarray(forward(model, jnp.asarray(ids), jnp.asarray(mask)))
            seq.append(int(logits[0, len(seq) - 1].argmax()))
        assert got == seq[len(prompt) :]


def test_generate_tokens_stops_at_eos_and_is_seeded():
    cfg = TINY_CONFIGS["llama_tied"]
    model = Decoder(cfg, rngs=nnx.Rngs(3))
    greedy = generate_tokens(model, [[1, 2, 3]], max_new_tokens=8)[0]
    stopped = generate_tokens(model, [[1, 2, 3]], max_new_tokens=8, eos_token_ids=[greedy[2]])[0]
    assert stopped == greedy[: greedy.index(greedy[2]) + 1]
    a = generate_tokens(model, [[1, 2, 3]], 8, temperature=1.0, seed=5)
    b = generate_tokens(model, [[1, 2, 3]], 8, temperature=1.0, seed=5)
    c = generate_tokens(model, [[1, 2, 3]], 8, temperature=1.0, seed=6)
    assert a == b and a != c
