"""The planner checked against XLA: compile the real jitted actor update of a config, abstractly
(no weights are loaded or allocated), and read `memory_analysis()`.

    from mimojax.plan.xla_check import compare
    compare(load_config("configs/grpo_tiny.py"))  # {"xla_bytes": ..., "planner_bytes": ...}

The update is the one `mimojax.train.roles.build_roles` builds (make_actor_update with the config's
optimizer and loss settings, state sharded by the config's rules over its mesh), lowered with
ShapeDtypeStructs for the state and for one mini-batch stack of `trainer.micro_batch_size`-row
micro-batches at the planner's padded length, on the current backend's devices.
"""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import NamedSharding, PartitionSpec
from ml_collections import ConfigDict

from mimojax import sharding as sh
from mimojax.algos.optimizer import init_state, make_optimizer
from mimojax.models.decoder import Decoder
from mimojax.plan import memory as pm
from mimojax.plan.from_config import shape_from_config
from mimojax.rollout.batch import TrainBatch
from mimojax.train.role_settings import actor_hparams_from_config, optimizer_settings
from mimojax.train.step import Counts, make_actor_update


def _abstract(tree, shardings):
    return jax.tree.map(
        lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s), tree, shardings
    )


def _like_params(abstract_state, params, replicated):
    """Shardings of a TrainState as mimojax.train.roles makes it: init_state runs eagerly, so each
    optimizer moment (zeros_like of a parameter) keeps that parameter's sharding; counters are
    replicated. (A jitted init would let XLA pick, and XLA:CPU replicates the moments.)"""
    by_path = {
        jax.tree_util.keystr(path): x.sharding
        for path, x in jax.tree_util.tree_flatten_with_path(params)[0]
    }

    def pick(path, x):
        key = jax.tree_util.keystr(path)
        for suffix, sharding in by_path.items():
            if key.endswith(suffix) and len(sharding.spec) <= len(x.shape):
                return sharding
        return replicated

    return jax.tree_util.tree_map_with_path(pick, abstract_state)


def xla_actor_update(cfg: ConfigDict, devices=None) -> dict:
    """memory_analysis() of the config's jitted actor update on `devices` (default: all),
    as {"argument", "output", "alias", "temp", "total"} bytes per device."""
    devices = list(devices if devices is not None else jax.devices())
    shape, _ = shape_from_config(cfg, len(devices))
    if shape.lora_rank > 0:
        raise NotImplementedError("planner_xla: LoRA updates are not compiled here yet")
    mesh = sh.make_mesh(dict(shape.mesh), devices)
    rules = dict(shape.rules)
    graphdef, state = nnx.split(nnx.eval_shape(lambda: Decoder(shape.model, rngs=nnx.Rngs(0))))
    params = _abstract(nnx.to_pure_dict(state),
                       nnx.to_pure_dict(sh.param_shardings(state, mesh, rules)))  # fmt: skip
    optimizer = make_optimizer(optimizer_settings(cfg.optimizer), int(cfg.trainer.total_steps))
    replicated = NamedSharding(mesh, PartitionSpec())
    abstract_state = jax.eval_shape(lambda p: init_state(p, optimizer), params)
    state_sh = _like_params(abstract_state, params, replicated)
    train_state = _abstract(abstract_state, state_sh)
    hp = actor_hparams_from_config(cfg, on_policy=True)
    update = make_actor_update(
        graphdef=graphdef, hp=hp, optimizer=optimizer, state_shardings=state_sh
    )
    micro = shape.micro_rows
    stack = (shape.mini_samples // micro, micro, shape.seq_len)
    rows = NamedSharding(mesh, PartitionSpec(None, rules.get("batch")))
    leaf = lambda dt: jax.ShapeDtypeStruct(stack, dt, sharding=rows)
    batch = TrainBatch(
        leaf(jnp.int32), leaf(jnp.int32), leaf(jnp.int32), leaf(jnp.float32), leaf(jnp.float32),
        prompt_len=shape.prompt_len,
    )  # fmt: skip
    scalar = jax.ShapeDtypeStruct((), jnp.float32, sharding=replicated)
    args = [train_state, batch, Counts(scalar, scalar)]
    if len(inspect.signature(update.fused).parameters) == 4:
        args.append(None)  # LoRA's frozen base weights: none here
    ma = update.fused.lower(*args).compile().memory_analysis()
    out = {
        "argument": ma.argument_size_in_bytes,
        "output": ma.output_size_in_bytes,
        "alias": ma.alias_size_in_bytes,
        "temp": ma.temp_size_in_bytes,
    }
    out["total"] = out["argument"] + out["output"] - out["alias"] + out["temp"]
    return out


def compare(cfg: ConfigDict, devices=None) -> dict:
    """The planner's actor-update bytes next to XLA's, and the relative error."""
    devices = list(devices if devices is not None else jax.devices())
    shape, _ = shape_from_config(cfg, len(devices))
    xla = xla_actor_update(cfg, devices)
    planned = pm.actor_update_bytes(shape)
    return {
        "xla_bytes": xla["total"],
        "planner_bytes": planned,
        "rel_error": planned / xla["total"] - 1.0,
        "xla": xla,
    }
