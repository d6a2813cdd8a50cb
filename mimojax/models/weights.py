"""Builds a model from checkpoint tensors, placing each one straight into its sharding."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from mimojax import sharding as sh
from mimojax.models.config import ModelConfig
from mimojax.models.decoder import Decoder
from mimojax.models.hf_mapping import WeightLoadError, assemble, rules_for, split_to_hf


def _place(host_array: np.ndarray, sharding: jax.sharding.Sharding) -> jax.Array:
    # Each device receives only its own slice of the (single) host copy.
    return jax.make_array_from_callback(host_array.shape, sharding, lambda idx: host_array[idx])


def build_model(
    cfg: ModelConfig,
    read: Callable[[str], np.ndarray],
    mesh: Mesh | None = None,
    rules: Mapping | None = None,
) -> Decoder:
    """A Decoder whose parameters come from HF-named tensors returned by `read(name)`.

    The model skeleton is abstract (nnx.eval_shape): one host copy of each parameter exists at a
    time, and it is sliced directly into the parameter's sharding on `mesh` (default: the
    first device, unsharded).
    """
    graphdef, abstract_state = nnx.split(nnx.eval_shape(lambda: Decoder(cfg, rngs=nnx.Rngs(0))))
    if mesh is None:
        mesh = Mesh(np.array(jax.devices()[:1]).reshape(1, 1, 1), sh.MESH_AXES)
    rules = rules or sh.get_rules("fsdp")
    shardings = sh.param_shardings(abstract_state, mesh, rules)
    flat_state = dict(nnx.to_flat_state(abstract_state))
    flat_shardings = dict(nnx.to_flat_state(shardings))
    missing = set(flat_state)
    dtype = jnp.dtype(cfg.param_dtype)
    for rule in rules_for(cfg):
        var = flat_state[rule.ours]
        host = assemble(rule, cfg, read).astype(dtype)
        if host.shape != var.shape:
            raise WeightLoadError(
                f"parameter {'.'.join(rule.ours)}: built {host.shape}, model expects {var.shape}"
            )
        var.set_value(_place(host, flat_shardings[rule.ours]))
        missing.discard(rule.ours)
    if missing:
        raise WeightLoadError(
            f"no checkpoint tensor maps to {sorted('.'.join(p) for p in missing)}"
        )
    return nnx.merge(graphdef, abstract_state)


def export_tensors(model: Decoder) -> dict[str, np.ndarray]:
    """The model's parameters as HF-named host arrays (gathered from any sharding)."""
    cfg = model.config
    flat = {path: v for path, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
    tensors: dict[str, np.ndarray] = {}
    for rule in rules_for(cfg):
        tensors.update(split_to_hf(rule, cfg, np.asarray(jax.device_get(flat[rule.ours][...]))))
    return tensors
