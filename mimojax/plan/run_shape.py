"""`mimojax plan`'s model of a run: cards, the run's shape, and its weights per device.

The planner sizes a run before anyone rents the cards. This module holds what both halves share:
the cards (`CARDS`), the plain-values view of a run (`RunShape`, built from a config by
mimojax/plan/from_config.py) and the weight sets on one device (`weights`): the decoder's weights
in `model.param_dtype`, sharded by the config's logical-axis rules over its mesh (the real rules,
`mimojax.sharding.logical_to_spec`: `fsdp` shards `embed`; `tensor` shards heads / kv heads /
mlp / vocab under `fsdp_tensor`; `data` replicates), and with LoRA (`model.lora.rank` > 0) the
adapters A [L, in, r] and B [L, r, out] on each targeted linear, as mimojax/models/lora.py
makes them. Memory per phase is mimojax/plan/memory.py, step time mimojax/plan/step_time.py.

A plan "fits" a card when its peak is at most `HEADROOM` (90%) of the memory the card reports
(the rest: CUDA context, cuBLAS / cuDNN workspaces, fragmentation); the launch scripts let XLA
take 95% of it (XLA_PYTHON_CLIENT_MEM_FRACTION=0.95). The actor update's memory is checked
against XLA's own buffer assignment within `XLA_TOLERANCE` (tests/plan/test_planner.py).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from types import SimpleNamespace

from mimojax import sharding as sh
from mimojax.models.config import ModelConfig

GIB = 1024**3
HEADROOM = 0.90  # a plan fits when its peak is at most this fraction of the card's memory
XLA_TOLERANCE = 0.25  # |planner - XLA| / XLA for the actor update, on the checked configs

LORA_LINEARS = {  # as mimojax.models.lora: linear -> leading axes of its weight that are inputs
    "q_proj": 1, "k_proj": 1, "v_proj": 1, "o_proj": 2, "gate_proj": 1, "up_proj": 1,
    "down_proj": 1,
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Card:
    """An accelerator: memory as the driver reports it, dense rates, bandwidths."""

    name: str
    memory_gib: float
    bf16_tflops: float  # dense, fp32 accumulation
    tf32_tflops: float  # float32 matmuls (XLA's default precision on GPU uses TF32)
    hbm_tb_s: float
    link_gb_s: float  # per direction, between cards of one node
    node_link_gb_s: float  # per direction, per card, between nodes
    per_node: int = 8

    def tflops(self, dtype: str) -> float:
        return self.bf16_tflops if dtype == "bfloat16" else self.tf32_tflops


CARDS = {
    "24GB": Card("RTX 4090 (24 GB)", 23.99, 165.2, 82.6, 1.008, 25.0, 12.5),
    "80GB": Card("H100 SXM (80 GB)", 79.6, 989.0, 494.5, 3.35, 450.0, 50.0),
    "141GB": Card("H200 (141 GB)", 140.4, 989.0, 494.5, 4.8, 450.0, 50.0),
}


@dataclasses.dataclass(frozen=True)
class RunShape:
    """Everything the estimate reads from a run config, as plain values."""

    model: ModelConfig  # with the run's dtype, param_dtype, remat, attention_impl
    lora_rank: int
    lora_targets: tuple[str, ...]
    mesh: tuple[tuple[str, int], ...]  # (("data", d), ("fsdp", f), ("tensor", t))
    rules: tuple[tuple[str, object], ...]
    micro_rows: int  # samples per forward/backward pass, all devices
    micro_tokens: int  # > 0: token-budget micro-batches of this many tokens instead
    prompt_len: int  # P of the update's batch (data.max_prompt_length, bucketed)
    response_len: int  # R
    mini_samples: int
    step_samples: int
    prompts: int
    ppo_epochs: int
    logprob_chunk: int  # 0 = one chunk
    slots: int
    cache_len: int
    reference: bool
    critic: bool
    old_logprobs: bool
    rollout_devices: int = 0  # > 0: the engine on its own devices (split roles)
    rollout_mesh: tuple[tuple[str, int], ...] = ()

    @property
    def seq_len(self) -> int:
        return self.prompt_len + self.response_len

    @property
    def devices(self) -> int:
        return math.prod(dict(self.mesh).values())

    def replace(self, **kw) -> RunShape:
        return dataclasses.replace(self, **kw)


# ---------------------------------------------------------------- weights


@functools.lru_cache(maxsize=64)
def _param_table(cfg: ModelConfig) -> tuple[tuple[str, tuple[int, ...], tuple], ...]:
    """(name, shape, logical axes) of every decoder weight, from the decoder itself (abstract)."""
    import jax
    from flax import nnx

    from mimojax.models.decoder import Decoder

    state = nnx.state(nnx.eval_shape(lambda: Decoder(cfg, rngs=nnx.Rngs(0))))
    out = []
    for path, v in jax.tree_util.tree_flatten_with_path(state, is_leaf=_is_var)[0]:
        name = "/".join(str(getattr(k, "key", k)) for k in path)
        axes = v.get_metadata().get("axes") or (None,) * len(v.shape)
        out.append((name, tuple(v.shape), tuple(axes)))
    return tuple(out)


def _is_var(x) -> bool:
    from flax import nnx

    return isinstance(x, nnx.Variable)


def _hashable(cfg: ModelConfig) -> ModelConfig:
    eos = cfg.eos_token_id
    return cfg.replace(eos_token_id=tuple(eos) if isinstance(eos, list) else eos)


def param_table(cfg: ModelConfig):
    """(name, shape, axes) of the decoder's weights (dtype and remat do not change them)."""
    return _param_table(_hashable(cfg.replace(dtype="float32", param_dtype="float32")))


def _shard_elems(shape, axes, mesh: dict, rules: dict) -> int:
    """Elements of one device's shard under the rules (uneven dims replicate, as sharding does)."""
    spec = sh.logical_to_spec(axes, shape, SimpleNamespace(shape=mesh), rules)
    n = 1
    for dim, ax in zip(shape, tuple(spec) + (None,) * len(shape)):
        names = () if ax is None else (ax if isinstance(ax, tuple) else (ax,))
        n *= dim // math.prod(mesh[a] for a in names)
    return n


def _lora_table(cfg: ModelConfig, rank: int, targets: tuple[str, ...]):
    """Adapters A [L, in..., r] and B [L, r, out...] of each targeted linear, with their axes."""
    out = []
    for name, shape, axes in param_table(cfg):
        linear = name.rsplit("/", 1)[-1]
        if not name.startswith("layers/") or linear not in targets:
            continue
        k = LORA_LINEARS[linear]
        out.append((f"{name}_lora_a", (shape[0], *shape[1 : 1 + k], rank),
                    (axes[0], *axes[1 : 1 + k], "lora_rank")))  # fmt: skip
        out.append((f"{name}_lora_b", (shape[0], rank, *shape[1 + k :]),
                    (axes[0], "lora_rank", *axes[1 + k :])))  # fmt: skip
    return out


def lora_targets(patterns) -> tuple[str, ...]:
    """Linear names matched by `model.lora.targets` regexes (as mimojax.models.lora does)."""
    if isinstance(patterns, str):
        patterns = (patterns,)
    return tuple(n for n in LORA_LINEARS if any(re.fullmatch(p, n) for p in patterns))


def _bytes(dtype: str) -> int:
    return 2 if dtype == "bfloat16" else 4


@dataclasses.dataclass(frozen=True)
class Weights:
    """Per-device element counts (and totals) of a run's weight sets."""

    base: int  # the decoder's weights on one device
    base_total: int
    lora: int  # adapters on one device
    lora_total: int
    embed: int  # the (tied) embedding on one device
    critic: int  # the value model's weights on one device
    lm_head_total: int
    lm_head: int = 0  # the untied LM head on one device


def weights(shape: RunShape, mesh: dict | None = None) -> Weights:
    """Per-device and total element counts of the run's weights on `mesh` (default: its own)."""
    mesh = dict(mesh or shape.mesh)
    rules = dict(shape.rules)
    base = base_total = embed = lm_head = lm_head_total = 0
    for name, shp, axes in param_table(shape.model):
        n = _shard_elems(shp, axes, mesh, rules)
        base += n
        base_total += math.prod(shp)
        if name == "embed":
            embed = n
        if name == "lm_head":
            lm_head, lm_head_total = n, math.prod(shp)
    lora = lora_total = 0
    if shape.lora_rank > 0:
        for _, shp, axes in _lora_table(shape.model, shape.lora_rank, shape.lora_targets):
            lora += _shard_elems(shp, axes, mesh, rules)
            lora_total += math.prod(shp)
    critic = base - lm_head + shape.model.hidden_size + 1
    return Weights(base, base_total, lora, lora_total, embed, critic, lm_head_total, lm_head)
