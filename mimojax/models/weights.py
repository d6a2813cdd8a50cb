"""Builds a model from checkpoint tensors, placing each one straight into its sharding."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from mimojax import sharding as sh
from mimojax.models.config import ModelConfig
from mimojax.models.decoder import Decoder
from mimojax.models.hf_mapping import Rule, WeightLoadError, convert, rules_for, to_hf


def _place(host_array: np.ndarray, sharding: jax.sharding.Sharding) -> jax.Array:
    # Each device receives only its own slice of the (single) host copy.
    return jax.make_array_from_callback(host_array.shape, sharding, lambda idx: host_array[idx])


def _load_param(rule: Rule, cfg: ModelConfig, read, sharding: NamedSharding, dtype) -> jax.Array:
    """One parameter, read and placed; per-layer ones stream one layer through host memory.

    Each layer is placed into the parameter's sharding minus its leading `layers` axis, and
    the layers are stacked on the devices, so host memory peaks at one layer's tensor.
    """
    if not rule.per_layer:
        return _place(convert(rule, cfg, read).astype(dtype), sharding)
    # The parameter's spec minus its leading `layers` entry (specs may omit trailing Nones).
    layer_sharding = NamedSharding(sharding.mesh, PartitionSpec(*tuple(sharding.spec)[1:]))
    layers = [
        _place(convert(rule, cfg, read, l).astype(dtype), layer_sharding)
        for l in range(cfg.num_layers)
    ]
    return jax.jit(lambda *xs: jnp.stack(xs), out_shardings=sharding)(*layers)


def build_model(
    cfg: ModelConfig,
    read: Callable[[str], np.ndarray],
    mesh: Mesh | None = None,
    rules: Mapping | None = None,
) -> Decoder:
    """A Decoder whose parameters come from HF-named tensors returned by `read(name)`.

    The model skeleton is abstract (nnx.eval_shape); each tensor is sliced directly into its
    parameter's sharding on `mesh` (default: the first device, unsharded), and the host holds
    at most one layer's tensor at a time.
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
        value = _load_param(rule, cfg, read, flat_shardings[rule.ours], dtype)
        if value.shape != var.shape:
            raise WeightLoadError(
                f"parameter {'.'.join(rule.ours)}: built {value.shape}, model expects {var.shape}"
            )
        var.set_value(value)
        missing.discard(rule.ours)
    if missing:
        raise WeightLoadError(
            f"no checkpoint tensor maps to {sorted('.'.join(p) for p in missing)}"
        )
    return nnx.merge(graphdef, abstract_state)


def export_tensors(model: Decoder) -> Iterator[tuple[str, np.ndarray]]:
    """The model's parameters as (HF name, host array), one layer's tensor at a time.

    Per-layer parameters are sliced on the devices before the transfer, so host memory holds
    one layer's tensor, not a whole stacked parameter.
    """
    cfg = model.config
    flat = {path: v for path, v in nnx.to_flat_state(nnx.state(model, nnx.Param))}
    for rule in rules_for(cfg):
        value = flat[rule.ours][...]
        if not rule.per_layer:
            yield to_hf(rule, cfg, np.asarray(jax.device_get(value)))
            continue
        for l in range(cfg.num_layers):
            yield to_hf(rule, cfg, np.asarray(jax.device_get(value[l])), layer=l)
