"""LoRA in the roles (`model.lora.*`): adapters on the actor's model, its frozen base, the merge.

With `model.lora.rank > 0` the actor trains only the adapters (its TrainState, optimizer state
and checkpoints hold nothing else); the base weights are loaded from `model.name_or_path` at
every start (a resume included) and shared, uncopied, by the actor's passes and the reference,
which is the base model itself (the adapters off). The engine receives W + A B alpha / r at each
sync, so it runs the plain decoder.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

import jax
from flax import nnx
from jax.sharding import Mesh
from ml_collections import ConfigDict

from mimojax.config.loader import ConfigError
from mimojax.models.lora import LoRAError, LoRASettings, add_lora, merge_weights, split_lora


@dataclasses.dataclass
class LoRAPolicy:
    """The actor's model split into frozen base and trainable adapters."""

    settings: LoRASettings
    graphdef: Any  # the model with adapters
    base_graphdef: Any  # the same model without them (the reference pass)
    frozen: dict  # the base weights (pure dict): read by every pass, never trained or donated
    adapters: dict  # the initial adapters (pure dict): the actor's trainable params
    merge: Callable[[dict], dict]  # adapters -> base-shaped merged weights, on the base's devices

    @property
    def fingerprint(self) -> str:
        """What a checkpoint's adapters depend on (compared on resume)."""
        s = self.settings
        return f"rank={s.rank} alpha={s.alpha} targets={','.join(s.targets)}"


def attach_lora(cfg: ConfigDict, model, mesh: Mesh, rules: Mapping) -> LoRAPolicy | None:
    """Adds `model.lora.*` adapters to `model` (in place) on `mesh`; None when rank is 0."""
    lo = cfg.model.lora
    if int(lo.rank) == 0:
        return None
    base_graphdef, _ = nnx.split(model)
    try:
        add_lora(
            model, int(lo.rank), float(lo.alpha), float(lo.dropout), lo.targets,
            seed=int(cfg.trainer.seed), mesh=mesh, rules=rules,
        )  # fmt: skip
    except LoRAError as e:
        raise ConfigError(str(e)) from None
    graphdef, frozen, adapters = split_lora(model)
    settings = model.layers.lora
    shardings = jax.tree.map(lambda x: x.sharding, frozen)
    merge = jax.jit(functools.partial(merge_weights, scale=settings.scale), out_shardings=shardings)
    return LoRAPolicy(
        settings, graphdef, base_graphdef, frozen, adapters, functools.partial(merge, frozen)
    )
