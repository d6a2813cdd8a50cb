"""token_logprobs: equals log_softmax of full logits (values and gradients), chunked over time
so no float32 [B, T, V] array is ever built."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from tiny_configs import TINY_CONFIGS

from mimojax.models import Decoder, token_logprobs

B, T = 3, 13


def _inputs(vocab):
    ids = np.random.default_rng(0).integers(0, vocab, (B, T))
    mask = np.ones((B, T), np.int32)
    mask[1, 9:] = 0
    return jnp.asarray(ids), jnp.asarray(mask)


def _reference(model, ids, mask, temperature):
    logp_full = jax.nn.log_softmax(model(ids, attention_mask=mask) / temperature, -1)
    logp = jnp.take_along_axis(logp_full[:, :-1], ids[:, 1:, None], -1)[..., 0]
    entropy = -(jnp.exp(logp_full) * logp_full).sum(-1)[:, :-1]
    pad = jnp.zeros((B, 1))
    return jnp.concatenate([pad, logp], 1), jnp.concatenate([pad, entropy], 1)


@pytest.mark.parametrize("chunk,temperature", [(1, 1.0), (4, 0.7), (5, 1.0), (128, 1.0)])
def test_matches_full_log_softmax(chunk, temperature):
    model = Decoder(TINY_CONFIGS["qwen3"], rngs=nnx.Rngs(0))
    ids, mask = _inputs(model.config.vocab_size)
    logp, ent = token_logprobs(model, ids, mask, temperature=temperature, chunk=chunk)
    ref_logp, ref_ent = _reference(model, ids, mask, temperature)
    np.testing.assert_allclose(np.asarray(logp), np.asarray(ref_logp), atol=1e-5)
    np.testing.assert_allclose(np.asarray(ent), np.asarray(ref_ent), atol=1e-5)


def test_gradients_match_full_log_softmax():
    model = Decoder(TINY_CONFIGS["llama_tied"], rngs=nnx.Rngs(0))
    ids, mask = _inputs(model.config.vocab_size)
    graphdef, state = nnx.split(model)

    def loss(fn, state):
        logp, ent = fn(nnx.merge(graphdef, state))
        return (logp * mask).sum() + 0.1 * (ent * mask).sum()

    g_chunk = jax.jit(jax.grad(lambda s: loss(lambda m: token_logprobs(m, ids, mask, chunk=4), s)))(
        state
    )
    g_full = jax.jit(jax.grad(lambda s: loss(lambda m: _reference(m, ids, mask, 1.0), s)))(state)
    for (p, a), (_, b) in zip(nnx.to_flat_state(g_chunk), nnx.to_flat_state(g_full)):
        np.testing.assert_allclose(
            np.asarray(a[...]), np.asarray(b[...]), atol=2e-5, err_msg=str(p)
        )


def _all_shapes(jaxpr, out):
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            out.append((tuple(v.aval.shape), v.aval.dtype))
        for sub in jax.core.jaxprs_in_params(eqn.params):
            _all_shapes(sub, out)
    return out


def test_never_materialises_float32_BxTxV():
    model = Decoder(TINY_CONFIGS["qwen2"], rngs=nnx.Rngs(0))
    ids, mask = _inputs(model.config.vocab_size)
    graphdef, state = nnx.split(model)

    def f(state):
        logp, _ = token_logprobs(nnx.merge(graphdef, state), ids, mask, chunk=4)
        return (logp * mask).sum()

    jaxpr = jax.make_jaxpr(jax.value_and_grad(f))(state).jaxpr
    shapes = _all_shapes(jaxpr, [])
    v = model.config.vocab_size
    biggest = max(int(np.prod(s)) for s, d in shapes if v in s and len(s) >= 3)
    assert biggest <= B * 4 * v  # one [B, chunk, V] block at a time, forward and backward
    assert (B, T - 1, v) not in {s for s, _ in shapes}


def test_remat_policies_give_the_same_gradients():
    grads = {}
    for policy in ("none", "full", "dots"):
        model = Decoder(TINY_CONFIGS["qwen2"].replace(remat=policy), rngs=nnx.Rngs(0))
        ids, mask = _inputs(model.config.vocab_size)
        graphdef, state = nnx.split(model)

        def loss(s, graphdef=graphdef, ids=ids, mask=mask):
            logp, _ = token_logprobs(nnx.merge(graphdef, s), ids, mask, chunk=8)
            return (logp * mask).sum()

        grads[policy] = nnx.to_flat_state(jax.jit(jax.grad(loss))(state))
    for policy in ("full", "dots"):
        for (p, a), (_, b) in zip(grads["none"], grads[policy]):
            np.testing.assert_allclose(
                np.asarray(a[...]), np.asarray(b[...]), atol=1e-6, err_msg=f"{policy} {p}"
            )


def test_sum_pi_squared_matches_float64_numpy():
    """The optimal-token-baseline statistic sum_v p(v)^2, against a float64 NumPy softmax."""
    model = Decoder(TINY_CONFIGS["qwen3"], rngs=nnx.Rngs(0))
    ids, mask = _inputs(model.config.vocab_size)
    logp, _, sps = token_logprobs(model, ids, mask, temperature=0.7, chunk=4, sum_pi_squared=True)
    logits = np.asarray(model(ids, attention_mask=mask), np.float64)[:, :-1] / 0.7
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want = np.concatenate([np.zeros((B, 1)), (p**2).sum(-1)], 1)
    np.testing.assert_allclose(np.asarray(sps), want, atol=1e-6)
    assert np.all((want[:, 1:] > 0) & (want[:, 1:] <= 1))
    logp_only, _ = token_logprobs(model, ids, mask, temperature=0.7, chunk=4)
    np.testing.assert_array_equal(np.asarray(logp), np.asarray(logp_only))
