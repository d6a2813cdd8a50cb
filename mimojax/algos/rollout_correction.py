"""Rollout correction: truncated importance sampling and rejection between rollout and trainer.

The engine's logprobs (`rollout_logp_BxT`) differ from the trainer's (`logp_BxT`: precision,
kernels, staleness). The ratio w = pi_train / pi_rollout is applied per token or per sequence,
truncated (TIS) or zeroed outside bounds (IcePop); rejection drops tokens or whole sequences
whose divergence passes a threshold. Follows verl's rollout_corr_helper; metrics carry its
`rollout_corr/` names. Option strings are static (close over them under jit).
"""

from __future__ import annotations

import math
import numbers

import jax
import jax.numpy as jnp

from mimojax.algos.checks import check_shapes
from mimojax.algos.ops import as_float, masked_mean
from mimojax.algos.rollout_metrics import (
    SAFETY_BOUND,
    binary_kl,
    is_diagnostics,
    mismatch_metrics,
)

RS_OPTIONS = (
    "token_k1", "token_k2", "token_k3",
    "seq_sum_k1", "seq_sum_k2", "seq_sum_k3",
    "seq_mean_k1", "seq_mean_k2", "seq_mean_k3",
    "seq_max_k2", "seq_max_k3",
    "binary_kl",
)  # fmt: skip


def _valid_seq(mask):
    return (mask.sum(-1) > 0).astype(mask.dtype)


def _seq_mean(v_B, mask):
    has = _valid_seq(mask)
    return jnp.sum(v_B * has) / jnp.maximum(has.sum(), 1.0)


def is_weights(
    log_ratio_BxT, mask, level="token", threshold=2.0, threshold_lower=None, batch_normalize=False
):
    """Truncated (or IcePop-masked) IS weights, zero on masked tokens; returns (w, metrics)."""
    if level not in ("token", "sequence"):
        raise ValueError(f"unknown rollout IS level {level!r}; known: token, sequence")
    if level == "token":
        log_w = log_ratio_BxT
    else:
        log_w = jnp.broadcast_to(jnp.sum(log_ratio_BxT * mask, -1, keepdims=True), mask.shape)
    raw = jnp.exp(jnp.clip(log_w, -SAFETY_BOUND, SAFETY_BOUND)) * mask
    lower = 1.0 / threshold if threshold_lower is None else threshold_lower
    if threshold_lower is None:
        w = jnp.minimum(raw, threshold)
    else:
        w = jnp.where((raw >= threshold_lower) & (raw <= threshold), raw, 0.0)
    high, low = (log_w > math.log(threshold)), (log_w < math.log(lower))
    if level == "token":
        frac_high, frac_low = masked_mean(high, mask), masked_mean(low, mask)
    else:
        frac_high, frac_low = _seq_mean(high[:, 0], mask), _seq_mean(low[:, 0], mask)
    metrics = {
        "rollout_corr/rollout_is_mean": masked_mean(w, mask),
        "rollout_corr/rollout_is_max": jnp.max(jnp.where(mask > 0, w, -jnp.inf)),
        "rollout_corr/rollout_is_min": jnp.min(jnp.where(mask > 0, w, jnp.inf)),
        "rollout_corr/rollout_is_ratio_fraction_high": frac_high,
        "rollout_corr/rollout_is_ratio_fraction_low": frac_low,
        **is_diagnostics(w, raw, mask, threshold, threshold_lower),
    }
    if batch_normalize:
        if level == "token":
            mean = masked_mean(w, mask)
        else:
            mean = _seq_mean(masked_mean(w, mask, axis=-1), mask)
        w = jnp.where(mean > 1e-8, w / jnp.maximum(mean, 1e-8), w)
        metrics["rollout_corr/rollout_is_batch_norm_factor"] = mean
    return jax.lax.stop_gradient(w), metrics


def _parse_rs(rs, rs_threshold):
    options = [o.strip() for o in rs.split(",")] if isinstance(rs, str) else list(rs)
    for o in options:
        if o not in RS_OPTIONS:
            raise ValueError(f"unknown rejection option {o!r}; known: {', '.join(RS_OPTIONS)}")
    if rs_threshold is None:
        raise ValueError("rejection sampling needs rs_threshold")
    specs = list(rs_threshold) if isinstance(rs_threshold, list) else [rs_threshold]
    if len(specs) == 1:
        specs = specs * len(options)
    if len(specs) != len(options):
        raise ValueError(f"rs_threshold: give one value or one per option ({len(options)})")
    return list(zip(options, specs, strict=True))


def rejection_mask(log_ratio_BxT, mask, rs, rs_threshold, logp=None, rollout_logp=None):
    """Keep-mask (1 keep, 0 reject) from divergence criteria, all of which must pass.

    Token stats on lr = log(pi_train / pi_rollout): k1 = -lr, k2 = lr^2 / 2,
    k3 = exp(lr) - 1 - lr. `seq_{sum,mean,max}_*` reduce them per sequence and reject the
    whole sequence. k1 thresholds are ratio bounds (lower, upper) (a single number u means
    (1/u, u)), kept when log(lower) <= k1 <= log(upper); k2/k3 thresholds are upper bounds.
    `rs` is a comma-separated string or a sequence of options; `rs_threshold` is one spec
    shared by all options or a list with one spec per option.
    `binary_kl` (KPop, verl rollout_corr_helper) keeps a token when
    max(KL(Bern(p) || Bern(q)), KL(Bern(q) || Bern(p))) <= threshold, p = exp(logp),
    q = exp(rollout_logp) of the sampled token; it needs both logprob arrays.
    """
    lr = jnp.clip(log_ratio_BxT, -SAFETY_BOUND, SAFETY_BOUND)
    stats = {"k1": -lr, "k2": 0.5 * lr**2, "k3": jnp.exp(lr) - 1.0 - lr}
    keep = jnp.ones_like(mask)
    metrics = {}
    for option, spec in _parse_rs(rs, rs_threshold):
        level, kind = option.rsplit("_", 1)
        if option == "binary_kl":
            if logp is None or rollout_logp is None:
                raise ValueError("rejection option 'binary_kl' needs logp and rollout_logp")
            level, kind = "token", "binary_kl"
            stats[kind] = jnp.maximum(binary_kl(logp, rollout_logp), binary_kl(rollout_logp, logp))
        stat = stats[kind]
        if level == "seq_sum":
            stat = jnp.sum(stat * mask, -1, keepdims=True)
        elif level == "seq_mean":
            stat = masked_mean(stat, mask, axis=-1)[:, None]
        elif level == "seq_max":
            stat = jnp.max(jnp.where(mask > 0, stat, -jnp.inf), -1, keepdims=True)
        if kind == "k1":
            low, high = (1.0 / spec, spec) if isinstance(spec, numbers.Real) else spec
            ok = (stat >= math.log(low)) & (stat <= math.log(high))
        else:
            ok = stat <= spec
        ok = jnp.broadcast_to(ok, mask.shape).astype(mask.dtype)
        name = f"rollout_corr/rollout_rs_{option}"
        metrics[name + "_masked_fraction"] = masked_mean(1 - ok, mask)
        metrics[name + "_seq_masked_fraction"] = _seq_mean(jnp.any((1 - ok) * mask > 0, -1), mask)
        keep = keep * ok
    rejected = (1 - keep) * mask
    metrics["rollout_corr/rollout_rs_masked_fraction"] = masked_mean(1 - keep, mask)
    metrics["rollout_corr/rollout_rs_seq_masked_fraction"] = _seq_mean(
        (rejected.sum(-1) > 0).astype(mask.dtype), mask
    )
    return keep, metrics


def rollout_correction(
    logp_BxT,
    rollout_logp_BxT,
    mask_BxT,
    *,
    is_level=None,
    is_threshold=2.0,
    is_threshold_lower=None,
    is_batch_normalize=False,
    rs=None,
    rs_threshold=None,
):
    """IS weights (None when is_level is None), the mask after rejection, and metrics.

    `logp_BxT` are the trainer's logprobs of the sampled tokens (old logprobs, or the current
    ones in bypass mode); gradients do not flow through any output.
    """
    check_shapes(logp_BxT=logp_BxT, rollout_logp_BxT=rollout_logp_BxT, mask_BxT=mask_BxT)
    sg = jax.lax.stop_gradient
    logp = sg(jnp.asarray(logp_BxT))
    rollout_logp = sg(jnp.asarray(rollout_logp_BxT, logp.dtype))
    mask = as_float(mask_BxT, logp)
    log_ratio = logp - rollout_logp
    metrics = mismatch_metrics(logp, rollout_logp, mask)
    weights = None
    if is_level is not None:
        weights, m = is_weights(
            log_ratio, mask, is_level, is_threshold, is_threshold_lower, is_batch_normalize
        )
        metrics.update(m)
    new_mask = mask
    if rs:
        keep, m = rejection_mask(log_ratio, mask, rs, rs_threshold, logp, rollout_logp)
        metrics.update(m)
        new_mask = mask * keep
    return weights, new_mask, metrics


def bypass_mode_inputs(logp_BxT, rollout_logp_BxT, mask_BxT, loss_type="ppo_clip", **options):
    """Bypass mode: old logprobs = rollout logprobs (no extra trainer forward pass).

    Returns the policy-loss inputs `old_logp_BxT`, `mask_BxT` (after rejection) and
    `rollout_is_weights_BxT` (only for loss_type='reinforce'; PPO's ratio already is the IS
    ratio), plus metrics. `options` go to `rollout_correction`.
    """
    if loss_type not in ("ppo_clip", "reinforce"):
        raise ValueError(f"unknown bypass loss_type {loss_type!r}; known: ppo_clip, reinforce")
    weights, mask, metrics = rollout_correction(logp_BxT, rollout_logp_BxT, mask_BxT, **options)
    inputs = {
        "old_logp_BxT": jnp.asarray(rollout_logp_BxT),
        "mask_BxT": mask,
        "rollout_is_weights_BxT": weights if loss_type == "reinforce" else None,
    }
    return inputs, metrics
