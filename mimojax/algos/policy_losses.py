"""Ratio-based policy losses: PPO clip (+ clip-higher, dual clip), GSPO, CISPO, SAPO, GMPO.

Every loss is registered in POLICY_LOSSES and called as
`loss, metrics = POLICY_LOSSES[name](logp_BxT, old_logp_BxT, adv_BxT, mask_BxT, agg_mode, ...)`
(see policy_base for the shared arguments). Definitions follow verl's core_algos.py.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from mimojax.algos.ops import masked_mean
from mimojax.algos.policy_base import clamped_log_ratio, clip_bounds, register_policy_loss, weighted


def ppo_clip_losses(logp, old, adv, mask, clip_low, clip_high, clip_c):
    """Per-token PPO clip loss with dual clip; returns (pg_losses, metrics)."""
    if clip_c is not None and clip_c <= 1.0:
        raise ValueError(f"dual-clip constant clip_c must be > 1, got {clip_c}")
    log_ratio = clamped_log_ratio(logp, old)
    ratio = jnp.exp(log_ratio)
    loss1 = -adv * ratio
    loss2 = -adv * jnp.clip(ratio, 1.0 - clip_low, 1.0 + clip_high)
    clipped = loss2 > loss1
    # max(loss1, loss2) written with `where` so a clipped token's gradient is exactly 0
    pg = jnp.where(clipped, loss2, loss1)
    dual = jnp.zeros_like(clipped)
    if clip_c is not None:
        loss3 = -adv * clip_c
        dual = (pg > loss3) & (adv < 0)
        pg = jnp.where(dual, loss3, pg)
    metrics = {
        "actor/pg_clipfrac": masked_mean(clipped.astype(logp.dtype), mask),
        "actor/pg_clipfrac_lower": masked_mean(dual.astype(logp.dtype), mask),
        "actor/ppo_kl": masked_mean(-log_ratio, mask),
    }
    return pg, metrics


@register_policy_loss("vanilla", "ppo")
def vanilla(
    logp, old, adv, mask, is_w, *, clip_ratio=0.2, clip_low=None, clip_high=None, clip_c=3.0
):
    """PPO clip: max(-A r, -A clip(r, 1-low, 1+high)); for A<0 capped at -A c (dual clip).

    clip_high > clip_low is DAPO's clip-higher; clip_c=None disables the dual clip.
    Source: verl compute_policy_loss_vanilla; dual clip arXiv:1912.09729.
    """
    low, high = clip_bounds(clip_ratio, clip_low, clip_high)
    pg, metrics = ppo_clip_losses(logp, old, adv, mask, low, high, clip_c)
    return weighted(pg, is_w), metrics


@register_policy_loss("gspo")
def gspo(logp, old, adv, mask, is_w, *, clip_ratio=None, clip_low=3e-4, clip_high=4e-4):
    """GSPO: PPO clip on the sequence ratio s = exp(mean_t log(pi/pi_old)) (arXiv:2507.18071).

    Token-level form of verl's compute_policy_loss_gspo: s_t = sg(s) * pi_t / sg(pi_t), so each
    token's gradient is s * grad log pi_t. verl always aggregates GSPO with
    `seq-mean-token-mean`; pass that agg_mode to match it (and the paper).
    Defaults are the paper's clip ranges (3e-4, 4e-4).
    """
    if clip_ratio is not None:
        clip_low = clip_high = clip_ratio
    log_ratio = logp - old
    len_B = jnp.maximum(mask.sum(-1), 1.0)
    seq_log_ratio_B = jnp.sum(log_ratio * mask, -1) / len_B
    sg = jax.lax.stop_gradient
    log_s = logp - sg(logp) + sg(seq_log_ratio_B)[:, None]
    s = jnp.exp(jnp.minimum(log_s, 10.0))
    loss1 = -adv * s
    loss2 = -adv * jnp.clip(s, 1.0 - clip_low, 1.0 + clip_high)
    clipped = loss2 > loss1
    pg = jnp.where(clipped, loss2, loss1)
    metrics = {
        "actor/pg_clipfrac": masked_mean(clipped.astype(logp.dtype), mask),
        "actor/ppo_kl": masked_mean(-log_ratio, mask),
    }
    return weighted(pg, is_w), metrics


@register_policy_loss("cispo")
def cispo(logp, old, adv, mask, is_w, *, clip_ratio=0.2, clip_low=None, clip_high=None):
    """CISPO: -sg(clip(r, 1-low, 1+high)) * A * log pi; every token keeps a gradient.

    Source: verl compute_policy_loss_cispo; MiniMax-M1, arXiv:2506.13585.
    """
    low, high = clip_bounds(clip_ratio, clip_low, clip_high)
    log_ratio = clamped_log_ratio(logp, old)
    ratio = jnp.exp(log_ratio)
    clipped_ratio = jnp.clip(ratio, 1.0 - low, 1.0 + high)
    pg = -jax.lax.stop_gradient(clipped_ratio) * adv * logp
    metrics = {
        "actor/pg_clipfrac": masked_mean((ratio != clipped_ratio).astype(logp.dtype), mask),
        "actor/ppo_kl": masked_mean(-log_ratio, mask),
    }
    return weighted(pg, is_w), metrics


@register_policy_loss("sapo")
def sapo(logp, old, adv, mask, is_w, *, tau_pos=1.0, tau_neg=1.05):
    """SAPO: soft gate -A * (4/tau) * sigmoid(tau (r - 1)), tau = tau_pos if A > 0 else tau_neg.

    Source: verl compute_policy_loss_sapo; arXiv:2511.20347. verl aggregates SAPO with
    `seq-mean-token-mean`.
    """
    log_ratio = clamped_log_ratio(logp, old)
    ratio = jnp.exp(log_ratio)
    tau = jnp.where(adv > 0, tau_pos, tau_neg).astype(logp.dtype)
    gate = jax.nn.sigmoid(tau * (ratio - 1.0)) * (4.0 / tau)
    pg = -gate * adv
    return weighted(pg, is_w), {"actor/ppo_kl": masked_mean(-log_ratio, mask)}


@register_policy_loss("gmpo", "geo_mean")
def gmpo(logp, old, adv, mask, is_w, *, clip_ratio=0.4, clip_low=None, clip_high=None):
    """GMPO: -A_seq * geometric mean over tokens of the token-clipped ratio (arXiv:2507.20673).

    log r_t is clipped to [-low, high] in the direction that matters for sign(A) (verl
    compute_policy_loss_geo_mean); the per-sequence loss is spread over the sequence's tokens,
    so agg_mode `seq-mean-token-mean` gives verl's mean over sequences. IS weights enter as
    their per-sequence geometric mean. Default clip 0.4 is the paper's (e^-0.4, e^0.4).
    """
    low, high = clip_bounds(clip_ratio, clip_low, clip_high)
    log_ratio = logp - old
    sign = jnp.sign(adv)
    log_ratio_clamped = jnp.clip(log_ratio, -low, high)
    log_ratio_min = sign * jnp.minimum(sign * log_ratio, sign * log_ratio_clamped)
    len_B = mask.sum(-1) + 1e-8
    ratio_B = jnp.exp(jnp.sum(log_ratio_min * mask, -1) / len_B)
    adv_B = jnp.sum(adv * mask, -1) / len_B
    pg_B = -adv_B * ratio_B
    if is_w is not None:
        pg_B = pg_B * jnp.exp(jnp.sum(jnp.log(is_w + 1e-10) * mask, -1) / len_B)
    clipped = (log_ratio != log_ratio_clamped).astype(logp.dtype)
    metrics = {
        "actor/pg_clipfrac": masked_mean(clipped * (adv > 0), mask),
        "actor/pg_clipfrac_lower": masked_mean(clipped * (adv < 0), mask),
        "actor/ppo_kl": masked_mean(-log_ratio, mask),
    }
    return jnp.broadcast_to(pg_B[:, None], logp.shape), metrics


@register_policy_loss("up")
def up(logp, old, adv, mask, is_w, *, clip_ratio=0.2, clip_low=None, clip_high=None, clip_c=3.0):
    """UP-GRPO: unclipped self-anchored REINFORCE for A > 0, PPO clip + dual clip for A <= 0.

    A > 0 tokens: -A * pi / sg(pi) (value -A, gradient -A grad log pi, no pi_old, no clip).
    `actor/pg_clipfrac` counts clipped tokens among the A <= 0 ones. Source: verl
    compute_policy_loss_up (UP-GRPO, arXiv:2607.06987, Eq. 15).
    """
    low, high = clip_bounds(clip_ratio, clip_low, clip_high)
    pg_neg, metrics = ppo_clip_losses(logp, old, adv, mask, low, high, clip_c)
    ratio = jnp.exp(clamped_log_ratio(logp, old))
    clipped = -adv * jnp.clip(ratio, 1.0 - low, 1.0 + high) > -adv * ratio
    metrics["actor/pg_clipfrac"] = masked_mean(clipped.astype(logp.dtype), mask * (adv <= 0))
    self_ratio = jnp.exp(logp - jax.lax.stop_gradient(logp))
    return weighted(jnp.where(adv > 0, -adv * self_ratio, pg_neg), is_w), metrics
