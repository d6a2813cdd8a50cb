"""The planner's view of a run config (`shape_from_config`) and the plan over cards (`plan`):
the configured run's memory and step time on each card, and which alternatives (LoRA on/off,
remat none/dots/full, fsdp over more devices) fit."""

from __future__ import annotations

import math

from ml_collections import ConfigDict

from mimojax import sharding as sh
from mimojax.config.loader import ConfigError, resolve_mesh_shape, sharding_overrides
from mimojax.models.architectures import architecture_config
from mimojax.plan import memory as pm
from mimojax.plan import run_shape as pl
from mimojax.plan import step_time as pt

ALT_DEVICES = (1, 2, 4, 8, 16, 32)
ALT_LORA_RANK = 64  # the adapter rank alternatives use when the config has LoRA off


def _bucket(n: int, multiple: int) -> int:
    return max(multiple, -(-int(n) // multiple) * multiple)  # as mimojax.rollout.batch.bucket


def response_len(cfg: ConfigDict) -> int:
    """The batch's response budget R (roles_settings.response_len; when the data files are not
    on this machine: the multi-turn budget only if the default agent loop is multi-turn)."""
    try:
        from mimojax.train.role_settings import response_len as from_roles

        return from_roles(cfg)
    except (OSError, ValueError):
        single = int(cfg.rollout.max_new_tokens)
        if cfg.rollout.agent.default != "single_turn":
            return max(single, int(cfg.rollout.agent.max_response_tokens))
        return single


def default_devices(cfg: ConfigDict) -> int:
    """Devices the config names: its fixed mesh sizes (a -1 axis counts 1) plus the rollout's."""
    actor, rollout = cfg.roles.actor.devices, cfg.roles.rollout.devices
    fixed = math.prod(int(cfg.mesh[a]) for a in sh.MESH_AXES if int(cfg.mesh[a]) != -1)
    return (len(actor) or fixed) + len(rollout)


def _estimator_traits(name: str):
    from mimojax.algos.registry import ADVANTAGE_ESTIMATORS

    return ADVANTAGE_ESTIMATORS.traits(name) if name in ADVANTAGE_ESTIMATORS else None


def shape_from_config(cfg: ConfigDict, devices: int | None = None) -> tuple[pl.RunShape, dict]:
    """(RunShape, info) for the run `cfg` describes on `devices` devices (default: the
    config's own count); info says where the architecture came from."""
    n = int(devices or default_devices(cfg))
    n_rollout = len(cfg.roles.rollout.devices)
    n_actor = len(cfg.roles.actor.devices) or n - n_rollout
    if n_actor < 1:
        raise ConfigError(f"roles.rollout.devices: takes all {n} devices; the actor has none")
    mesh = resolve_mesh_shape(cfg.mesh, n_actor)
    rollout_mesh = resolve_mesh_shape(cfg.roles.rollout.mesh, n_rollout) if n_rollout else {}
    m, a, t = cfg.model, cfg.algorithm, cfg.trainer
    try:
        arch, source = architecture_config(m.name_or_path)
    except (FileNotFoundError, ValueError) as e:
        raise ConfigError(f"model.name_or_path: {e}") from None
    arch = arch.replace(dtype=m.dtype, param_dtype=m.param_dtype, remat=m.remat,
                        attention_impl=m.attention_impl)  # fmt: skip
    r = response_len(cfg)
    traits = _estimator_traits(a.adv_estimator)
    on_policy = (
        t.ppo_epochs == 1
        and t.mini_batch_size == cfg.data.batch_size
        and not a.rollout_correction.bypass_mode
    )
    stats = traits is not None and traits.needs_logprob_stats
    rules = sh.get_rules(cfg.sharding.preset, sharding_overrides(cfg.sharding))
    shape = pl.RunShape(
        model=arch,
        lora_rank=int(m.lora.rank),
        lora_targets=pl.lora_targets(tuple(m.lora.targets)),
        mesh=tuple(mesh.items()),
        rules=tuple(rules.items()),
        micro_rows=int(t.micro_batch_size),
        micro_tokens=int(t.micro_batch_tokens),
        prompt_len=_bucket(cfg.data.max_prompt_length, 16),
        response_len=_bucket(r, 8),
        mini_samples=int(t.mini_batch_size) * int(cfg.rollout.n),
        step_samples=int(cfg.data.batch_size) * int(cfg.rollout.n),
        prompts=int(cfg.data.batch_size),
        ppo_epochs=int(t.ppo_epochs),
        logprob_chunk=int(m.logprob_chunk_size),
        slots=int(cfg.rollout.max_concurrent_decodes),
        cache_len=int(cfg.data.max_prompt_length) + r,
        reference=bool(a.use_kl_loss or a.use_kl_in_reward),
        critic=traits is not None and traits.needs_values,
        old_logprobs=stats or not on_policy or bool(a.use_kl_in_reward),
        rollout_devices=n_rollout,
        rollout_mesh=tuple(rollout_mesh.items()),
    )
    return shape, {"source": source, "devices": n}


def _gib(x: float) -> float:
    return round(x / pl.GIB, 2)


def with_choice(shape: pl.RunShape, *, lora: int, remat: str, devices: int) -> pl.RunShape:
    """`shape` with LoRA rank, remat policy and device count changed (fsdp takes the devices
    the config's tensor axis leaves; roles colocated)."""
    tensor = dict(shape.mesh)["tensor"]
    tensor = tensor if devices % tensor == 0 else 1
    mesh = (("data", 1), ("fsdp", devices // tensor), ("tensor", tensor))
    targets = shape.lora_targets or tuple(pl.LORA_LINEARS)
    return shape.replace(
        model=shape.model.replace(remat=remat), lora_rank=lora, lora_targets=targets,
        mesh=mesh, rollout_devices=0, rollout_mesh=(),
    )  # fmt: skip


def alternatives(shape: pl.RunShape, device_counts=ALT_DEVICES) -> list[dict]:
    """Peak GiB per device of each (LoRA, remat, devices) choice."""
    rank = shape.lora_rank or ALT_LORA_RANK
    rows = []
    for lora in (0, rank):
        for remat in ("none", "dots", "full"):
            for n in device_counts:
                peak = pm.memory(with_choice(shape, lora=lora, remat=remat, devices=n))["peak"]
                rows.append({"lora_rank": lora, "remat": remat, "devices": n,
                             "peak_gib": _gib(peak)})  # fmt: skip
    return rows


def plan(cfg: ConfigDict, devices: int | None = None, cards=tuple(pl.CARDS)) -> dict:
    """The plan of `cfg` on `devices` devices of each card: a JSON-able dict."""
    shape, info = shape_from_config(cfg, devices)
    mem = pm.memory(shape)
    w = pl.weights(shape)
    m = shape.model
    alts = alternatives(shape)
    out = {
        "model": {
            "name_or_path": cfg.model.name_or_path,
            "source": info["source"],
            "params_b": round(w.base_total / 1e9, 3),
            "lora_params_m": round(w.lora_total / 1e6, 2),
            "layers": m.num_layers,
            "hidden": m.hidden_size,
            "heads": m.num_heads,
            "kv_heads": m.num_kv_heads,
            "head_dim": m.head_dim,
            "mlp": m.intermediate_size,
            "vocab": m.vocab_size,
            "tied": m.tie_word_embeddings,
        },  # fmt: skip
        "devices": info["devices"],
        "mesh": dict(shape.mesh),
        "rollout_mesh": dict(shape.rollout_mesh) or None,
        "dtype": m.dtype,
        "param_dtype": m.param_dtype,
        "remat": m.remat,
        "attention_impl": m.attention_impl,
        "lora_rank": shape.lora_rank,
        "seq_len": shape.seq_len,
        "micro_batch_rows_per_device": pm.rows_tokens(shape)[0],
        "components_gib": {k: _gib(v) for k, v in mem["parts"].items()},
        "phases_gib": {k: _gib(v) for k, v in mem["phases"].items()},
        "resident_gib": _gib(sum(mem["resident"].values())),
        "peak_gib": _gib(mem["peak"]),
        "peak_phase": mem["peak_phase"],
        "rollout_devices_peak_gib": _gib(mem["rollout"]["peak"]) if mem["rollout"] else None,
        "cards": {},
    }
    for key in cards:
        card = pl.CARDS[key]
        usable = card.memory_gib * pl.HEADROOM
        times = pt.step_time(shape, card)
        out["cards"][key] = {
            "card": card.name,
            "memory_gib": card.memory_gib,
            "usable_gib": round(usable, 2),
            "fits": out["peak_gib"] <= usable,
            "step_time_s": {k: round(v, 3) for k, v in times.items()},
            "alternatives": [{**a, "fits": a["peak_gib"] <= usable} for a in alts],
        }
    return out
