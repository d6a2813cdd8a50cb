"""The learning half of one RL step: the advantage stage over a scored batch, then PPO epochs x
mini-batches of the roles' jitted updates (`mimojax.train.step`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from mimojax.algos import AdvantageInputs, advantage_stage
from mimojax.rewards.pool import dims_BxK
from mimojax.rollout.batch import TrainBatch
from mimojax.train.step import Counts

# Settings are static: one compile per estimator setup and batch shape.
_advantage_stage = jax.jit(advantage_stage, static_argnums=0)


def advantage_batch(spec, traits, rb, passes: dict, results, kl_coef: float):
    """(TrainBatch, metrics, current_kl): advantages and the loss mask of a scored rollout batch;
    `current_kl` is the batch KL that KL-in-reward's controller follows (None without it)."""
    out = _advantage_stage(spec.advantage, AdvantageInputs(
        token_rewards_BxT=rb.token_rewards_BxT, response_mask_BxT=rb.response_mask_BxT,
        scores_B=rb.scores_B, group_ids_B=rb.group_ids_B, valid_B=rb.valid_B,
        truncated_B=rb.truncated_B if spec.advantage.truncated != "keep" else None,
        kl_coef=np.float32(kl_coef), **passes,
        rewards_BxK=dims_BxK(results) if traits.takes_reward_dims else None,
    ))  # fmt: skip
    adv, returns, mask = (
        np.asarray(x, np.float32) for x in (out.adv_BxT, out.returns_BxT, out.loss_mask_BxT)
    )
    metrics = {k: float(v) for k, v in out.metrics.items()}
    current_kl = float(out.current_kl) if spec.advantage.use_kl_in_reward else None
    batch = TrainBatch(
        rb.input_ids_BxT, rb.attention_mask_BxT, mask, rb.rollout_logp_BxT, adv_BxT=adv,
        old_logp_BxT=passes.get("old_logp_BxT"), ref_logp_BxT=passes.get("ref_logp_BxT"),
        values_BxT=passes.get("values_BxT"), returns_BxT=returns, prompt_len=rb.prompt_len,
    )  # fmt: skip
    return batch, metrics, current_kl


def run_updates(actor, critic, batch: TrainBatch, spec, step: int, entropy_ctrl, timer) -> dict:
    """PPO epochs x mini-batches of optimizer updates, the critic's then the actor's (their
    `state` replaced in place); returns the updates' metrics, averaged (skips counted)."""
    B = batch.input_ids_BxT.shape[0]
    rng = np.random.default_rng([spec.seed, step])
    train_actor = critic is None or step >= critic.warmup_steps
    # An entropy target's weight for this step: a jit argument, so it moves without a recompile
    entropy_coeff = jnp.float32(entropy_ctrl.active_coeff) if entropy_ctrl.enabled else None
    per_update = []
    for _ in range(spec.ppo_epochs):
        order = rng.permutation(B) if spec.shuffle_mini_batches else np.arange(B)
        for s in range(0, B, spec.mini_batch_size * spec.n):
            mb = batch.take(order[s : s + spec.mini_batch_size * spec.n])
            if mb.response_mask_BxT.sum() == 0:
                continue  # nothing to learn from (all filtered / failed)
            counts = Counts.of(mb.response_mask_BxT)._replace(entropy_coeff=entropy_coeff)
            if spec.micro_batch_tokens > 0:
                stacks = mb.without_masked_rows().split_tokens(spec.micro_batch_tokens)
            else:  # filtered groups' rows skipped: same gradient, fewer micro-batches
                mb = mb.without_masked_rows(spec.micro_batch_size)
                stacks = [mb.split_rows(spec.micro_batch_size)]
            if critic is not None:
                with timer("update_critic"):
                    critic.state, m = critic.update(critic.state, stacks, counts)
                    per_update.append(jax.block_until_ready(m))  # time compute, not dispatch
            if train_actor:
                with timer("update_actor"):
                    actor.state, m = actor.update(actor.state, stacks, counts)
                    per_update.append(jax.block_until_ready(m))
    out, got = {"train/skipped_updates": 0.0}, jax.device_get(per_update)
    for k in {k for m in got for k in m}:
        vals = [float(m[k]) for m in got if k in m]
        # skipped updates are counted, everything else is averaged over updates
        out[k] = float(np.sum(vals) if "skipped" in k else np.mean(vals))
    return out
