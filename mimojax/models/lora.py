"""LoRA adapters for the decoder family: W x + (dropout(x) A B) alpha / r on named linears.

The adapters are `LoRAParam` variables on `model.layers`, stacked [num_layers, ...] like the base
weights and with logical axes so they shard: A `{name}_lora_a` [L, in..., r] (normal, std
1/sqrt(fan_in)) and B `{name}_lora_b` [L, r, out...] (zeros, so a fresh adapter is the base model
exactly). `nnx.state(model, LoRAParam)` is the trainable part; the base weights stay `nnx.Param`,
so everything that reads `nnx.Param` (the engine, HF export, the critic's trunk) sees the base,
or the merged weights from `merge_weights` / `merged_model`.

    model = add_lora(model, rank=16, alpha=32.0)
    graphdef, base, adapters = nnx.split(model, nnx.Param, LoRAParam)
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding

# Every linear of a decoder block -> how many leading axes of its weight (after `layers`) are
# inputs: o_proj contracts [heads, head_dim].
LINEARS = {
    "q_proj": 1,
    "k_proj": 1,
    "v_proj": 1,
    "o_proj": 2,
    "gate_proj": 1,
    "up_proj": 1,
    "down_proj": 1,
}
RANK_AXIS = "lora_rank"  # in no rules table, so it is replicated


class LoRAError(ValueError):
    """LoRA settings that do not fit the model (the message names the config key)."""


class LoRAParam(nnx.Variable):
    """A trainable adapter weight (A or B of one linear, all layers stacked)."""


class LoRAKey(nnx.Variable):
    """Per-layer dropout key data [num_layers, 2] (uint32), present only in a training forward."""


@dataclasses.dataclass(frozen=True)
class LoRASettings:
    """The static part of a model's adapters (held on `model.layers.lora`)."""

    rank: int
    alpha: float
    dropout: float = 0.0
    targets: tuple[str, ...] = tuple(LINEARS)  # linear names that carry an adapter
    seed: int = 0  # dropout masks are drawn from (seed, micro-batch tokens)

    @property
    def scale(self) -> float:
        return float(self.alpha) / int(self.rank)


def match_targets(patterns: Sequence[str]) -> tuple[str, ...]:
    """The linear names fully matched by any regex; a regex matching none is an error."""
    if isinstance(patterns, str):
        patterns = (patterns,)
    unmatched = [p for p in patterns if not any(re.fullmatch(p, n) for n in LINEARS)]
    if not patterns or unmatched:
        raise LoRAError(
            f"model.lora.targets: {list(unmatched or patterns)} match no linear of the model; "
            f"available: {', '.join(LINEARS)}"
        )
    return tuple(n for n in LINEARS if any(re.fullmatch(p, n) for p in patterns))


def _sharding_like(weight, axes, shape, mesh, rules):
    from mimojax import sharding as sh

    if mesh is None:
        s = getattr(weight, "sharding", None)
        if not isinstance(s, NamedSharding):
            return None
        mesh = s.mesh
    return NamedSharding(mesh, sh.logical_to_spec(axes, shape, mesh, rules or sh.get_rules()))


def add_lora(
    model,
    rank: int,
    alpha: float,
    dropout: float = 0.0,
    targets: Sequence[str] = (r".*_proj",),
    *,
    seed: int = 0,
    mesh=None,
    rules: Mapping | None = None,
):
    """Attaches adapters to `model` (a Decoder) in place and returns it.

    Each adapter is placed by its logical axes on `mesh` (default: the mesh of the base weight
    it adapts) under `rules`."""
    if rank < 1:
        raise LoRAError(f"model.lora.rank: must be >= 1 to add adapters, got {rank}")
    settings = LoRASettings(int(rank), float(alpha), float(dropout), match_targets(targets), seed)
    layers, key = model.layers, jax.random.key(seed)
    for i, name in enumerate(settings.targets):
        w = getattr(layers, name)
        n_in = LINEARS[name]
        axes = w.get_metadata().get("axes") or (None,) * w.ndim
        in_shape, out_shape = w.shape[1 : 1 + n_in], w.shape[1 + n_in :]
        a_shape, a_axes = (w.shape[0], *in_shape, rank), (axes[0], *axes[1 : 1 + n_in], RANK_AXIS)
        b_shape, b_axes = (w.shape[0], rank, *out_shape), (axes[0], RANK_AXIS, *axes[1 + n_in :])
        # Kaiming-like: x A keeps x's scale per rank direction; B = 0 starts at the base model.
        std = 1.0 / math.sqrt(math.prod(in_shape))
        a = std * jax.random.normal(jax.random.fold_in(key, i), a_shape, jnp.float32)
        b = jnp.zeros(b_shape, jnp.float32)
        for suffix, value, shape, ax in (("a", a, a_shape, a_axes), ("b", b, b_shape, b_axes)):
            value = value.astype(w.dtype)
            sharding = _sharding_like(w[...], ax, shape, mesh, rules)
            if sharding is not None:
                value = jax.device_put(value, sharding)
            setattr(layers, f"{name}_lora_{suffix}", LoRAParam(value, axes=ax))
    layers.lora = settings
    return model


def _dropout(x, rate: float, key_data, index: int):
    """Inverted dropout of `x` with its own mask per linear (`index`) of the layer."""
    key = jax.random.fold_in(jax.random.wrap_key_data(key_data), index)
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x / (1.0 - rate), jnp.zeros_like(x))


def lora_linear(x, p: Mapping, name: str, lora: LoRASettings | None, n_in: int = 1):
    """x @ W[name] (last `n_in` axes of x contracted), plus the adapter term when it has one:
    (dropout(x) @ A @ B) * alpha / r, dropout only when `p` holds a training `lora_key`."""
    w = p[name]
    lead, w_in = x.shape[: x.ndim - n_in], math.prod(w.shape[:n_in])
    x2 = x.reshape(-1, w_in)
    y2 = x2 @ w.reshape(w_in, -1)
    if lora is not None and name in lora.targets:
        a, b = p[f"{name}_lora_a"], p[f"{name}_lora_b"]
        if lora.dropout > 0.0 and "lora_key" in p:
            x2 = _dropout(x2, lora.dropout, p["lora_key"], LINEARS[name])
        rank = a.shape[-1]
        y2 = y2 + ((x2 @ a.reshape(w_in, rank)) @ b.reshape(rank, -1)) * lora.scale
    return y2.reshape(*lead, *w.shape[n_in:])


def merge_weights(base: Mapping, adapters: Mapping, scale: float) -> dict:
    """Pure-dict params `base` with W + A B * scale folded into every adapted linear (summed in
    float32, stored in W's dtype); same names and shapes as `base`."""
    layers = dict(base["layers"])
    for key, a in adapters["layers"].items():
        if not key.endswith("_lora_a"):
            continue
        name = key.removesuffix("_lora_a")
        w, b = layers[name], adapters["layers"][f"{name}_lora_b"]
        n_layers, rank = a.shape[0], a.shape[-1]
        a_LxIxR = a.reshape(n_layers, -1, rank).astype(jnp.float32)
        b_LxRxO = b.reshape(n_layers, rank, -1).astype(jnp.float32)
        delta_LxIxO = jnp.einsum("lir,lro->lio", a_LxIxR, b_LxRxO, precision="highest")
        layers[name] = (w.astype(jnp.float32) + scale * delta_LxIxO.reshape(w.shape)).astype(
            w.dtype
        )
    return {**base, "layers": layers}


def split_lora(model):
    """(graphdef, base pure dict, adapters pure dict) of a model with adapters."""
    graphdef, base, adapters = nnx.split(model, nnx.Param, LoRAParam)
    return graphdef, nnx.to_pure_dict(base), nnx.to_pure_dict(adapters)


def merged_model(model):
    """A plain model (no adapters, same class and config) whose weights are the merged ones."""
    _, base, adapters = split_lora(model)
    merged = merge_weights(base, adapters, model.layers.lora.scale)
    plain = nnx.eval_shape(lambda: type(model)(model.config, rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(plain)
    nnx.replace_by_pure_dict(state, merged)
    return nnx.merge(graphdef, state)


def dropout_key_data(seed: int, ids_BxT, num_layers: int):
    """Per-layer dropout key data [num_layers, 2] from the seed and a checksum of the tokens, so
    a resumed run draws the same masks for the same micro-batch."""
    ids = jnp.asarray(ids_BxT).astype(jnp.uint32)
    weights = jnp.arange(1, ids.size + 1, dtype=jnp.uint32).reshape(ids.shape)
    checksum = jnp.sum(ids * weights, dtype=jnp.uint32)
    key = jax.random.fold_in(jax.random.key(seed), checksum)
    return jax.random.key_data(jax.random.split(key, num_layers))


def lora_model(graphdef, base, adapters, ids_BxT=None):
    """The model of `graphdef` over frozen `base` and `adapters` (pure dicts); given the
    micro-batch's token ids it is a training forward, with the adapters' dropout on."""
    model = nnx.merge(graphdef, base, adapters)
    lora = model.layers.lora
    if ids_BxT is not None and lora.dropout > 0.0:
        keys = dropout_key_data(lora.seed, ids_BxT, model.config.num_layers)
        model.layers.lora_key = LoRAKey(keys)
    return model


def num_params(tree) -> int:
    """Total element count of a pytree of arrays."""
    return int(sum(np.prod(x.shape) for x in jax.tree.leaves(tree)))
