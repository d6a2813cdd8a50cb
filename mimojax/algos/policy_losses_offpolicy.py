"""Policy losses without a ratio clip: DPPO trust-region masks, REINFORCE, and bypass mode."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mimojax.algos.ops import masked_mean
from mimojax.algos.policy_base import clamped_log_ratio, clip_bounds, register_policy_loss, weighted
from mimojax.algos.policy_losses import ppo_clip_losses
from mimojax.algos.rollout_correction import rollout_correction


def _dppo(logp, old, adv, mask, is_w, keep_pos, keep_neg, clip_c):
    """-A * sg(min(r, c)) * log pi on tokens inside the trust region (sign(A) picks the side)."""
    log_ratio = clamped_log_ratio(logp, old)
    ratio = jnp.exp(log_ratio)
    truncated = jax.lax.stop_gradient(jnp.minimum(ratio, clip_c))
    keep = jax.lax.stop_gradient(jnp.where(adv > 0, keep_pos, keep_neg).astype(logp.dtype))
    pg = -adv * truncated * logp * keep
    metrics = {
        "actor/pg_clipfrac": masked_mean(1.0 - keep, mask),
        "actor/pg_clipfrac_lower": masked_mean((ratio > clip_c) * keep, mask),
        "actor/ppo_kl": masked_mean(-log_ratio, mask),
    }
    return weighted(pg, is_w), metrics


@register_policy_loss("dppo_tv")
def dppo_tv(
    logp, old, adv, mask, is_w, *, clip_ratio=0.15, clip_low=None, clip_high=None, clip_c=20.0
):
    """DPPO-Binary-TV: drop tokens whose probability moved past the TV bound in A's direction.

    Keep if p - p_old <= high (A > 0) or p - p_old >= -low (A <= 0); loss
    -A sg(min(r, c)) log p. Source: verl compute_policy_loss_dppo_tv, "Rethinking the Trust
    Region in LLM RL" (arXiv:2602.04879); default 0.15 from verl's DPPO example.
    """
    low, high = clip_bounds(clip_ratio, clip_low, clip_high)
    delta = jnp.exp(logp) - jnp.exp(old)
    return _dppo(logp, old, adv, mask, is_w, delta <= high, delta >= -low, clip_c)


@register_policy_loss("dppo_kl")
def dppo_kl(
    logp, old, adv, mask, is_w, *, clip_ratio=0.05, clip_low=None, clip_high=None, clip_c=20.0
):
    """DPPO-Binary-KL: as dppo_tv with the Bernoulli KL(p_old || p) of the sampled token.

    Keep if KL <= high or p <= p_old (A > 0); KL <= low or p >= p_old (A <= 0).
    Source: verl compute_policy_loss_dppo_kl (arXiv:2602.04879); default 0.05 from its example.
    """
    low, high = clip_bounds(clip_ratio, clip_low, clip_high)
    p, p_old = jnp.exp(logp), jnp.exp(old)
    binary_kl = p_old * (old - logp) + (1 - p_old) * jnp.log((1 - p_old + 1e-8) / (1 - p + 1e-8))
    keep_pos = (binary_kl <= high) | (p <= p_old)
    keep_neg = (binary_kl <= low) | (p >= p_old)
    return _dppo(logp, old, adv, mask, is_w, keep_pos, keep_neg, clip_c)


@register_policy_loss("reinforce", "gpg")
def reinforce(logp, old, adv, mask, is_w):
    """REINFORCE: -w * A * log pi with optional truncated IS weights w (no clip).

    Source: verl compute_policy_loss_reinforce / compute_policy_loss_gpg (GPG, arXiv:2504.02546).
    `actor/ppo_kl` is measured against old_logp (the rollout logprobs in bypass mode).
    """
    return weighted(-adv * logp, is_w), {}


@register_policy_loss("bypass_mode")
def bypass_mode(
    logp,
    old,
    adv,
    mask,
    is_w,
    *,
    loss_type="ppo_clip",
    rollout_is="token",
    rollout_is_threshold=2.0,
    rollout_rs=None,
    rollout_rs_threshold=None,
    clip_ratio=0.2,
    clip_low=None,
    clip_high=None,
    clip_c=3.0,
):
    """Bypass mode (old_logp are the rollout logprobs): rejection, then PPO clip or REINFORCE.

    IS weights pi/pi_rollout come from the current logprobs without gradient and are applied
    only for loss_type='reinforce'. Source: verl compute_policy_loss_bypass_mode.
    """
    weights, new_mask, metrics = rollout_correction(
        logp,
        old,
        mask,
        is_level=rollout_is,
        is_threshold=rollout_is_threshold,
        rs=rollout_rs,
        rs_threshold=rollout_rs_threshold,
    )
    if loss_type == "ppo_clip":
        low, high = clip_bounds(clip_ratio, clip_low, clip_high)
        pg, m = ppo_clip_losses(logp, old, adv, new_mask, low, high, clip_c)
    elif loss_type == "reinforce":
        pg, m = weighted(-adv * logp, weights), {}
    else:
        raise ValueError(f"unknown bypass loss_type {loss_type!r}; known: ppo_clip, reinforce")
    return weighted(pg, is_w), {**metrics, **m}, new_mask
