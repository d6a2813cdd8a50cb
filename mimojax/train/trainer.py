"""The single controller: one RL step after another, in the order the data flows (DESIGN.md).

rollout -> reward -> old / reference log-probs and values -> advantage stage -> actor / critic
updates over mini-batches x PPO epochs -> weight sync -> metrics -> checkpoint -> evaluation.
The roles arrive built (`mimojax.train.roles`); this module reads no config.

    trainer = Trainer(load_config("configs/grpo_tiny.py"), "/tmp/run")
    trainer.train()
"""

from __future__ import annotations

import logging
import time

import jax
import jax.numpy as jnp

from mimojax.algos.registry import ADVANTAGE_ESTIMATORS
from mimojax.checkpoint.preemption import StepAbandoned, StopRequest
from mimojax.distributed import is_main_process
from mimojax.eval.held_out import evaluate
from mimojax.eval.schedule import EvalSchedule
from mimojax.observe.metrics import (
    RESTART_KEYS,
    MetricsLogger,
    Timer,
    rollout_batch_metrics,
)
from mimojax.rewards.pool import summarize
from mimojax.rollout.agent_loop import agent_loop_metrics
from mimojax.rollout.async_buffer import AsyncRollouts
from mimojax.rollout.async_metrics import async_step_metrics
from mimojax.rollout.batch import build_batch
from mimojax.rollout.dynamic_sampling import sample_groups
from mimojax.rollout.stream import stream_rollouts
from mimojax.train.learning import advantage_batch, run_updates
from mimojax.train.roles import Run, build_run
from mimojax.train.run_state import array_state, checkpoint_meta, restore_run
from mimojax.train.scoring import scoring_passes

log = logging.getLogger(__name__)


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
        self.eval_schedule = EvalSchedule(self.spec.eval_every, tuple(self.spec.eval_at_minutes))
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
    def save(self) -> None:
        """Checkpoints everything a resume needs (params, optimizer, data position, counters)."""
        self.checkpointer.save(self.step, array_state(self), checkpoint_meta(self))
        self._saved_step = self.step

    def _restore(self) -> None:
        if restore_run(self):
            log.info("resumed from %s step %d", self.checkpointer.directory, self.step)

    # ------------------------------------------------------------------ one RL step
    def _rollout(self, examples, n, sampling, request_id_base):
        return self.roles.rollout.run(examples, n, sampling, request_id_base)

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
        passes = scoring_passes(
            self.roles, spec, self.traits, rb, examples, self.step, timer, self._rollout
        )
        self._safe_point()  # the last one: from the advantage stage on, the step completes
        with timer("adv"):
            batch, metrics, kl = advantage_batch(
                spec, self.traits, rb, passes, results, self.kl_ctrl.coef
            )
            if kl is not None:  # KL-in-reward's controller follows the batch KL
                self.kl_ctrl = self.kl_ctrl.update(kl, spec.batch_size * spec.n)
        mask, adv, returns = batch.response_mask_BxT, batch.adv_BxT, batch.returns_BxT
        if self.rollouts is None:  # sync: the engine is idle and stale until the sync below
            self.roles.rollout.release()
        metrics.update(
            run_updates(self.actor, self.critic, batch, spec, self.step, self.entropy_ctrl, timer)
        )
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
        metrics.update(agent_loop_metrics(trajs, rb.scores_B.tolist()))
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

    # ------------------------------------------------------------------ loop
    def evaluate(self) -> dict:
        """Held-out metrics of the engine's current weights (val-core/*)."""
        if not self.eval_examples:
            return {}
        r = self.roles.rollout

        def run():
            return evaluate(
                self.engine, self.tokenizer, self.eval_examples, self.pool,
                greedy=r.greedy, sampled=r.sampling, pass_k=self.spec.eval_pass_k, agent=r.agent,
            )  # fmt: skip

        if self.rollouts is None:
            return run()
        with self.rollouts.engine_lock:  # borrow the engine between two batches of the producer
            r.sync(self.actor.state.params, version=self.rollouts.trainer_version)
            self.rollouts.engine_borrowed()
            return run()

    def _eval_due(self) -> bool:
        return bool(self.eval_examples) and self.eval_schedule.due(self.step, self.wall_s)

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
