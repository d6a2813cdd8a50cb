"""The jitted update of one role: pure `(state, batch) -> (state, metrics)`.

One call is one optimizer update over a mini-batch that arrives split into micro-batches
(`[M, micro_B, T]` arrays); gradients are summed over the micro-batches with `lax.scan`, so
memory is one micro-batch's activations and there is a single compile per shape. Losses are
normalised by the mini-batch's global token / sequence counts (`global_tokens`, `global_seqs` in
the batch), so the summed micro-batch gradients equal the full mini-batch gradient.

A non-finite loss or gradient skips the update: parameters and optimizer state stay as they were,
and `train/skipped_updates` says so.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from mimojax.algos import KL_ESTIMATORS, POLICY_LOSSES, rollout_correction, value_loss
from mimojax.algos.ops import masked_mean
from mimojax.models.logprobs import token_logprobs


class TrainState(NamedTuple):
    """One role's trainable state: pure-dict params, optax state, updates applied so far."""

    params: Any
    opt_state: Any
    step: jax.Array


def make_schedule(opt_cfg, total_updates: int):
    """The learning-rate schedule: linear warmup, then constant / cosine / linear decay."""
    lr, warm = float(opt_cfg.lr), int(opt_cfg.warmup_steps)
    floor = lr * float(opt_cfg.min_lr_ratio)
    decay_steps = max(int(total_updates) - warm, 1)
    if opt_cfg.schedule == "constant":
        after = optax.constant_schedule(lr)
    elif opt_cfg.schedule == "cosine":
        after = optax.cosine_decay_schedule(lr, decay_steps, alpha=floor / lr if lr else 0.0)
    else:
        after = optax.linear_schedule(lr, floor, decay_steps)
    if warm == 0:
        return after
    return optax.join_schedules([optax.linear_schedule(0.0, lr, warm), after], [warm])


def make_optimizer(opt_cfg, total_updates: int) -> optax.GradientTransformation:
    """AdamW (with global-norm clipping when optimizer.grad_clip > 0) from an optimizer config."""
    if opt_cfg.name != "adamw":
        raise ValueError(f"optimizer.name: '{opt_cfg.name}' is not supported (only 'adamw')")
    b1, b2 = opt_cfg.betas
    adam = optax.adamw(
        make_schedule(opt_cfg, total_updates),
        b1=b1,
        b2=b2,
        eps=opt_cfg.eps,
        weight_decay=opt_cfg.weight_decay,
    )
    if opt_cfg.grad_clip > 0:
        return optax.chain(optax.clip_by_global_norm(opt_cfg.grad_clip), adam)
    return adam


def init_state(params, optimizer: optax.GradientTransformation) -> TrainState:
    """A TrainState at update 0 for pure-dict `params`."""
    return TrainState(params, optimizer.init(params), jnp.zeros((), jnp.int32))


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


def policy_loss_options(loss_name: str, algo_cfg) -> tuple:
    """The config's clip settings that this policy loss accepts, as hashable pairs."""
    core = POLICY_LOSSES[loss_name].core
    accepted = {
        p.name for p in inspect.signature(core).parameters.values() if p.kind == p.KEYWORD_ONLY
    }
    given = {
        "clip_low": float(algo_cfg.clip_ratio_low),
        "clip_high": float(algo_cfg.clip_ratio_high),
        "clip_c": float(algo_cfg.clip_ratio_c),
    }
    return tuple(sorted((k, v) for k, v in given.items() if k in accepted))


def actor_hparams_from_config(cfg, *, on_policy: bool) -> ActorHParams:
    """The actor loss's static settings from a run config (`algorithm.*`, `rollout.*`)."""
    a, r, rc = cfg.algorithm, cfg.rollout, cfg.algorithm.rollout_correction
    return ActorHParams(
        policy_loss=a.policy_loss,
        loss_options=policy_loss_options(a.policy_loss, a),
        agg_mode=a.loss_agg_mode,
        temperature=float(r.temperature) or 1.0,
        top_k=max(int(r.top_k), 0),
        top_p=float(r.top_p),
        logprob_chunk=int(cfg.model.logprob_chunk_size) or 1 << 30,
        entropy_coeff=float(a.entropy_coeff),
        use_kl_loss=bool(a.use_kl_loss),
        kl_coef=float(a.kl_loss_coef),
        kl_type=a.kl_loss_type,
        on_policy=on_policy,
        rollout_is=rc.rollout_is,
        rollout_is_threshold=float(rc.rollout_is_threshold),
        rollout_is_batch_normalize=bool(rc.rollout_is_batch_normalize),
        rollout_rs=rc.rollout_rs,
        rollout_rs_threshold=rc.rollout_rs_threshold,
        bypass_mode=bool(rc.bypass_mode),
    )


def _grad_norm_and_finite(loss, grads):
    norm = optax.global_norm(grads)
    return norm, jnp.isfinite(loss) & jnp.isfinite(norm)


def _apply(state: TrainState, grads, finite, optimizer):
    updates, new_opt = optimizer.update(grads, state.opt_state, state.params)
    new_params = optax.apply_updates(state.params, updates)
    keep = lambda new, old: jnp.where(finite, new, old)
    return TrainState(
        jax.tree.map(keep, new_params, state.params),
        jax.tree.map(keep, new_opt, state.opt_state),
        state.step + finite.astype(jnp.int32),
    )


_SUMMED = frozenset({"actor/pg_loss", "actor/kl_loss", "critic/vf_loss"})


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


def _actor_loss(params, mb, *, graphdef, hp: ActorHParams, prompt_len, global_tokens, global_seqs):
    model = nnx.merge(graphdef, params)
    ids, attn = mb["input_ids_BxT"], mb["attention_mask_BxT"]
    mask = mb["response_mask_BxT"].astype(jnp.float32)
    logp, entropy = token_logprobs(
        model, ids, attn, hp.temperature, hp.logprob_chunk, hp.top_k, hp.top_p, prompt_len
    )
    sg = jax.lax.stop_gradient
    old = sg(logp) if hp.on_policy else mb["old_logp_BxT"]
    rollout_logp = mb["rollout_logp_BxT"]
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
        mb["adv_BxT"],
        mask_rs,
        hp.agg_mode,
        global_tokens,
        global_seqs,
        is_w,
        entropy_BxT=entropy,
        entropy_coeff=hp.entropy_coeff,
        ref_logp_BxT=mb["ref_logp_BxT"] if hp.use_kl_loss else None,
        kl_coef=hp.kl_coef,
        kl_estimator=hp.kl_type,
        **dict(hp.loss_options),
    )
    metrics = {**metrics, **rc_metrics}
    metrics["actor/entropy"] = sg(masked_mean(entropy, mask))
    return loss, metrics


def actor_update(
    state: TrainState, batch: dict, *, graphdef, hp: ActorHParams, optimizer, prompt_len: int = 1
):
    """One optimizer update of the policy on a mini-batch of `[M, micro_B, T]` arrays.

    `prompt_len` (static): columns before it hold only prompt tokens (no LM head there)."""
    micro = {k: v for k, v in batch.items() if k.endswith("_BxT") or k.endswith("_B")}
    loss_fn = functools.partial(
        _actor_loss,
        graphdef=graphdef,
        hp=hp,
        prompt_len=prompt_len,
        global_tokens=batch["global_tokens"],
        global_seqs=batch["global_seqs"],
    )
    loss, grads, metrics = _accumulate(loss_fn, state.params, micro)
    norm, finite = _grad_norm_and_finite(loss, grads)
    new_state = _apply(state, grads, finite, optimizer)
    metrics.update(
        {
            "actor/loss": loss,
            "actor/grad_norm": norm,
            "train/skipped_updates": 1.0 - finite.astype(jnp.float32),
        }
    )
    return new_state, metrics


def _critic_loss(params, mb, *, graphdef, clip_range_value, agg_mode, global_tokens, global_seqs):
    critic = nnx.merge(graphdef, params)
    vpreds = shifted_values(critic, mb["input_ids_BxT"], mb["attention_mask_BxT"])
    return value_loss(
        vpreds,
        mb["values_BxT"],
        mb["returns_BxT"],
        mb["response_mask_BxT"],
        clip_range_value,
        agg_mode,
        global_tokens,
        global_seqs,
    )


def critic_update(
    state: TrainState, batch: dict, *, graphdef, clip_range_value, agg_mode, optimizer
):
    """One optimizer update of the value model on a mini-batch of `[M, micro_B, T]` arrays."""
    micro = {k: v for k, v in batch.items() if k.endswith("_BxT") or k.endswith("_B")}
    loss_fn = functools.partial(
        _critic_loss,
        graphdef=graphdef,
        clip_range_value=clip_range_value,
        agg_mode=agg_mode,
        global_tokens=batch["global_tokens"],
        global_seqs=batch["global_seqs"],
    )
    loss, grads, metrics = _accumulate(loss_fn, state.params, micro)
    norm, finite = _grad_norm_and_finite(loss, grads)
    new_state = _apply(state, grads, finite, optimizer)
    metrics.update(
        {
            "critic/vf_loss": loss,
            "critic/grad_norm": norm,
            "train/critic_skipped_updates": 1.0 - finite.astype(jnp.float32),
        }
    )
    return new_state, metrics


def shifted_values(critic, input_ids_BxT, attention_mask_BxT):
    """V(s_t) aligned with token t: the critic's output at t-1, the state before token t."""
    v_BxT = critic(input_ids_BxT, attention_mask_BxT)
    return jnp.concatenate([jnp.zeros_like(v_BxT[:, :1]), v_BxT[:, :-1]], axis=1)


def sequence_logprobs(
    params, ids_BxT, attn_BxT, *, graphdef, temperature, top_k, top_p, chunk, prompt_len=1
):
    """Per-token logprobs of a batch under `params` (old-policy and reference passes)."""
    model = nnx.merge(graphdef, params)
    logp, _ = token_logprobs(model, ids_BxT, attn_BxT, temperature, chunk, top_k, top_p, prompt_len)
    return logp


def critic_values(params, ids_BxT, attn_BxT, *, graphdef):
    """Per-token values V(s_t) of a batch (the critic's forward pass before the update)."""
    return shifted_values(nnx.merge(graphdef, params), ids_BxT, attn_BxT)


def kl_estimate(name: str):
    """The registered KL estimator `name` (errors list the registered ones)."""
    return KL_ESTIMATORS[name]
