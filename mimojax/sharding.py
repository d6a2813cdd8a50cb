"""Meshes from config, the logical-axis rules table, sharded init and resharding between meshes.

Parameters name their axes logically (`vocab`, `embed`, `heads`, `kv_heads`, `head_dim`, `mlp`,
`layers`); one rules table per preset maps each logical name to a mesh axis (`data`, `fsdp`,
`tensor`) or to None (replicated). A dimension that the mesh axis does not divide evenly is
replicated instead (SmolLM2's 3 KV heads on a 2-way tensor axis, say), never padded.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "tensor")

# logical axis -> mesh axis (or None). `batch` is the activation batch axis.
RULES_PRESETS: dict[str, dict[str, str | tuple[str, ...] | None]] = {
    "fsdp": {
        "batch": ("data", "fsdp"),
        "vocab": None,
        "embed": "fsdp",
        "heads": None,
        "kv_heads": None,
        "head_dim": None,
        "mlp": None,
        "layers": None,
    },
    "fsdp_tensor": {
        "batch": ("data", "fsdp"),
        "vocab": "tensor",
        "embed": "fsdp",
        "heads": "tensor",
        "kv_heads": "tensor",
        "head_dim": None,
        "mlp": "tensor",
        "layers": None,
    },
}


def get_rules(preset: str = "fsdp", overrides: Mapping | None = None) -> dict:
    """The rules table for a preset (config key sharding.preset), with optional overrides."""
    if preset not in RULES_PRESETS:
        raise ValueError(
            f"unknown sharding preset {preset!r} (sharding.preset); "
            f"available: {', '.join(RULES_PRESETS)}"
        )
    rules = dict(RULES_PRESETS[preset])
    rules.update(dict(overrides or {}))
    return rules


def mesh_shape(mesh_cfg: Mapping, num_devices: int) -> tuple[int, int, int]:
    """Resolves (data, fsdp, tensor) sizes; at most one may be -1 (= the remaining devices).

    Errors name the config keys (`mesh.data`, ...) so they read well from `validate()` too.
    """
    sizes = {axis: mesh_cfg.get(axis, 1) for axis in MESH_AXES}
    bad = [f"mesh.{a}" for a, v in sizes.items() if not isinstance(v, int) or (v < 1 and v != -1)]
    if bad:
        raise ValueError(f"{', '.join(bad)}: mesh axis sizes must be >= 1, or -1 for the rest")
    free = [a for a, v in sizes.items() if v == -1]
    if len(free) > 1:
        names = ", ".join(f"mesh.{a}" for a in free)
        raise ValueError(f"{names}: at most one mesh axis may be -1")
    fixed = math.prod(v for v in sizes.values() if v != -1)
    names = " * ".join(f"mesh.{a}" for a, v in sizes.items() if v != -1)
    if free:
        if num_devices % fixed:
            raise ValueError(
                f"{names} = {fixed} does not divide the {num_devices} devices "
                f"(mesh.{free[0]} = -1 takes the rest)"
            )
        sizes[free[0]] = num_devices // fixed
    elif fixed != num_devices:
        raise ValueError(f"{names} = {fixed}, but there are {num_devices} devices")
    return tuple(sizes[a] for a in MESH_AXES)


def make_mesh(mesh_cfg: Mapping | None = None, devices: Sequence | None = None) -> Mesh:
    """A ("data", "fsdp", "tensor") mesh over `devices` (default: all) from config sizes."""
    devices = list(devices if devices is not None else jax.devices())
    shape = mesh_shape(dict(mesh_cfg or {"fsdp": -1}), len(devices))
    return Mesh(np.array(devices).reshape(shape), MESH_AXES)


def _axis_size(mesh: Mesh, mesh_axis) -> int:
    names = mesh_axis if isinstance(mesh_axis, tuple) else (mesh_axis,)
    return int(np.prod([mesh.shape[n] for n in names]))


def logical_to_spec(axes: Sequence[str | None], shape: Sequence[int], mesh: Mesh, rules: Mapping):
    """PartitionSpec for an array with these logical axes; uneven or reused mesh axes replicate."""
    spec, used = [], set()
    for name, dim in zip(axes, shape):
        mesh_axis = rules.get(name) if name is not None else None
        flat = (
            ()
            if mesh_axis is None
            else (mesh_axis if isinstance(mesh_axis, tuple) else (mesh_axis,))
        )
        if not flat or used & set(flat) or dim % _axis_size(mesh, mesh_axis):
            spec.append(None)
            continue
        used |= set(flat)
        spec.append(mesh_axis)
    return PartitionSpec(*spec)


def param_shardings(abstract_state: nnx.State, mesh: Mesh, rules: Mapping) -> nnx.State:
    """A state of NamedShardings, one per parameter, from each parameter's `axes` metadata."""

    def one(v):
        axes = v.get_metadata().get("axes") or (None,) * len(v.shape)
        return NamedSharding(mesh, logical_to_spec(axes, v.shape, mesh, rules))

    return jax.tree.map(one, abstract_state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def create_sharded(factory: Callable[[], nnx.Module], mesh: Mesh, rules: Mapping) -> nnx.Module:
    """Builds `factory()` with each parameter created directly in its sharding.

    The shapes come from `nnx.eval_shape`, and initialisation is one jit whose out_shardings
    are the rules', so no parameter ever exists unsharded on one device.
    """
    graphdef, abstract_state = nnx.split(nnx.eval_shape(factory))
    shardings = param_shardings(abstract_state, mesh, rules)
    state = jax.jit(lambda: nnx.state(factory()), out_shardings=shardings)()
    return nnx.merge(graphdef, state)


def shard_module(module: nnx.Module, mesh: Mesh, rules: Mapping) -> nnx.Module:
    """Moves an existing module's parameters onto `mesh` per the rules (in place; returned)."""
    state = nnx.state(module)
    nnx.update(module, jax.device_put(state, param_shardings(state, mesh, rules)))
    return module


def reshard(tree, target_shardings):
    """Moves a pytree of arrays to new shardings, e.g. from the actor mesh to the rollout mesh.

    `target_shardings` is a matching pytree of Shardings (or one Sharding for every leaf).
    jax.device_put does the cross-mesh transfer without gathering onto one host.
    """
    if isinstance(target_shardings, jax.sharding.Sharding):
        return jax.tree.map(lambda x: jax.device_put(x, target_shardings), tree)
    return jax.device_put(tree, target_shardings)


def batch_sharding(mesh: Mesh, rules: Mapping, ndim: int = 2) -> NamedSharding:
    """Sharding for a [batch, ...] activation array: batch over the rules' `batch` axes."""
    return NamedSharding(mesh, PartitionSpec(rules.get("batch"), *([None] * (ndim - 1))))
