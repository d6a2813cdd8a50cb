"""KL estimators (Schulman's k1/k2/k3), straight-through variants, KL loss/penalty, controllers.

Each estimator maps `(logp_BxT, ref_logp_BxT) -> kl_BxT`, per token, for samples drawn from
the current policy (http://joschu.net/blog/kl-approx.html). A `+` suffix (`k3+`) keeps the
named estimator's value but takes k2's gradient, which is the unbiased gradient of KL
(verl's `kl_penalty` with the straight-through suffix).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from mimojax.algos.aggregation import agg_loss
from mimojax.algos.checks import check_shapes
from mimojax.algos.ops import as_float, masked_mean
from mimojax.algos.registry import KL_ESTIMATORS


def _diff(logp_BxT, ref_logp_BxT):
    check_shapes(logp_BxT=logp_BxT, ref_logp_BxT=ref_logp_BxT)
    return jnp.asarray(logp_BxT) - jnp.asarray(ref_logp_BxT)


@KL_ESTIMATORS.register("k1", "kl")
def k1(logp_BxT, ref_logp_BxT):
    """log p - log p_ref."""
    return _diff(logp_BxT, ref_logp_BxT)


@KL_ESTIMATORS.register("abs")
def kl_abs(logp_BxT, ref_logp_BxT):
    """|log p - log p_ref|."""
    return jnp.abs(_diff(logp_BxT, ref_logp_BxT))


@KL_ESTIMATORS.register("k2", "mse", "k2+", "mse+")
def k2(logp_BxT, ref_logp_BxT):
    """0.5 (log p - log p_ref)^2."""
    return 0.5 * jnp.square(_diff(logp_BxT, ref_logp_BxT))


@KL_ESTIMATORS.register("k3", "low_var_kl")
def k3(logp_BxT, ref_logp_BxT):
    """exp(d) - d - 1, d = log p_ref - log p clamped to [-20, 20]; result clamped to [-10, 10]."""
    d = jnp.clip(-_diff(logp_BxT, ref_logp_BxT), -20.0, 20.0)
    return jnp.clip(jnp.exp(d) - d - 1.0, -10.0, 10.0)


def _straight_through(forward):
    def estimator(logp_BxT, ref_logp_BxT):
        value = forward(logp_BxT, ref_logp_BxT)
        grad_carrier = k2(logp_BxT, ref_logp_BxT)
        return grad_carrier + jax.lax.stop_gradient(value - grad_carrier)

    estimator.__name__ = f"{forward.__name__}_straight_through"
    estimator.__doc__ = f"Value of {forward.__name__}, gradient of k2."
    return estimator


KL_ESTIMATORS.register("k1+", "kl+")(_straight_through(k1))
KL_ESTIMATORS.register("abs+")(_straight_through(kl_abs))
KL_ESTIMATORS.register("k3+", "low_var_kl+")(_straight_through(k3))


def kl_loss(
    logp_BxT,
    ref_logp_BxT,
    mask_BxT,
    estimator: str = "low_var_kl",
    agg_mode: str = "token-mean",
    global_tokens=None,
    global_seqs=None,
    loss_scale_factor=None,
):
    """KL to the reference policy as a loss term; returns (loss, {'actor/kl_loss': loss})."""
    kl_BxT = KL_ESTIMATORS[estimator](logp_BxT, ref_logp_BxT)
    loss = agg_loss(kl_BxT, mask_BxT, agg_mode, global_tokens, global_seqs, loss_scale_factor)
    return loss, {"actor/kl_loss": jax.lax.stop_gradient(loss)}


def apply_kl_penalty(
    token_scores_BxT,
    logp_BxT,
    ref_logp_BxT,
    mask_BxT,
    kl_coef,
    estimator: str = "kl",
):
    """KL as a reward penalty: scores - coef * kl on valid tokens (verl's apply_kl_penalty).

    Returns (token_rewards_BxT, current_kl, metrics); feed `current_kl` (mean over sequences of
    the per-sequence token-mean KL) to the controller's update.
    """
    check_shapes(token_scores_BxT=token_scores_BxT, logp_BxT=logp_BxT, mask_BxT=mask_BxT)
    kl_BxT = KL_ESTIMATORS[estimator](logp_BxT, ref_logp_BxT)
    m = as_float(mask_BxT, kl_BxT)
    kl_BxT = jax.lax.stop_gradient(kl_BxT * m)
    rewards_BxT = token_scores_BxT - kl_coef * kl_BxT
    current_kl = jnp.mean(masked_mean(kl_BxT, m, axis=-1))
    metrics = {"actor/reward_kl_penalty": current_kl, "actor/reward_kl_penalty_coeff": kl_coef}
    return rewards_BxT, current_kl, metrics


def adaptive_kl_coef(coef, current_kl, n_steps, target_kl, horizon):
    """PPO adaptive controller (Ziegler et al. 2019): coef * (1 + clip(kl/target - 1, ±0.2) n/h)."""
    error = jnp.clip(current_kl / target_kl - 1.0, -0.2, 0.2)
    return coef * (1.0 + error * n_steps / horizon)


@dataclasses.dataclass(frozen=True)
class KLController:
    """Immutable KL coefficient controller; `update` returns a new controller.

    kind='fixed' keeps `coef`; kind='adaptive' moves it toward `target_kl` over `horizon` steps.
    """

    coef: float
    kind: str = "fixed"
    target_kl: float = 0.1
    horizon: float = 10000.0

    def __post_init__(self):
        if self.kind not in ("fixed", "adaptive"):
            raise ValueError(f"unknown KL controller kind {self.kind!r}; known: fixed, adaptive")
        if self.kind == "adaptive" and not self.horizon > 0:
            raise ValueError(f"adaptive KL controller needs horizon > 0, got {self.horizon}")

    def update(self, current_kl, n_steps) -> KLController:
        """New controller after observing `current_kl` over `n_steps` samples."""
        if self.kind == "fixed":
            return self
        new = adaptive_kl_coef(self.coef, current_kl, n_steps, self.target_kl, self.horizon)
        return dataclasses.replace(self, coef=new)
