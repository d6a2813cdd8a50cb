"""The update scaffold: micro-batch gradients sum to the full mini-batch's, for the actor and
the critic, whether the mini-batch is one micro-batch, row micro-batches or token-budget ones."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from mimojax.algos.optimizer import init_state
from mimojax.models.decoder import Decoder, ValueModel
from mimojax.rollout.batch import TrainBatch
from mimojax.train.step import (
    ActorHParams,
    Counts,
    actor_grads,
    actor_update,
    critic_update,
    make_actor_update,
    make_critic_update,
)
from tests.models.tiny_configs import TINY_CONFIGS

B, P, R = 8, 16, 32
# The LM head and the value head accumulate in float32 even on a float64 model (models/logprobs.py,
# ValueModel), so gradients agree to ~1e-8, not 1e-15. AdamW's first step divides each gradient by
# its own magnitude, which turns that into a large relative error on near-zero coordinates; an eps
# of 1e-6 bounds the amplification (1e-8 leaves a few coordinates ~1.6e-6 apart).
ADAM_EPS = 1e-6


@pytest.fixture(scope="module", autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _batch(seed=0):
    """A mini-batch in build_batch's layout with ragged lengths; two rows carry no loss."""
    rng = np.random.default_rng(seed)
    p_B = rng.integers(2, P + 1, B)
    r_B = rng.integers(1, R + 1, B)
    r_B[0] = R
    ids = rng.integers(3, 128, (B, P + R)).astype(np.int32)
    attn = np.zeros((B, P + R), np.int32)
    for b in range(B):
        attn[b, P - p_B[b] : P + r_B[b]] = 1
    ids[attn == 0] = 0
    mask = attn.copy()
    mask[:, :P] = 0
    mask[[2, 5]] = 0  # filtered / failed samples: present, but no loss tokens
    mask[1, P + 1] = 0  # a tool token inside a response
    f64 = lambda scale: rng.normal(size=(B, P + R)) * scale * mask  # noqa: E731
    return TrainBatch(
        input_ids_BxT=ids,
        attention_mask_BxT=attn,
        response_mask_BxT=mask.astype(np.float64),
        rollout_logp_BxT=f64(0.1) - 4.0 * mask,
        adv_BxT=f64(1.0),
        old_logp_BxT=f64(0.1) - 4.0 * mask,
        ref_logp_BxT=f64(0.1) - 4.0 * mask,
        values_BxT=f64(1.0),
        returns_BxT=f64(1.0),
        prompt_len=P,
    )


def _splits(tb):
    """(name, stacks): one micro-batch, row micro-batches of 2, token-budget micro-batches,
    row micro-batches of 2 without the loss-free rows."""
    stacks = tb.split_tokens(96, multiple=8)
    assert len(stacks) > 1  # several shapes: the gradients of separate calls are summed
    # "compact": the trainer's split, rows without loss tokens (2 and 5) skipped
    compact = [tb.without_masked_rows(2).split_rows(2)]
    assert compact[0].input_ids_BxT.shape[0] == 3
    return [
        ("whole", [tb.split_rows(B)]),
        ("rows2", [tb.split_rows(2)]),
        ("tokens", stacks),
        ("compact", compact),
    ]


def _models():
    cfg = TINY_CONFIGS["llama_tied"].replace(dtype="float64", param_dtype="float64")
    model = Decoder(cfg, rngs=nnx.Rngs(0))
    return model, ValueModel.from_decoder(model, seed=1)


def _split(module):
    graphdef, state = nnx.split(module)
    return graphdef, nnx.to_pure_dict(state)


def _assert_trees_close(a, b, atol=1e-6):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=atol, rtol=1e-6)


def _run_all(update, params, opt, tb):
    """(grads, new params, metrics) of one update for each way of splitting `tb`."""
    counts = Counts.of(tb.response_mask_BxT)
    out = {}
    for name, stacks in _splits(tb):
        grads = None
        for s in stacks:
            _, g, _ = update.grads(params, s, counts)
            grads = g if grads is None else jax.tree.map(jnp.add, grads, g)
        state = init_state(jax.tree.map(jnp.copy, params), opt)
        new_state, metrics = update(state, stacks, counts)
        out[name] = (grads, new_state.params, metrics)
    return out


def _check_equal(out, loss_key):
    grads0, params0, m0 = out["whole"]
    assert float(optax.global_norm(grads0)) > 1e-3  # a real gradient, not all zeros
    for name in ("rows2", "tokens", "compact"):
        grads, params, m = out[name]
        _assert_trees_close(grads, grads0)
        _assert_trees_close(params, params0)
        np.testing.assert_allclose(float(m[loss_key]), float(m0[loss_key]), atol=1e-6)


@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-mean"])
def test_actor_micro_batches_sum_to_the_full_update(agg_mode):
    model, _ = _models()
    graphdef, params = _split(model)
    hp = ActorHParams(agg_mode=agg_mode, use_kl_loss=True, kl_coef=0.1, entropy_coeff=0.01)
    opt = optax.adamw(1e-3, eps=ADAM_EPS)
    update = make_actor_update(graphdef=graphdef, hp=hp, optimizer=opt)
    out = _run_all(update, params, opt, _batch())  # two token-budget shapes: two compiles
    _check_equal(out, "actor/loss")
    assert float(out["whole"][2]["train/skipped_updates"]) == 0.0


@pytest.mark.parametrize("agg_mode", ["token-mean", "seq-mean-token-mean"])
def test_critic_micro_batches_sum_to_the_full_update(agg_mode):
    _, critic = _models()
    graphdef, params = _split(critic)
    opt = optax.adamw(1e-3, eps=ADAM_EPS)
    update = make_critic_update(
        graphdef=graphdef, clip_range_value=0.5, agg_mode=agg_mode, optimizer=opt
    )
    out = _run_all(update, params, opt, _batch(3))  # two token-budget shapes: two compiles
    _check_equal(out, "critic/vf_loss")


def test_fused_update_is_grads_then_apply():
    """actor_update / critic_update (one jit) = the MiniBatchUpdate path, number for number."""
    model, critic = _models()
    tb = _batch(2).split_rows(4)
    counts = Counts.of(tb.response_mask_BxT)
    opt = optax.adamw(1e-3, eps=ADAM_EPS)
    graphdef, params = _split(model)
    hp = ActorHParams()
    new, m = jax.jit(actor_update, static_argnames=("graphdef", "hp", "optimizer"))(
        init_state(params, opt), tb, counts, graphdef=graphdef, hp=hp, optimizer=opt
    )
    loss, grads, _ = actor_grads(params, tb, counts, graphdef=graphdef, hp=hp)
    np.testing.assert_allclose(float(m["actor/loss"]), float(loss), rtol=1e-12)
    np.testing.assert_allclose(float(m["actor/grad_norm"]), float(optax.global_norm(grads)))
    assert int(new.step) == 1
    cdef, cparams = _split(critic)
    new_c, mc = critic_update(
        init_state(cparams, opt),
        tb,
        counts,
        graphdef=cdef,
        clip_range_value=0.5,
        agg_mode="token-mean",
        optimizer=opt,
    )
    assert int(new_c.step) == 1 and set(mc) >= {"critic/vf_loss", "critic/grad_norm"}


def test_non_finite_gradient_skips_the_update():
    model, _ = _models()
    graphdef, params = _split(model)
    opt = optax.adamw(1e-3, eps=ADAM_EPS)
    tb = _batch(3)
    tb = tb.replace(adv_BxT=np.where(tb.response_mask_BxT > 0, np.nan, 0.0))
    update = make_actor_update(graphdef=graphdef, hp=ActorHParams(), optimizer=opt)
    state = init_state(jax.tree.map(jnp.copy, params), opt)
    new, m = update(state, tb.split_tokens(96, multiple=8), Counts.of(tb.response_mask_BxT))
    assert float(m["train/skipped_updates"]) == 1.0 and int(new.step) == 0
    _assert_trees_close(new.params, params, atol=0)


def test_counts():
    mask = np.zeros((4, 6))
    mask[0, 2:4] = 1
    mask[3, 5] = 1
    c = Counts.of(mask)
    assert float(c.global_tokens) == 3.0 and float(c.global_seqs) == 2.0
    c0 = Counts.of(np.zeros((2, 3)))  # never a division by zero
    assert float(c0.global_tokens) == 1.0 and float(c0.global_seqs) == 1.0


def test_a_dynamic_entropy_coefficient_is_the_static_one_without_a_recompile():
    """Counts.entropy_coeff (an entropy target's weight) gives the loss and gradient of the same
    static ActorHParams.entropy_coeff, and one compiled update serves every value."""
    model, _ = _models()
    graphdef, params = _split(model)
    tb = _batch(4).split_rows(4)
    counts = Counts.of(tb.response_mask_BxT)
    grads_fn = jax.jit(functools.partial(actor_grads, graphdef=graphdef, hp=ActorHParams()))
    for coeff in (0.0, 0.05):
        static = ActorHParams(entropy_coeff=coeff)
        loss_s, grads_s, m_s = actor_grads(params, tb, counts, graphdef=graphdef, hp=static)
        dyn = counts._replace(entropy_coeff=jnp.asarray(coeff))
        loss_d, grads_d, _ = grads_fn(params, tb, dyn)
        np.testing.assert_allclose(float(loss_d), float(loss_s), rtol=1e-12)
        _assert_trees_close(grads_d, grads_s, atol=1e-12)
        # the bonus enters as -coeff * entropy: the loss moves by exactly that
        entropy = float(m_s["actor/entropy"])
        pg = float(m_s["actor/pg_loss"])
        np.testing.assert_allclose(float(loss_s) + coeff * entropy, pg, rtol=1e-5)
    assert grads_fn._cache_size() == 1
