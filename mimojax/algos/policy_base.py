"""The common wrapper of every registered policy loss: checks, weights, aggregation, extras.

A core computes per-token losses `pg_losses_BxT` (and loss-specific metrics); the wrapper
validates shapes, stops gradients through old logprobs / advantages / IS weights, aggregates
with `agg_loss` (global counts for micro-batch invariance), and optionally adds the entropy
bonus and the KL-to-reference loss term.
"""

from __future__ import annotations

import difflib
import functools
import inspect

import jax
import jax.numpy as jnp

from mimojax.algos.aggregation import agg_loss
from mimojax.algos.checks import check_agg_mode, check_shapes
from mimojax.algos.ops import as_float, masked_mean
from mimojax.algos.registry import KL_ESTIMATORS, POLICY_LOSSES

LOG_RATIO_BOUND = 20.0  # verl clamps log(pi/pi_old) to [-20, 20] before exp


def clip_bounds(clip_ratio, clip_low, clip_high):
    """(low, high) from the symmetric `clip_ratio` unless each side is given."""
    low = clip_ratio if clip_low is None else clip_low
    high = clip_ratio if clip_high is None else clip_high
    if low is None or high is None:
        raise ValueError("set clip_ratio, or both clip_low and clip_high")
    return low, high


def clamped_log_ratio(logp_BxT, old_logp_BxT):
    """log(pi / pi_old) clamped to [-20, 20] for a stable exp."""
    return jnp.clip(logp_BxT - old_logp_BxT, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)


def weighted(pg_losses_BxT, is_weights_BxT):
    """Multiply by the rollout IS weights when present."""
    return pg_losses_BxT if is_weights_BxT is None else pg_losses_BxT * is_weights_BxT


def _check_options(core, options):
    accepted = [
        p.name for p in inspect.signature(core).parameters.values() if p.kind == p.KEYWORD_ONLY
    ]
    for key in options:
        if key not in accepted:
            near = difflib.get_close_matches(key, accepted, n=2, cutoff=0.5)
            hint = f" Did you mean {', '.join(near)}?" if near else ""
            raise ValueError(
                f"policy loss {core.__name__!r} has no option {key!r}.{hint} "
                f"Options: {', '.join(accepted) or '(none)'}"
            )


def register_policy_loss(name: str, *aliases: str):
    """Register `core(logp, old_logp, adv, mask, is_w, **options)` as a full policy loss.

    The core returns `(pg_losses_BxT, metrics)` or `(pg_losses_BxT, metrics, new_mask_BxT)`.
    """

    def decorator(core):
        @functools.wraps(core)
        def loss_fn(
            logp_BxT,
            old_logp_BxT,
            adv_BxT,
            mask_BxT,
            agg_mode: str = "token-mean",
            global_tokens=None,
            global_seqs=None,
            rollout_is_weights_BxT=None,
            *,
            loss_scale_factor=None,
            entropy_BxT=None,
            entropy_coeff=0.0,
            ref_logp_BxT=None,
            kl_coef=0.0,
            kl_estimator: str = "low_var_kl",
            **options,
        ):
            check_agg_mode(agg_mode)
            _check_options(core, options)
            check_shapes(
                logp_BxT=logp_BxT,
                old_logp_BxT=old_logp_BxT,
                adv_BxT=adv_BxT,
                mask_BxT=mask_BxT,
                rollout_is_weights_BxT=rollout_is_weights_BxT,
                entropy_BxT=entropy_BxT,
                ref_logp_BxT=ref_logp_BxT,
            )
            sg = jax.lax.stop_gradient
            logp = jnp.asarray(logp_BxT)
            old = sg(jnp.asarray(old_logp_BxT, logp.dtype))
            adv = sg(jnp.asarray(adv_BxT, logp.dtype))
            mask = as_float(mask_BxT, logp)
            is_w = None
            if rollout_is_weights_BxT is not None:
                is_w = sg(jnp.asarray(rollout_is_weights_BxT, logp.dtype))
            out = core(logp, old, adv, mask, is_w, **options)
            pg_losses, core_metrics = out[0], out[1]
            if len(out) == 3:
                mask = out[2]
            agg = functools.partial(
                agg_loss,
                mask_BxT=mask,
                mode=agg_mode,
                global_tokens=global_tokens,
                global_seqs=global_seqs,
                loss_scale_factor=loss_scale_factor,
            )
            pg_loss = agg(pg_losses)
            zero = jnp.zeros((), logp.dtype)
            metrics = {
                "actor/pg_loss": pg_loss,
                "actor/pg_clipfrac": zero,
                "actor/pg_clipfrac_lower": zero,
                "actor/ppo_kl": masked_mean(old - logp, mask),
                **core_metrics,
            }
            loss = pg_loss
            if entropy_BxT is not None:
                entropy = agg(jnp.asarray(entropy_BxT, logp.dtype))
                metrics["actor/entropy"] = entropy
                loss = loss - entropy_coeff * entropy
            if ref_logp_BxT is not None:
                kl = agg(KL_ESTIMATORS[kl_estimator](logp, ref_logp_BxT))
                metrics["actor/kl_loss"] = kl
                metrics["actor/kl_coef"] = kl_coef
                loss = loss + kl_coef * kl
            metrics = {k: sg(jnp.asarray(v, logp.dtype)) for k, v in metrics.items()}
            return loss, metrics

        loss_fn.core = core
        POLICY_LOSSES.register(name, *aliases)(loss_fn)
        return loss_fn

    return decorator
