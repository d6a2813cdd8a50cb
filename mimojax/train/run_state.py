"""What a checkpoint of a running `Trainer` holds, and putting it back (bitwise resume).

Arrays (actor and critic train states, the KL coefficient) go through orbax; the rest is the JSON
meta: data position, policy version, wall time, token count, evaluations done, restarts, the
entropy controller and, in off-policy modes, the last batch the trainer consumed.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mimojax.distributed import replicated
from mimojax.observe.metrics import restart_stats


def array_state(t) -> dict:
    """The trainer's arrays, as the checkpoint stores them (also the restore template)."""
    coef = replicated(np.float32(t.kl_ctrl.coef), t.actor.mesh)  # multi-host: global
    state = {"actor": t.actor.state._asdict(), "kl_coef": coef}
    if t.critic is not None:
        state["critic"] = t.critic.state._asdict()
    return state


def checkpoint_meta(t) -> dict:
    """The JSON half of a checkpoint of trainer `t` after its step `t.step`."""
    version, data = int(t.engine.policy_version), None
    if t.spec.mode != "sync":  # the producer's engine runs behind; buffered batches redo
        version = t.rollouts.trainer_version if t.rollouts else version
        data = t._consumed[1] if t._consumed else None
    meta = {
        "model": t.roles.fingerprint,
        "data": data or t.data_iter.get_state(),
        "policy_version": version,
        "wall_s": t.wall_s,
        "total_tokens": int(t.total_tokens),
        "evals_done_at_minutes": sorted(t.eval_schedule.done_at_minutes),
        "restarts": t.restarts,
        "entropy_ctrl": t.entropy_ctrl.state(),
    }
    if t.spec.mode != "sync":
        meta["async_batches"] = t._consumed[0] if t._consumed else t.step
        if t._consumed and t._consumed[2] is not None:  # stream flow's done samples
            meta["async_done"] = t._consumed[2]
    return meta


def restore_run(t) -> bool:
    """Puts the newest readable checkpoint back into trainer `t`; False when there is none."""
    found = t.checkpointer.restore_latest(array_state(t))
    if found is None:
        return False
    _, state, meta = found
    t.actor.state = type(t.actor.state)(**state["actor"])
    if t.critic is not None:
        t.critic.state = type(t.critic.state)(**state["critic"])
    t.kl_ctrl = dataclasses.replace(t.kl_ctrl, coef=float(state["kl_coef"]))
    t.entropy_ctrl = t.entropy_ctrl.restored(meta.get("entropy_ctrl"))
    t.data_iter.set_state(meta["data"])
    if "async_batches" in meta:
        t._consumed = (int(meta["async_batches"]), meta["data"], meta.get("async_done"))
    t.step, t.wall_s = int(meta["step"]), float(meta["wall_s"])
    t.total_tokens = int(meta["total_tokens"])
    t.eval_schedule.done_at_minutes = set(meta.get("evals_done_at_minutes", []))
    t.restarts = restart_stats(t.workdir, t.step, t.wall_s, meta.get("restarts"))
    t.roles.rollout.sync(t.actor.state.params, version=int(meta["policy_version"]))
    return True
