"""The single controller: one Python loop that owns the whole RL step (DESIGN.md, "One RL step").

prompts -> rollouts (engine) -> rewards (pool) -> old / ref logprobs and values -> advantages ->
jitted actor / critic updates over mini-batches x PPO epochs -> weight sync to the engine ->
metrics -> checkpoint -> held-out evaluation. Roles are colocated on one mesh (time-shared).

    trainer = Trainer(load_config("configs/grpo_tiny.py"))
    trainer.train()
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from mimojax import checkpoint as ckpt_lib
from mimojax.algos import (
    ADVANTAGE_ESTIMATORS,
    KLController,
    apply_kl_penalty,
    apply_overlong_shaping,
    filter_groups,
)
from mimojax.batch import build_batch, micro_batches
from mimojax.config import validate
from mimojax.data import prompt_dataset_from_config
from mimojax.engine.from_config import engine_from_config, sampling_from_config
from mimojax.evaluation import evaluate
from mimojax.metrics import MetricsLogger, Timer, rollout_batch_metrics
from mimojax.models.decoder import ValueModel
from mimojax.models.loader import load_model_from_config
from mimojax.rewards import RewardPool, summarize
from mimojax.rollout.single_turn import rollout_single_turn
from mimojax.train_step import (
    actor_hparams_from_config,
    actor_update,
    critic_update,
    critic_values,
    init_state,
    make_optimizer,
    make_schedule,
    sequence_logprobs,
)

log = logging.getLogger(__name__)

# Estimators that take Dr.GRPO's switch (divide by the group std or not).
_STD_NORMED = ("grpo", "grpo_passk", "grpo_vectorized", "gdpo")


def _on_mesh(state, mesh):
    """Replicates over `mesh` every leaf not already placed on it (optimizer counters, step).

    Fresh scalars are uncommitted and follow the params into jit; the same scalars restored
    from a checkpoint come back committed to one device, which jit refuses to mix with the
    mesh-sharded params. Placing them on the mesh up front makes both cases identical.
    """
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    def place(x):
        if isinstance(getattr(x, "sharding", None), jax.sharding.NamedSharding):
            return x
        return jax.device_put(x, replicated)

    return jax.tree.map(place, state)


def _split_params(module):
    """(graphdef, pure-dict params); the decoder family holds nothing but nnx.Param state."""
    graphdef, state = nnx.split(module)
    return graphdef, nnx.to_pure_dict(state)


class Trainer:
    """Builds every role from a config; `train()` runs the loop, resuming from the workdir."""

    def __init__(self, cfg, workdir: str | None = None, *, progress: bool = True):
        self.cfg = validate(cfg)
        self.workdir = os.path.abspath(workdir or cfg.trainer.workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.checkpointer = ckpt_lib.Checkpointer(
            os.path.join(self.workdir, "checkpoints"),
            keep=cfg.checkpoint.keep,
            async_save=cfg.checkpoint.async_save,
        )
        model, self.tokenizer, self.mesh, _ = load_model_from_config(cfg)
        self.fingerprint = ckpt_lib.model_fingerprint(model.config)
        latest = self.checkpointer.latest_step()
        if latest is not None:  # fail before any compute on a checkpoint of another model
            meta = self.checkpointer.read_meta(latest)
            ckpt_lib.check_fingerprint(meta.get("model", {}), self.fingerprint, self.workdir)

        self.train_data = prompt_dataset_from_config(cfg, self.tokenizer, "train")
        self.data_iter = self.train_data.iterator()
        self.eval_examples = []
        if cfg.data.eval_files:
            rows = prompt_dataset_from_config(cfg, self.tokenizer, "eval").all_rows()
            self.eval_examples = rows[: cfg.eval.max_examples or None]

        a, r, t = cfg.algorithm, cfg.rollout, cfg.trainer
        self.n = int(r.n)
        self.batch_size = int(cfg.data.batch_size)
        self.updates_per_step = t.ppo_epochs * (self.batch_size // t.mini_batch_size)
        total_updates = t.total_steps * self.updates_per_step
        self.schedule = make_schedule(cfg.optimizer, total_updates)
        actor_opt = make_optimizer(cfg.optimizer, total_updates)

        self.actor_def, actor_params = _split_params(model)
        self.actor = _on_mesh(init_state(actor_params, actor_opt), self.mesh)
        self.use_ref = bool(a.use_kl_loss or a.use_kl_in_reward)
        # The reference is the starting policy, frozen; a resumed run rebuilds it from the
        # same weights, so it is not checkpointed.
        self.ref_params = jax.tree.map(jnp.copy, actor_params) if self.use_ref else None
        self.kl_ctrl = KLController(
            float(a.kl_ctrl.kl_coef),
            a.kl_ctrl.type,
            float(a.kl_ctrl.target_kl),
            float(a.kl_ctrl.horizon),
        )
        # One update per batch: the old policy is the current one (verl's on-policy shortcut).
        self.on_policy = (
            t.ppo_epochs == 1
            and t.mini_batch_size == self.batch_size
            and not a.rollout_correction.bypass_mode
        )
        self.hp = actor_hparams_from_config(cfg, on_policy=self.on_policy)
        self._actor_step = jax.jit(
            functools.partial(
                actor_update, graphdef=self.actor_def, hp=self.hp, optimizer=actor_opt
            ),
            static_argnames=("prompt_len",),
            donate_argnums=(0,),
        )
        self._logprobs = jax.jit(
            functools.partial(
                sequence_logprobs,
                graphdef=self.actor_def,
                temperature=self.hp.temperature,
                top_k=self.hp.top_k,
                top_p=self.hp.top_p,
                chunk=self.hp.logprob_chunk,
            ),
            static_argnames=("prompt_len",),
        )

        self.critic = None
        if a.adv_estimator == "gae":
            critic_model = ValueModel.from_decoder(model, seed=int(t.seed))
            self.critic_def, critic_params = _split_params(critic_model)
            critic_opt = make_optimizer(_with_lr(cfg.optimizer, cfg.critic.lr), total_updates)
            self.critic = _on_mesh(init_state(critic_params, critic_opt), self.mesh)
            self._critic_step = jax.jit(
                functools.partial(
                    critic_update,
                    graphdef=self.critic_def,
                    clip_range_value=float(cfg.critic.cliprange_value),
                    agg_mode=a.loss_agg_mode,
                    optimizer=critic_opt,
                ),
                donate_argnums=(0,),
            )
            self._values = jax.jit(functools.partial(critic_values, graphdef=self.critic_def))

        self.engine = engine_from_config(cfg, model, self.tokenizer)
        self.sampling = sampling_from_config(cfg)
        self.greedy = sampling_from_config(cfg, greedy=True)
        del model  # the trainer's copy lives in self.actor.params; the engine has its own
        self.pool = RewardPool(int(cfg.reward.num_workers), float(cfg.reward.timeout_s))
        self.step = 0
        self.wall_s = 0.0
        self.total_tokens = 0
        self._evals_done_at_minutes: set[float] = set()
        self._save_s = None
        if latest is not None:
            self._restore(latest)
        self.logger = MetricsLogger(
            self.workdir,
            total_steps=t.total_steps,
            start_step=self.step,
            jsonl=cfg.logging.jsonl,
            wandb_mode=cfg.logging.wandb.mode,
            wandb_project=cfg.logging.wandb.project,
            wandb_entity=cfg.logging.wandb.entity,
            wandb_name=cfg.logging.wandb.name,
            config=cfg.to_dict(),
            progress=progress,
            time_limit_s=60.0 * float(t.time_limit_minutes),
        )
        self._write_run_info()

    # ------------------------------------------------------------------ state
    def _array_state(self) -> dict:
        state = {
            "actor": self.actor._asdict(),
            "kl_coef": jnp.asarray(self.kl_ctrl.coef, jnp.float32),
        }
        if self.critic is not None:
            state["critic"] = self.critic._asdict()
        return state

    def _meta(self) -> dict:
        return {
            "model": self.fingerprint,
            "data": self.data_iter.get_state(),
            "policy_version": int(self.engine.policy_version),
            "wall_s": self.wall_s,
            "total_tokens": int(self.total_tokens),
            "evals_done_at_minutes": sorted(self._evals_done_at_minutes),
        }

    def save(self) -> None:
        """Checkpoints everything a resume needs (params, optimizer, data position, counters)."""
        self.checkpointer.save(self.step, self._array_state(), self._meta())

    def _restore(self, step: int) -> None:
        state, meta = self.checkpointer.restore(step, self._array_state())
        self.actor = type(self.actor)(**state["actor"])
        if self.critic is not None:
            self.critic = type(self.critic)(**state["critic"])
        self.kl_ctrl = dataclasses.replace(self.kl_ctrl, coef=float(state["kl_coef"]))
        self.data_iter.set_state(meta["data"])
        self.step = int(meta["step"])
        self.wall_s = float(meta["wall_s"])
        self.total_tokens = int(meta["total_tokens"])
        self._evals_done_at_minutes = set(meta.get("evals_done_at_minutes", []))
        self.engine.update_params(self.actor.params, version=int(meta["policy_version"]))
        log.info("resumed from %s step %d", self.checkpointer.directory, self.step)

    def _write_run_info(self) -> None:
        info = {
            "model": self.cfg.model.name_or_path,
            "devices": [str(d) for d in jax.devices()],
            "algorithm": self.cfg.algorithm.adv_estimator,
            "policy_loss": self.cfg.algorithm.policy_loss,
            "batch": f"{self.batch_size} prompts x {self.n} samples",
            "max_new_tokens": int(self.cfg.rollout.max_new_tokens),
            "train_rows": len(self.train_data),
            "train_rows_dropped": self.train_data.num_dropped,
            "eval_rows": len(self.eval_examples),
        }
        with open(os.path.join(self.workdir, "run_info.json"), "w") as f:
            json.dump(info, f, indent=1)

    # ------------------------------------------------------------------ one RL step
    def _score(self, trajs):
        items = [
            {
                "env": t.example["env"],
                "response": t.response_text,
                "ground_truth": t.example["ground_truth"],
                "extra": t.example.get("extra", {}),
            }
            for t in trajs
        ]
        return self.pool.score(items)

    def _chunked(self, fn, params, batch, P, *extra_keys):
        """fn over the batch in micro-batch-sized chunks (bounded activation memory)."""
        micro = int(self.cfg.trainer.micro_batch_size)
        outs = []
        B = batch["input_ids_BxT"].shape[0]
        for s in range(0, B, micro):
            ids = batch["input_ids_BxT"][s : s + micro]
            attn = batch["attention_mask_BxT"][s : s + micro]
            if P is None:
                outs.append(np.asarray(fn(params, ids, attn)))
            else:
                outs.append(np.asarray(fn(params, ids, attn, prompt_len=P)))
        return np.concatenate(outs, axis=0)

    def train_step(self) -> dict:
        """One RL step; returns its metrics (verl names)."""
        cfg, timer = self.cfg, Timer()
        a = cfg.algorithm
        t_step = time.perf_counter()
        examples = next(self.data_iter)
        with timer("gen"):
            trajs = rollout_single_turn(
                self.engine,
                self.tokenizer,
                examples,
                self.n,
                self.sampling,
                request_id_base=self.step * self.batch_size,
                prompt_overflow=cfg.rollout.prompt_overflow,
            )
        with timer("reward"):
            results = self._score(trajs)
        scores_B = [r.score for r in results]
        valid_B = [r.valid for r in results]
        batch = build_batch(
            trajs,
            scores_B,
            valid_B,
            pad_id=self._pad_id(),
            response_len=int(cfg.rollout.max_new_tokens),
        )
        P = batch["prompt_len"]
        mask = batch["response_mask_BxT"].astype(np.float32)
        metrics: dict[str, float] = {}

        if not self.on_policy or a.use_kl_in_reward:
            with timer("old_log_prob"):
                old = self._chunked(self._logprobs, self.actor.params, batch, P)
        else:
            old = np.zeros_like(mask)
        ref = np.zeros_like(mask)
        if self.use_ref:
            with timer("ref"):
                ref = self._chunked(self._logprobs, self.ref_params, batch, P)
        values = np.zeros_like(mask)
        if self.critic is not None:
            with timer("values"):
                values = self._chunked(self._values, self.critic.params, batch, None) * mask

        with timer("adv"):
            rewards = jnp.asarray(batch["token_rewards_BxT"])
            if cfg.reward.overlong_buffer.enable:
                ob = cfg.reward.overlong_buffer
                rewards, m = apply_overlong_shaping(
                    rewards, mask, int(cfg.rollout.max_new_tokens), int(ob.len), ob.penalty_factor
                )
                metrics.update({k: float(v) for k, v in m.items()})
            if a.use_kl_in_reward:
                rewards, current_kl, m = apply_kl_penalty(
                    rewards, old, ref, mask, self.kl_ctrl.coef, a.kl_loss_type
                )
                metrics.update({k: float(v) for k, v in m.items()})
                self.kl_ctrl = self.kl_ctrl.update(float(current_kl), self.batch_size * self.n)
            valid = jnp.asarray(batch["valid_B"])
            if a.filter_groups:
                keep_B, m = filter_groups(
                    jnp.asarray(batch["scores_B"]),
                    jnp.asarray(batch["group_ids_B"]),
                    valid,
                    num_groups=self.batch_size,
                )
                metrics.update({k: float(v) for k, v in m.items()})
                mask = mask * np.asarray(keep_B, np.float32)[:, None]
            kwargs = {"norm_by_std": bool(a.norm_adv_by_std_in_grpo)}
            if a.adv_estimator not in _STD_NORMED:
                kwargs = {}
            adv, returns = ADVANTAGE_ESTIMATORS[a.adv_estimator](
                rewards,
                jnp.asarray(mask),
                jnp.asarray(batch["group_ids_B"]),
                jnp.asarray(values),
                float(a.gamma),
                float(a.lam),
                valid_B=valid,
                num_groups=self.batch_size,
                **kwargs,
            )
            adv, returns = np.asarray(adv) * mask, np.asarray(returns) * mask
        arrays = {
            "input_ids_BxT": batch["input_ids_BxT"],
            "attention_mask_BxT": batch["attention_mask_BxT"],
            "response_mask_BxT": mask,
            "old_logp_BxT": old,
            "rollout_logp_BxT": batch["rollout_logp_BxT"],
            "adv_BxT": adv.astype(np.float32),
            "ref_logp_BxT": ref,
            "values_BxT": values,
            "returns_BxT": returns.astype(np.float32),
        }
        metrics.update(self._update(arrays, P, timer))
        with timer("sync"):
            self.engine.update_params(self.actor.params)

        values_or_none = values if self.critic is not None else None
        metrics.update(
            rollout_batch_metrics(
                batch, trajs, mask, adv, returns, values_or_none, self.engine.policy_version
            )
        )
        metrics.update(summarize(results))
        metrics.update(timer.pop())
        step_s = time.perf_counter() - t_step
        tokens = int(batch["attention_mask_BxT"].sum())
        self.total_tokens += tokens
        metrics.update(
            {
                "timing_s/step": step_s,
                "perf/time_per_step": step_s,
                "perf/throughput": tokens / step_s,
                "perf/total_num_tokens": float(self.total_tokens),
                "actor/lr": float(self.schedule(int(self.actor.step))),
                "actor/policy_version": float(self.engine.policy_version),
            }
        )
        return metrics

    def _update(self, arrays, P, timer) -> dict:
        t = self.cfg.trainer
        B = arrays["input_ids_BxT"].shape[0]
        mini = t.mini_batch_size * self.n
        micro = int(t.micro_batch_size)
        actor_m, critic_m = [], []
        rng = np.random.default_rng([int(t.seed), self.step])
        train_actor = self.step >= int(self.cfg.critic.warmup_steps) or self.critic is None
        for _ in range(t.ppo_epochs):
            order = rng.permutation(B) if t.shuffle_mini_batches else np.arange(B)
            for s in range(0, B, mini):
                idx = order[s : s + mini]
                mb = micro_batches(arrays, idx, micro)
                m_mask = arrays["response_mask_BxT"][idx]
                counts = {
                    "global_tokens": jnp.asarray(max(m_mask.sum(), 1.0), jnp.float32),
                    "global_seqs": jnp.asarray(
                        max(float((m_mask.sum(-1) > 0).sum()), 1.0), jnp.float32
                    ),
                }
                if m_mask.sum() == 0:
                    continue  # nothing to learn from (all filtered / failed)
                if self.critic is not None:
                    with timer("update_critic"):
                        self.critic, m = self._critic_step(self.critic, {**mb, **counts})
                        critic_m.append(jax.block_until_ready(m))  # time the compute, not dispatch
                if train_actor:
                    with timer("update_actor"):
                        self.actor, m = self._actor_step(self.actor, {**mb, **counts}, prompt_len=P)
                        actor_m.append(jax.block_until_ready(m))
        out = {}
        for ms in (actor_m, critic_m):
            if ms:
                got = jax.device_get(ms)
                for k in got[0]:
                    vals = [float(x[k]) for x in got]
                    # skipped updates are counted, everything else is averaged over updates
                    out[k] = sum(vals) if "skipped" in k else float(np.mean(vals))
        out.setdefault("train/skipped_updates", 0.0)
        return out

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    # ------------------------------------------------------------------ loop
    def evaluate(self) -> dict:
        """Held-out metrics of the engine's current weights (val-core/*)."""
        if not self.eval_examples:
            return {}
        return evaluate(
            self.engine,
            self.tokenizer,
            self.eval_examples,
            self.pool,
            greedy=self.greedy,
            sampled=self.sampling,
            pass_k=int(self.cfg.eval.pass_k),
        )

    def _eval_due(self) -> bool:
        t = self.cfg.trainer
        if not self.eval_examples:
            return False
        if t.eval_every > 0 and self.step % t.eval_every == 0:
            return True
        due = [m for m in t.eval_at_minutes if self.wall_s >= 60.0 * m]
        fresh = [m for m in due if m not in self._evals_done_at_minutes]
        self._evals_done_at_minutes.update(fresh)
        return bool(fresh)

    def _time_up(self) -> bool:
        limit = float(self.cfg.trainer.time_limit_minutes)
        return limit > 0 and self.wall_s >= 60.0 * limit

    def train(self) -> dict:
        """Runs until trainer.total_steps (or the time limit); returns the last eval metrics."""
        cfg, last_eval = self.cfg, {}
        try:
            if self.step == 0 and self.cfg.eval.at_start and self.eval_examples:
                last_eval = self.evaluate()
                self.logger.log(0, {**last_eval, "perf/wall_s": 0.0})
            while self.step < cfg.trainer.total_steps and not self._time_up():
                t0 = time.perf_counter()
                metrics = self.train_step()
                self.step += 1
                self.wall_s += time.perf_counter() - t0
                metrics["perf/wall_s"] = self.wall_s
                final = self.step == cfg.trainer.total_steps or self._time_up()
                if self._save_s is not None:
                    metrics["timing_s/save_checkpoint"], self._save_s = self._save_s, None
                if self._eval_due() or (final and cfg.eval.at_end and self.eval_examples):
                    last_eval = self.evaluate()
                    metrics.update(last_eval)
                self.logger.log(self.step, metrics)
                every = cfg.checkpoint.every_steps
                if every and (self.step % every == 0 or final):
                    # After the metrics line: a kill between the two leaves a line that the
                    # resume truncates, never a step without one. Save time shows next step.
                    t0 = time.perf_counter()
                    self.save()
                    self._save_s = time.perf_counter() - t0
        finally:
            self.close()
        return last_eval

    def close(self) -> None:
        """Waits for checkpoints, stops the grader workers and the logger."""
        self.checkpointer.close()
        self.pool.close()
        self.logger.close()


def _with_lr(opt_cfg, lr: float):
    """A copy of the optimizer config with another peak learning rate (the critic's)."""
    from ml_collections import ConfigDict

    return ConfigDict({**opt_cfg.to_dict(), "lr": float(lr)})
