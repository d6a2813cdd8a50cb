"""The jitted update of one role: pure `(state, batch) -> (state, metrics)`.

One update is one optimizer step over a mini-batch that arrives split into micro-batches: a stack
of same-shape `TrainBatch`es ([M, micro_B, T] leaves) whose gradients are summed with `lax.scan`,
so memory is one micro-batch's activations and there is one compile per shape. Token-budget
micro-batches come as several stacks (one per shape); their gradients are summed before the one
apply (`MiniBatchUpdate`). Losses are normalised by the mini-batch's global token / sequence
`Counts`, so the summed micro-batch gradients equal the full mini-batch gradient.

A non-finite loss or gradient skips the update: parameters and optimizer state stay as they were,
and `train/skipped_updates` says so.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from mimojax.algos import KL_ESTIMATORS, POLICY_LOSSES, rollout_correction, value_loss
from mimojax.algos.ops import masked_mean
from mimojax.algos.optimizer import TrainState
from mimojax.models.logprobs import token_logprobs
from mimojax.models.lora import lora_model
from mimojax.rollout.batch import TrainBatch


@dataclasses.dataclass(frozen=True)
class ActorHParams:
    """Everything static about the actor's loss (hashable: part of the jit cache key)."""

    policy_loss: str = "vanilla"
    loss_options: tuple = ()  # (name, value) pairs for the policy loss's own options
    agg_mode: str = "token-mean"
    temperature: float = 1.0  # logprobs are taken at the rollout's sampling temperature
    top_k: int = 0
    top_p: float = 1.0
    logprob_chunk: int = 128
    entropy_coeff: float = 0.0
    use_kl_loss: bool = False
    kl_coef: float = 0.0
    kl_type: str = "k3"
    # True: one update per rollout batch, so the old policy is the current one and the ratio's
    # denominator is the current logprob with its gradient stopped (verl's on-policy shortcut).
    on_policy: bool = False
    rollout_is: str | None = None
    rollout_is_threshold: float = 2.0
    rollout_is_batch_normalize: bool = False
    rollout_rs: str | None = None
    rollout_rs_threshold: float | None = None
    bypass_mode: bool = False


class Counts(NamedTuple):
    """A mini-batch's global loss counts, passed to every micro-batch so that micro-batch losses
    (and gradients) sum to the mini-batch's (DESIGN.md, "Pure algorithms"); and the scalars
    that change between updates without a recompile."""

    global_tokens: jax.Array  # loss tokens, at least 1
    global_seqs: jax.Array  # sequences with a loss token, at least 1
    # The entropy bonus weight of this update when an entropy target sets it
    # (algorithm.entropy_control); None: the static ActorHParams.entropy_coeff.
    entropy_coeff: jax.Array | None = None

    @classmethod
    def of(cls, mask_BxT) -> Counts:
        """The counts of a mini-batch's loss mask (numpy or jax, any leading shape)."""
        m = np.asarray(mask_BxT, np.float32)
        m = m.reshape(-1, m.shape[-1])
        return cls(
            jnp.asarray(max(m.sum(), 1.0), jnp.float32),
            jnp.asarray(max(float((m.sum(-1) > 0).sum()), 1.0), jnp.float32),
        )


def _grad_norm_and_finite(loss, grads):
    norm = optax.global_norm(grads)
    return norm, jnp.isfinite(loss) & jnp.isfinite(norm)


def _apply(state: TrainState, grads, finite, optimizer):
    def step(state):
        updates, new_opt = optimizer.update(grads, state.opt_state, state.params)
        return TrainState(optax.apply_updates(state.params, updates), new_opt, state.step + 1)

    # A cond, not jnp.where(finite, new, old): the select keeps old and new params and optimizer
    # state alive together, ~2 x params of XLA temporaries (1.05 vs 0.54 GB for SmolLM2-135M).
    return jax.lax.cond(finite, step, lambda s: s, state)


_SUMMED = frozenset({"actor/pg_loss", "actor/kl_loss", "critic/vf_loss"})
# The loss, grad-norm and skipped-update names each role reports.
_ROLE_NAMES = {
    "actor": ("actor/loss", "actor/grad_norm", "train/skipped_updates"),
    "critic": ("critic/vf_loss", "critic/grad_norm", "train/critic_skipped_updates"),
}


def _accumulate(loss_fn, params, micro_batches):
    """Summed loss, gradients and metrics over the leading micro-batch axis."""
    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def body(carry, mb):
        loss_sum, grad_sum = carry
        (loss, metrics), grads = grad_fn(params, mb)
        return (loss_sum + loss, jax.tree.map(jnp.add, grad_sum, grads)), metrics

    zeros = jax.tree.map(jnp.zeros_like, params)
    (loss, grads), metrics_M = jax.lax.scan(body, (jnp.zeros(()), zeros), micro_batches)
    # Loss terms are already divided by the mini-batch's global counts, so their micro-batch
    # values add up to the mini-batch value; ratios and fractions are averaged (as verl does).
    metrics = {k: v.sum() if k in _SUMMED else v.mean() for k, v in metrics_M.items()}
    return loss, grads, metrics


def apply_gradients(state: TrainState, loss, grads, *, optimizer, role: str):
    """The once-per-mini-batch apply: grad norm, non-finite skip, optimizer step."""
    norm, finite = _grad_norm_and_finite(loss, grads)
    new_state = _apply(state, grads, finite, optimizer)
    loss_key, norm_key, skip_key = _ROLE_NAMES[role]
    metrics = {loss_key: loss, norm_key: norm, skip_key: 1.0 - finite.astype(jnp.float32)}
    return new_state, metrics


def _policy(graphdef, params, frozen, ids_BxT=None):
    """The policy module: `params` alone, or (LoRA) adapters `params` over the `frozen` base
    weights; given the micro-batch's `ids_BxT` the adapters' dropout is on (training)."""
    if frozen is None:
        return nnx.merge(graphdef, params)
    return lora_model(graphdef, frozen, params, ids_BxT)


def _actor_loss(params, mb: TrainBatch, counts: Counts, frozen, *, graphdef, hp: ActorHParams):
    model = _policy(graphdef, params, frozen, mb.input_ids_BxT)
    mask = mb.response_mask_BxT.astype(jnp.float32)
    logp, entropy = token_logprobs(
        model,
        mb.input_ids_BxT,
        mb.attention_mask_BxT,
        hp.temperature,
        hp.logprob_chunk,
        hp.top_k,
        hp.top_p,
        mb.prompt_len,
    )
    sg = jax.lax.stop_gradient
    old = sg(logp) if hp.on_policy else mb.old_logp_BxT
    rollout_logp = mb.rollout_logp_BxT
    is_w, mask_rs, rc_metrics = rollout_correction(
        old if not hp.bypass_mode else sg(logp),
        rollout_logp,
        mask,
        is_level=hp.rollout_is,
        is_threshold=hp.rollout_is_threshold,
        is_batch_normalize=hp.rollout_is_batch_normalize,
        rs=hp.rollout_rs,
        rs_threshold=hp.rollout_rs_threshold,
    )
    if hp.bypass_mode:
        old = rollout_logp
    loss, metrics = POLICY_LOSSES[hp.policy_loss](
        logp,
        old,
        mb.adv_BxT,
        mask_rs,
        hp.agg_mode,
        counts.global_tokens,
        counts.global_seqs,
        is_w,
        entropy_BxT=entropy,
        entropy_coeff=hp.entropy_coeff if counts.entropy_coeff is None else counts.entropy_coeff,
        ref_logp_BxT=mb.ref_logp_BxT if hp.use_kl_loss else None,
        kl_coef=hp.kl_coef,
        kl_estimator=hp.kl_type,
        **dict(hp.loss_options),
    )
    metrics = {**metrics, **rc_metrics}
    metrics["actor/entropy"] = sg(masked_mean(entropy, mask))
    return loss, metrics


def actor_grads(
    params, micro_TB: TrainBatch, counts: Counts, frozen=None, *, graphdef, hp: ActorHParams
):
    """(loss, grads, metrics) of the policy loss summed over a stack of same-shape micro-batches
    ([M, micro_B, T] leaves); `micro_TB.prompt_len` columns hold only prompt (no LM head).
    With `frozen` (LoRA's base weights) `params` are the adapters: the only gradients."""
    loss_fn = functools.partial(_actor_loss, counts=counts, frozen=frozen, graphdef=graphdef, hp=hp)
    return _accumulate(loss_fn, params, micro_TB)


def actor_update(
    state: TrainState, micro_TB: TrainBatch, counts: Counts, *, graphdef, hp: ActorHParams,
    optimizer,
):  # fmt: skip
    """One optimizer update of the policy on a mini-batch that is one micro-batch stack."""
    loss, grads, metrics = actor_grads(state.params, micro_TB, counts, graphdef=graphdef, hp=hp)
    new_state, m = apply_gradients(state, loss, grads, optimizer=optimizer, role="actor")
    return new_state, {**metrics, **m}


def _critic_loss(params, mb: TrainBatch, counts: Counts, *, graphdef, clip_range_value, agg_mode):
    critic = nnx.merge(graphdef, params)
    vpreds = shifted_values(critic, mb.input_ids_BxT, mb.attention_mask_BxT)
    return value_loss(
        vpreds,
        mb.values_BxT,
        mb.returns_BxT,
        mb.response_mask_BxT,
        clip_range_value,
        agg_mode,
        counts.global_tokens,
        counts.global_seqs,
    )


def critic_grads(
    params, micro_TB: TrainBatch, counts: Counts, frozen=None, *, graphdef, clip_range_value,
    agg_mode,
):  # fmt: skip
    """(loss, grads, metrics) of the value loss summed over a stack of same-shape micro-batches
    (`frozen` is unused: the critic trains all its weights)."""
    loss_fn = functools.partial(
        _critic_loss,
        counts=counts,
        graphdef=graphdef,
        clip_range_value=clip_range_value,
        agg_mode=agg_mode,
    )
    return _accumulate(loss_fn, params, micro_TB)


def critic_update(
    state: TrainState, micro_TB: TrainBatch, counts: Counts, *, graphdef, clip_range_value,
    agg_mode, optimizer,
):  # fmt: skip
    """One optimizer update of the value model on a mini-batch that is one micro-batch stack."""
    loss, grads, metrics = critic_grads(
        state.params,
        micro_TB,
        counts,
        graphdef=graphdef,
        clip_range_value=clip_range_value,
        agg_mode=agg_mode,
    )
    new_state, m = apply_gradients(state, loss, grads, optimizer=optimizer, role="critic")
    return new_state, {**metrics, **m}


def _combine_metrics(per_stack: list[tuple[int, dict]]) -> dict:
    """Stack metrics as if all micro-batches had been one scan: sums add, the rest are averaged
    over micro-batches (each stack's value is already its mean over its M micro-batches)."""
    total = sum(m for m, _ in per_stack)
    out = {}
    for k in per_stack[0][1]:
        if k in _SUMMED:
            out[k] = sum(d[k] for _, d in per_stack)
        else:
            out[k] = sum(d[k] * (m / total) for m, d in per_stack)
    return out


class MiniBatchUpdate:
    """One role's update, jitted: `update(state, stacks, counts) -> (state, metrics)`.

    `stacks` is a list of micro-batch stacks (TrainBatch with [M, micro_B, T] leaves): one stack
    (row micro-batches) runs the fused grads + apply jit, with the state donated; several stacks
    (token-budget micro-batches, one per shape) run the grads jit once per stack (compiled once
    per shape), sum the gradients, then apply once. Same numbers either way, up to summation order.
    """

    def __init__(self, grads_fn, optimizer, role: str, state_shardings=None, frozen=None):
        self.role = role
        # Weights every update reads but never trains (LoRA's base): a jit argument, not a
        # closure, which would bake them into the compiled program as constants.
        self.frozen = frozen
        apply = functools.partial(apply_gradients, optimizer=optimizer, role=role)
        # With the state's shardings (a TrainState of Shardings), outputs are pinned to them and
        # metrics replicated: the state's layout never drifts between updates or after a restore.
        out = grads_out = {}
        if state_shardings is not None:
            mesh = jax.tree.leaves(state_shardings)[0].mesh
            rep = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
            out = {"out_shardings": (state_shardings, rep)}
            grads_out = {"out_shardings": (rep, state_shardings.params, rep)}

        def fused(state, micro_TB, counts, frozen):
            loss, grads, metrics = grads_fn(state.params, micro_TB, counts, frozen)
            new_state, m = apply(state, loss, grads)
            return new_state, {**metrics, **m}

        self.fused = jax.jit(fused, donate_argnums=(0,), **out)
        self.grads = jax.jit(grads_fn, **grads_out)
        self.apply = jax.jit(apply, donate_argnums=(0,), **out)
        self._add = jax.jit(lambda a, b: jax.tree.map(jnp.add, a, b), donate_argnums=(0,))

    def __call__(self, state: TrainState, stacks, counts: Counts):
        """One optimizer update over a mini-batch given as micro-batch stacks."""
        stacks = [stacks] if isinstance(stacks, TrainBatch) else list(stacks)
        if not stacks:
            raise ValueError("MiniBatchUpdate: a mini-batch needs at least one micro-batch")
        if len(stacks) == 1:
            return self.fused(state, stacks[0], counts, self.frozen)
        loss, grads, per_stack = None, None, []
        for s in stacks:
            l_s, g_s, m_s = self.grads(state.params, s, counts, self.frozen)
            per_stack.append((int(s.input_ids_BxT.shape[0]), m_s))
            loss, grads = (l_s, g_s) if grads is None else (loss + l_s, self._add(grads, g_s))
        new_state, m = self.apply(state, loss, grads)
        return new_state, {**_combine_metrics(per_stack), **m}


def make_actor_update(
    *, graphdef, hp: ActorHParams, optimizer, state_shardings=None, frozen=None
) -> MiniBatchUpdate:
    """The policy's jitted mini-batch update (outputs pinned to `state_shardings` if given;
    with `frozen` base weights, LoRA: the state's params are the adapters)."""
    grads_fn = functools.partial(actor_grads, graphdef=graphdef, hp=hp)
    return MiniBatchUpdate(grads_fn, optimizer, "actor", state_shardings, frozen)


def make_critic_update(
    *, graphdef, clip_range_value, agg_mode, optimizer, state_shardings=None
) -> MiniBatchUpdate:
    """The value model's jitted mini-batch update (outputs pinned to `state_shardings`)."""
    grads_fn = functools.partial(
        critic_grads, graphdef=graphdef, clip_range_value=clip_range_value, agg_mode=agg_mode
    )
    return MiniBatchUpdate(grads_fn, optimizer, "critic", state_shardings)


def shifted_values(critic, input_ids_BxT, attention_mask_BxT):
    """V(s_t) aligned with token t: the critic's output at t-1, the state before token t."""
    v_BxT = critic(input_ids_BxT, attention_mask_BxT)
    return jnp.concatenate([jnp.zeros_like(v_BxT[:, :1]), v_BxT[:, :-1]], axis=1)


def sequence_logprobs(
    params,
    ids_BxT,
    attn_BxT,
    *,
    graphdef,
    temperature,
    top_k,
    top_p,
    chunk,
    prompt_len=1,
    sum_pi_squared=False,
    frozen=None,
):
    """Per-token logprobs of a batch under `params` (old-policy and reference passes; with
    `frozen` base weights, LoRA adapters `params` over them, no dropout).

    With `sum_pi_squared` (static): (logp_BxT, sum_pi_squared_BxT), the second being
    sum_v p(v)^2 at each position (the optimal-token-baseline estimators' statistic)."""
    model = _policy(graphdef, params, frozen)
    outs = token_logprobs(
        model, ids_BxT, attn_BxT, temperature, chunk, top_k, top_p, prompt_len, sum_pi_squared
    )
    return (outs[0], outs[2]) if sum_pi_squared else outs[0]


def critic_values(params, ids_BxT, attn_BxT, *, graphdef):
    """Per-token values V(s_t) of a batch (the critic's forward pass before the update)."""
    return shifted_values(nnx.merge(graphdef, params), ids_BxT, attn_BxT)


def kl_estimate(name: str):
    """The registered KL estimator `name` (errors list the registered ones)."""
    return KL_ESTIMATORS[name]
