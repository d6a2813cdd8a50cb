"""The single controller: one RL step after another, in the order the data flows (DESIGN.md).

rollout -> reward -> old / reference log-probs and values -> advantage stage -> actor / critic
updates over mini-batches x PPO epochs -> weight sync -> metrics -> checkpoint -> evaluation.
The roles arrive built (`mimojax.train.roles`); this module reads no config.

    trainer = Trainer(load_config("configs/grpo_tiny.py"), "/tmp/run")
    trainer.train()
"""

from __future__ import annotations

import dataclasses
import logging
import time

import jax
import jax.numpy as jnp
import numpy as np

from mimojax.algos import AdvantageInputs, advantage_stage
from mimojax.algos.registry import ADVANTAGE_ESTIMATORS
from mimojax.checkpoint.preemption import StepAbandoned, StopRequest
from mimojax.distributed import is_main_process, replicated
from mimojax.eval.held_out import evaluate
from mimojax.observe.metrics import (
    RESTART_KEYS,
    MetricsLogger,
    Timer,
    restart_stats,
    rollout_batch_metrics,
)
from mimojax.rewards.pool import dims_BxK, summarize
from mimojax.rollout.agent_loop import agent_loop_metrics
from mimojax.rollout.async_buffer import AsyncRollouts
from mimojax.rollout.async_metrics import async_step_metrics
from mimojax.rollout.batch import TrainBatch, build_batch, map_rows
from mimojax.rollout.dynamic_sampling import sample_groups
from mimojax.rollout.stream import stream_rollouts
from mimojax.train.roles import Run, build_run
from mimojax.train.step import Counts

log = logging.getLogger(__name__)
# Settings are static: one compile per estimator setup and batch shape.
_advantage_stage = jax.jit(advantage_stage, static_argnums=0)


class Trainer:
    """Runs the loop over a built `Run`, resuming from the workdir's latest checkpoint."""

    def __init__(self, cfg=None, workdir: str | None = None, *, progress: bool = True, run=None):
        self.run: Run = run if run is not None else build_run(cfg, workdir)
        self.roles, self.spec, self.workdir = self.run.roles, self.run.spec, self.run.workdir
        self.actor, self.critic = self.roles.actor, self.roles.critic
        self.engine, self.pool = self.roles.rollout.engine, self.roles.reward
        self.checkpointer = self.run.checkpointer
        self.tokenizer, self.eval_examples = self.roles.tokenizer, self.run.eval_examples
        self.traits = ADVANTAGE_ESTIMATORS.traits(self.spec.advantage.estimator)
        self.data_iter = self.run.train_data.iterator()
        self.kl_ctrl, self.entropy_ctrl = self.spec.kl_ctrl, self.spec.entropy_ctrl
        self.step, self.wall_s, self.total_tokens = 0, 0.0, 0
        self._evals_done_at_minutes: set[float] = set()
        self._save_s, self._saved_step, self.stop = None, None, None
        self.restarts = dict.fromkeys(RESTART_KEYS, 0.0)
        # Off-policy modes: the producer (started by train()) and the last batch consumed,
        # (its index + 1, the data position after it, stream flow's samples done beyond it):
        # what a checkpoint records.
        self.rollouts: AsyncRollouts | None = None
        self._consumed: tuple[int, dict, dict | None] | None = None
        self._restore()  # the newest readable checkpoint; build_run refused another model's
        spec, progress = self.spec, progress and is_main_process()  # multi-host: process 0 prints
        self.logger = MetricsLogger(
            self.workdir, total_steps=spec.total_steps, start_step=self.step, progress=progress,
            time_limit_s=60.0 * spec.time_limit_minutes, **spec.logger_kwargs,
        )  # fmt: skip

    # ------------------------------------------------------------------ state
    def _array_state(self) -> dict:
        coef = replicated(np.float32(self.kl_ctrl.coef), self.actor.mesh)  # multi-host: global
        state = {"actor": self.actor.state._asdict(), "kl_coef": coef}
        if self.critic is not None:
            state["critic"] = self.critic.state._asdict()
        return state

    def save(self) -> None:
        """Checkpoints everything a resume needs (params, optimizer, data position, counters)."""
        version, data = int(self.engine.policy_version), None
        if self.spec.mode != "sync":  # the producer's engine runs behind; buffered batches redo
            version = self.rollouts.trainer_version if self.rollouts else version
            data = self._consumed[1] if self._consumed else None
        meta = {
            "model": self.roles.fingerprint,
            "data": data or self.data_iter.get_state(),
            "policy_version": version,
            "wall_s": self.wall_s,
            "total_tokens": int(self.total_tokens),
            "evals_done_at_minutes": sorted(self._evals_done_at_minutes),
            "restarts": self.restarts,
            "entropy_ctrl": self.entropy_ctrl.state(),
        }
        if self.spec.mode != "sync":
            meta["async_batches"] = self._consumed[0] if self._consumed else self.step
            if self._consumed and self._consumed[2] is not None:  # stream flow's done samples
                meta["async_done"] = self._consumed[2]
        self.checkpointer.save(self.step, self._array_state(), meta)
        self._saved_step = self.step

    def _restore(self) -> None:
        found = self.checkpointer.restore_latest(self._array_state())
        if found is None:
            return
        _, state, meta = found
        self.actor.state = type(self.actor.state)(**state["actor"])
        if self.critic is not None:
            self.critic.state = type(self.critic.state)(**state["critic"])
        self.kl_ctrl = dataclasses.replace(self.kl_ctrl, coef=float(state["kl_coef"]))
        self.entropy_ctrl = self.entropy_ctrl.restored(meta.get("entropy_ctrl"))
        self.data_iter.set_state(meta["data"])
        if "async_batches" in meta:
            self._consumed = (int(meta["async_batches"]), meta["data"], meta.get("async_done"))
        self.step, self.wall_s = int(meta["step"]), float(meta["wall_s"])
        self.total_tokens = int(meta["total_tokens"])
        self._evals_done_at_minutes = set(meta.get("evals_done_at_minutes", []))
        self.restarts = restart_stats(self.workdir, self.step, self.wall_s, meta.get("restarts"))
        self.roles.rollout.sync(self.actor.state.params, version=int(meta["policy_version"]))
        log.info("resumed from %s step %d", self.checkpointer.directory, self.step)

    # ------------------------------------------------------------------ one RL step
    def _rollout(self, examples, n, sampling, request_id_base):
        return self.roles.rollout.run(examples, n, sampling, request_id_base)

    def _scoring_passes(self, rb, examples, timer) -> dict:
        """What the advantage stage needs beyond rewards: old / reference log-probs, values,
        ReMax's greedy baseline, OTB's sum of squared probabilities."""
        actor, ref, P, out = self.actor, self.roles.reference, rb.prompt_len, {}
        micro = self.spec.micro_batch_size  # the passes run in row chunks: bounded memory
        if self.traits.needs_baseline_rollout:  # ReMax: one greedy sample per prompt
            with timer("gen_max"):
                base_id = (1 << 29) + self.step * self.spec.batch_size
                greedy = self._rollout(examples, 1, self.roles.rollout.greedy, base_id)
                base = self.pool.score([t.grader_item() for t in greedy])
            out["baseline_rewards_B"] = np.float32([base[g].score for g in rb.group_ids_B])
        if self.traits.needs_logprob_stats:
            with timer("old_log_prob"):
                out["old_logp_BxT"], out["sum_pi_squared_BxT"] = map_rows(
                    rb, micro, actor.logprob_stats, actor.state.params, prompt_len=P
                )
        elif not actor.on_policy or self.spec.advantage.use_kl_in_reward:
            with timer("old_log_prob"):
                logprobs = actor.logprobs
                out["old_logp_BxT"] = map_rows(
                    rb, micro, logprobs, actor.state.params, prompt_len=P
                )
        if ref is not None:
            with timer("ref"):
                out["ref_logp_BxT"] = map_rows(rb, micro, ref.logprobs, ref.params, prompt_len=P)
        if self.critic is not None:
            with timer("values"):
                values = map_rows(rb, micro, self.critic.values, self.critic.state.params)
                out["values_BxT"] = values * rb.response_mask_BxT
        return out

    def train_step(self) -> dict:
        """One RL step; returns its metrics (verl names)."""
        spec, timer, t_step, produced, queue = self.spec, Timer(), time.perf_counter(), None, {}
        if self.rollouts is None:
            sampled = sample_groups(  # one generation batch, or dynamic sampling's several
                self._rollout, self.roles.rollout.sampling, self.pool, self.data_iter, spec,
                self.step, timer, self._safe_point,
            )  # fmt: skip
        else:  # generated ahead by the producer thread, within the staleness bound
            produced, queue = self.rollouts.get(between_waits=self._safe_point)
            sampled = produced.sampled
        examples, trajs, results = sampled.examples, sampled.trajs, sampled.results
        rb = build_batch(
            trajs, [r.score for r in results], [r.valid for r in results],
            pad_id=self.roles.pad_id, response_len=spec.response_len,
            turn_scores=[r.turn_scores for r in results],
        )  # fmt: skip
        passes = self._scoring_passes(rb, examples, timer)
        self._safe_point()  # the last one: from the advantage stage on, the step completes
        with timer("adv"):
            out = _advantage_stage(spec.advantage, AdvantageInputs(
                token_rewards_BxT=rb.token_rewards_BxT, response_mask_BxT=rb.response_mask_BxT,
                scores_B=rb.scores_B, group_ids_B=rb.group_ids_B, valid_B=rb.valid_B,
                truncated_B=rb.truncated_B if spec.advantage.truncated != "keep" else None,
                kl_coef=np.float32(self.kl_ctrl.coef), **passes,
                rewards_BxK=dims_BxK(results) if self.traits.takes_reward_dims else None,
            ))  # fmt: skip
            adv, returns, mask = (
                np.asarray(x, np.float32) for x in (out.adv_BxT, out.returns_BxT, out.loss_mask_BxT)
            )
            metrics = {k: float(v) for k, v in out.metrics.items()}
            if spec.advantage.use_kl_in_reward:
                self.kl_ctrl = self.kl_ctrl.update(float(out.current_kl), spec.batch_size * spec.n)
        batch = TrainBatch(
            rb.input_ids_BxT, rb.attention_mask_BxT, mask, rb.rollout_logp_BxT, adv_BxT=adv,
            old_logp_BxT=passes.get("old_logp_BxT"), ref_logp_BxT=passes.get("ref_logp_BxT"),
            values_BxT=passes.get("values_BxT"), returns_BxT=returns, prompt_len=rb.prompt_len,
        )  # fmt: skip
        if self.rollouts is None:  # sync: the engine is idle and stale until the sync below
            self.roles.rollout.release()
        metrics.update(self._update(batch, timer))
        if self.entropy_ctrl.enabled:  # the bonus this step used; the next from its entropy
            metrics["actor/entropy_coeff"] = self.entropy_ctrl.active_coeff
            if "actor/entropy" in metrics:  # an update ran
                self.entropy_ctrl = self.entropy_ctrl.update(metrics["actor/entropy"])
        with timer("sync"):
            if self.rollouts is None:
                version = self.roles.rollout.sync(self.actor.state.params)
            else:  # a copy: the next update donates the params the producer would load
                version, params = self.rollouts.trainer_version + 1, self.actor.state.params
                self.rollouts.updated(version, lambda: jax.tree.map(jnp.copy, params))
                self._consumed = (produced.index + 1, produced.data_state, produced.done)
                queue.update(produced.timing)  # the producer's gen / reward seconds
                queue.update(async_step_metrics(
                    produced, trajs, rb.scores_B, mask, version - 1, spec.max_off_policy_steps,
                    spec.long_response_tokens, spec.partial_rollouts,
                ))  # fmt: skip
        values = passes.get("values_BxT")
        metrics.update(rollout_batch_metrics(rb, trajs, mask, adv, returns, values, version))
        metrics.update(agent_loop_metrics(trajs))
        metrics.update({**summarize(results), **timer.pop()})
        metrics.update(sampled.metrics)  # dynamic / difficulty-aware sampling's, when on
        metrics.update(queue)  # async/*, queue/* (off-policy modes)
        step_s, tokens = time.perf_counter() - t_step, int(rb.attention_mask_BxT.sum())
        self.total_tokens += tokens
        return {
            **metrics, **self.restarts, "timing_s/step": step_s, "perf/time_per_step": step_s,
            "perf/throughput": tokens / step_s, "perf/total_num_tokens": float(self.total_tokens),
            "actor/lr": float(self.actor.schedule(int(self.actor.state.step))),
            "actor/policy_version": float(version),
        }  # fmt: skip

    def _safe_point(self) -> None:
        """Between phases: after a stop signal, a step not yet updating is abandoned."""
        if self.stop is not None and self.stop.signalled:
            raise StepAbandoned

    def _update(self, batch: TrainBatch, timer) -> dict:
        """PPO epochs x mini-batches of optimizer updates: the critic's, then the actor's."""
        spec, critic, B = self.spec, self.critic, batch.input_ids_BxT.shape[0]
        rng = np.random.default_rng([spec.seed, self.step])
        train_actor = critic is None or self.step >= critic.warmup_steps
        # An entropy target's weight for this step: a jit argument, so it moves without a recompile
        ctrl = self.entropy_ctrl
        entropy_coeff = jnp.float32(ctrl.active_coeff) if ctrl.enabled else None
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
                        self.actor.state, m = self.actor.update(self.actor.state, stacks, counts)
                        per_update.append(jax.block_until_ready(m))
        out, got = {"train/skipped_updates": 0.0}, jax.device_get(per_update)
        for k in {k for m in got for k in m}:
            vals = [float(m[k]) for m in got if k in m]
            # skipped updates are counted, everything else is averaged over updates
            out[k] = float(np.sum(vals) if "skipped" in k else np.mean(vals))
        return out

    # ------------------------------------------------------------------ loop
    def evaluate(self) -> dict:
        """Held-out metrics of the engine's current weights (val-core/*)."""
        if not self.eval_examples:
            return {}
        r = self.roles.rollout
        if self.rollouts is not None:  # borrow the engine between two batches of the producer
            with self.rollouts.engine_lock:
                r.sync(self.actor.state.params, version=self.rollouts.trainer_version)
                self.rollouts.engine_borrowed()
                return self._evaluate_engine()
        return self._evaluate_engine()

    def _evaluate_engine(self) -> dict:
        r = self.roles.rollout
        return evaluate(
            self.engine, self.tokenizer, self.eval_examples, self.pool,
            greedy=r.greedy, sampled=r.sampling, pass_k=self.spec.eval_pass_k, agent=r.agent,
        )  # fmt: skip

    def _eval_due(self) -> bool:
        if not self.eval_examples:
            return False
        if self.spec.eval_every > 0 and self.step % self.spec.eval_every == 0:
            return True
        due = [m for m in self.spec.eval_at_minutes if self.wall_s >= 60.0 * m]
        fresh = [m for m in due if m not in self._evals_done_at_minutes]
        self._evals_done_at_minutes.update(fresh)
        return bool(fresh)

    def _time_up(self) -> bool:
        limit = self.spec.time_limit_minutes
        return limit > 0 and self.wall_s >= 60.0 * limit

    def train(self) -> dict:
        """Runs until the step count, the time limit or a stop signal; returns the last eval."""
        spec, last_eval = self.spec, {}
        try:
            with StopRequest(spec.preemption_grace_s) as self.stop:
                if self.step == 0 and spec.eval_at_start and self.eval_examples:
                    last_eval = self.evaluate()
                    self.logger.log(0, {**last_eval, "perf/wall_s": 0.0})
                self._start_rollouts()
                while self.step < spec.total_steps and not self._time_up():
                    data_state, t0 = self._data_state(), time.perf_counter()
                    try:
                        metrics = self.train_step()
                    except StepAbandoned:  # re-runs identically after the resume
                        if self.rollouts is None:  # async: the checkpoint has the consumed one
                            self.data_iter.set_state(data_state)
                        break
                    self.step += 1
                    self.wall_s += time.perf_counter() - t0
                    metrics["perf/wall_s"] = self.wall_s
                    final = self.step == spec.total_steps or self._time_up()
                    if self._save_s is not None:
                        metrics["timing_s/save_checkpoint"], self._save_s = self._save_s, None
                    due = self._eval_due() or (final and spec.eval_at_end and self.eval_examples)
                    if due and not self.stop.signalled:
                        last_eval = self.evaluate()
                        metrics.update(last_eval)
                    self.logger.log(self.step, metrics)
                    every = spec.checkpoint_every
                    if every and (self.step % every == 0 or final):
                        # After the metrics line: a kill between the two leaves a line that the
                        # resume truncates, never a step without one. Save time shows next step.
                        t0 = time.perf_counter()
                        self.save()
                        self._save_s = time.perf_counter() - t0
                    if self.stop.stop_after(self.step):
                        break
                if self.stop.signalled:
                    self._save_and_report_stop()
        finally:
            if self.rollouts is not None:
                self.rollouts.close()
            self.close()
        return last_eval

    def _data_state(self):
        return self.data_iter.get_state() if self.rollouts is None else None

    def _start_rollouts(self) -> None:
        """Off-policy modes: the producer thread, from the last consumed batch on."""
        spec = self.spec
        if spec.mode == "sync" or self.rollouts is not None:
            return
        version, params = (
            int(self.engine.policy_version),
            jax.tree.map(jnp.copy, self.actor.state.params),
        )
        if spec.flow == "stream":  # units (trajectories or groups) as they finish
            done = self._consumed[2] if self._consumed else None
            self.rollouts = stream_rollouts(self, params, version, done)
            return
        self.rollouts = AsyncRollouts(
            self._produce, lambda params, v: self.roles.rollout.sync(params, version=v), params,
            start_index=self._consumed[0] if self._consumed else self.step, version=version,
            max_off_policy_steps=spec.max_off_policy_steps, policy=spec.staleness_policy,
            exact=spec.mode == "one_step_off", sync_every=spec.sync_every_steps,
            partial=spec.partial_rollouts,
        )  # fmt: skip

    def _produce(self, index: int):
        """Producer thread: batch `index` sampled and graded (request ids from `index`)."""
        timer = Timer()
        sampled = sample_groups(
            self._rollout, self.roles.rollout.sampling, self.pool, self.data_iter, self.spec,
            index, timer, lambda: None,
        )  # fmt: skip
        return sampled, self.data_iter.get_state(), timer.pop()

    def _save_and_report_stop(self) -> None:
        """After a stop signal: the last finished step checkpointed, one line on where to resume."""
        if self.step > 0 and self._saved_step != self.step:
            self.save()
        self.checkpointer.wait()
        self.stop.report(self.step, self.checkpointer.directory)

    def close(self) -> None:
        """Stops the grader workers and the logger, then waits for checkpoints (may raise)."""
        self.pool.close()
        self.logger.close()
        self.checkpointer.close()
