"""The LM head runs only at response positions (`prompt_len`): the actor's gradients and the
log-prob passes equal the full-sequence head's (prompt_len=1) on a float32 model, and the
log-probs equal a float64 numpy log-softmax of the same hidden states."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from mimojax.models.decoder import Decoder
from mimojax.models.logprobs import token_logprobs
from mimojax.rollout.batch import TrainBatch
from mimojax.train.step import ActorHParams, Counts, actor_grads, sequence_logprobs
from tests.models.tiny_configs import TINY_CONFIGS

B, P, R = 6, 12, 9


def _batch(vocab, seed=0):
    """Left-padded prompts in the first P columns, ragged responses after (build_batch's)."""
    rng = np.random.default_rng(seed)
    p_B = rng.integers(2, P + 1, B)
    r_B = rng.integers(1, R + 1, B)
    ids = rng.integers(3, vocab, (B, P + R)).astype(np.int32)
    attn = np.zeros((B, P + R), np.int32)
    for b in range(B):
        attn[b, P - p_B[b] : P + r_B[b]] = 1
    ids[attn == 0] = 0
    mask = attn.astype(np.float32)
    mask[:, :P] = 0
    mask[1, P + 1] = 0  # a tool token inside a response
    f32 = lambda scale: (rng.normal(size=(B, P + R)) * scale * mask).astype(np.float32)  # noqa: E731
    return TrainBatch(
        input_ids_BxT=ids,
        attention_mask_BxT=attn,
        response_mask_BxT=mask,
        rollout_logp_BxT=f32(0.1) - 4.0 * mask,
        adv_BxT=f32(1.0),
        old_logp_BxT=f32(0.1) - 4.0 * mask,
        ref_logp_BxT=f32(0.1) - 4.0 * mask,
        values_BxT=f32(1.0),
        returns_BxT=f32(1.0),
        prompt_len=P,
    )


def _model(name="llama_tied"):
    model = Decoder(TINY_CONFIGS[name], rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(model)
    return model, graphdef, nnx.to_pure_dict(state)


@pytest.mark.parametrize("name", ["llama_tied", "qwen3"])
@pytest.mark.parametrize("temperature,chunk", [(1.0, 4), (0.7, 1 << 30)])
def test_actor_gradients_equal_the_full_sequence_head(name, temperature, chunk):
    _, graphdef, params = _model(name)
    tb = _batch(TINY_CONFIGS[name].vocab_size)
    counts = Counts.of(tb.response_mask_BxT)
    hp = ActorHParams(
        temperature=temperature, logprob_chunk=chunk, entropy_coeff=0.01, use_kl_loss=True,
        kl_coef=0.1,
    )  # fmt: skip
    grads = jax.jit(actor_grads, static_argnames=("graphdef", "hp"))

    def run(prompt_len):
        micro = tb.replace(prompt_len=prompt_len).split_rows(B)
        return grads(params, micro, counts, graphdef=graphdef, hp=hp)

    loss_new, g_new, m_new = run(P)
    loss_old, g_old, m_old = run(1)  # yesterday's path: the head at every position
    np.testing.assert_allclose(float(loss_new), float(loss_old), rtol=1e-6)
    for k in m_old:
        np.testing.assert_allclose(float(m_new[k]), float(m_old[k]), rtol=1e-5, atol=1e-7)
    flat_new, flat_old = jax.tree.leaves(g_new), jax.tree.leaves(g_old)
    assert max(float(jnp.abs(g).max()) for g in flat_old) > 1e-3  # a real gradient
    for a, b in zip(flat_new, flat_old, strict=True):
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        # relative to the leaf's scale: near-zero coordinates carry only rounding noise
        assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max() + 1e-9


def test_sequence_logprobs_equal_the_full_sequence_head():
    _, graphdef, params = _model("qwen2")
    tb = _batch(TINY_CONFIGS["qwen2"].vocab_size, seed=1)
    kw = dict(graphdef=graphdef, temperature=1.0, top_k=0, top_p=1.0, chunk=4)
    fn = jax.jit(functools.partial(sequence_logprobs, **kw), static_argnames=("prompt_len",))
    ids, attn = tb.input_ids_BxT, tb.attention_mask_BxT
    new = np.asarray(fn(params, ids, attn, prompt_len=P))
    old = np.asarray(fn(params, ids, attn, prompt_len=1))
    assert np.all(new[:, :P] == 0.0)
    np.testing.assert_allclose(new[:, P:], old[:, P:], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_and_entropy_match_float64_numpy(temperature):
    model, _, _ = _model("qwen3")
    tb = _batch(TINY_CONFIGS["qwen3"].vocab_size, seed=2)
    ids, attn = jnp.asarray(tb.input_ids_BxT), jnp.asarray(tb.attention_mask_BxT)
    logp, ent = token_logprobs(model, ids, attn, temperature, chunk=4, start=P)
    assert logp.shape == ent.shape == ids.shape

    h = np.asarray(model.hidden_states(ids, attn), np.float64)
    w = np.asarray(model.lm_head_weight(), np.float64)
    z = h[:, P - 1 : -1] @ w / temperature
    z -= z.max(-1, keepdims=True)
    ref_logp_BxRxV = z - np.log(np.exp(z).sum(-1, keepdims=True))
    ids_np = np.asarray(ids)
    ref_logp = np.take_along_axis(ref_logp_BxRxV, ids_np[:, P:, None], -1)[..., 0]
    ref_ent = -(np.exp(ref_logp_BxRxV) * ref_logp_BxRxV).sum(-1)
    np.testing.assert_allclose(np.asarray(logp)[:, P:], ref_logp, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(ent)[:, P:], ref_ent, rtol=1e-5, atol=1e-5)
    assert np.all(np.asarray(logp)[:, :P] == 0.0) and np.all(np.asarray(ent)[:, :P] == 0.0)


def _shapes(jaxpr, out):
    for eqn in jaxpr.eqns:
        out += [tuple(v.aval.shape) for v in eqn.outvars]
        for sub in jax.core.jaxprs_in_params(eqn.params):
            _shapes(sub, out)
    return out


def test_the_head_never_sees_a_prompt_position():
    _, graphdef, params = _model("qwen3")
    v = TINY_CONFIGS["qwen3"].vocab_size
    tb = _batch(v)
    hp = ActorHParams(logprob_chunk=1 << 30, entropy_coeff=0.01)
    micro = tb.split_rows(B)
    jaxpr = jax.make_jaxpr(
        lambda p: actor_grads(p, micro, Counts.of(tb.response_mask_BxT), graphdef=graphdef, hp=hp)
    )(params).jaxpr
    rows = [int(np.prod(s[:-1])) for s in _shapes(jaxpr, []) if s and s[-1] == v]
    assert rows and max(rows) <= B * R  # [B, R, V] at most, never [B, P + R - 1, V]
