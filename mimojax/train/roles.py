"""The roles of an RL run, built from a run config: actor, reference, critic, rollout, reward.

Roles are placements on meshes, not processes (DESIGN.md). The actor owns the trainable policy
and its optimiser on the actor mesh; the reference (the frozen starting policy) and the critic
share that mesh. The rollout role is the engine on its own mesh: the actor's devices by default
(colocated, time-shared), or a disjoint device set given by `roles.rollout.devices`, in which
case every weight sync reshards the actor's parameters onto the rollout mesh. The reward role is
the grader process pool.

This module and the CLI are the only readers of a run config: below it, models, engine, algos,
kernels and sharding take plain values; above it, the trainer takes the built `Run`.

    run = build_run(load_config("configs/grpo_tiny.py"), "/tmp/run")
    run.roles.rollout.engine, run.roles.actor.state.params, run.spec.total_steps
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh
from ml_collections import ConfigDict

from mimojax import sharding as sh
from mimojax.algos.optimizer import TrainState, init_state, make_optimizer, make_schedule
from mimojax.algos.registry import ADVANTAGE_ESTIMATORS
from mimojax.checkpoint.fingerprint import check_fingerprint, model_fingerprint
from mimojax.checkpoint.manager import Checkpointer
from mimojax.config.loader import ConfigError, sharding_overrides, validate
from mimojax.data.prompts import PromptDataset
from mimojax.distributed import initialize_from_env, is_main_process
from mimojax.engine.engine import EngineError, JaxEngine
from mimojax.engine.sampling import SamplingError, SamplingParams
from mimojax.models.decoder import ValueModel
from mimojax.models.loader import load_model
from mimojax.rewards.pool import RewardPool
from mimojax.rollout.agent_loop import rollout as agent_rollout
from mimojax.rollout.agents import AgentSettings
from mimojax.sandbox.bwrap import ALLOW_UNSANDBOXED_ENV
from mimojax.train.lora_roles import attach_lora
from mimojax.train.role_settings import (
    LoopSpec,
    actor_hparams_from_config,
    agent_settings,
    loop_spec,
    optimizer_settings,
    prompt_dataset,
    response_len,
)
from mimojax.train.step import (
    ActorHParams,
    MiniBatchUpdate,
    critic_values,
    make_actor_update,
    make_critic_update,
    sequence_logprobs,
)

# ---------------------------------------------------------------- placement


def role_devices(cfg: ConfigDict, devices: Sequence | None = None) -> tuple[list, list | None]:
    """(actor devices, rollout devices or None when colocated) from `roles.*.devices`.

    The indices were checked by `validate` (in range, no repeats, disjoint)."""
    devices = list(devices if devices is not None else jax.devices())
    rollout_idx = [int(i) for i in cfg.roles.rollout.devices]
    actor_idx = [int(i) for i in cfg.roles.actor.devices]
    if not actor_idx:
        actor_idx = [i for i in range(len(devices)) if i not in set(rollout_idx)]
    actor = [devices[i] for i in actor_idx]
    return actor, ([devices[i] for i in rollout_idx] if rollout_idx else None)


def _rules(cfg: ConfigDict) -> dict:
    return sh.get_rules(cfg.sharding.preset, sharding_overrides(cfg.sharding))


def load_actor_model(cfg: ConfigDict, devices: Sequence | None = None):
    """(model, tokenizer, mesh, rules): `model.*` loaded straight onto the `mesh.*` mesh."""
    mesh = sh.make_mesh(cfg.mesh.to_dict(), devices)
    rules = _rules(cfg)
    m = cfg.model
    model, tokenizer = load_model(
        m.name_or_path,
        dtype=m.dtype,
        mesh=mesh,
        param_dtype=m.param_dtype,
        rules=rules,
        attention_impl=m.attention_impl,
        remat=m.remat,
    )
    return model, tokenizer, mesh, rules


def sampling_from_config(cfg: ConfigDict, greedy: bool = False) -> SamplingParams:
    """SamplingParams from `rollout.*` (greedy=True for evaluation); errors name the key."""
    r = cfg.rollout
    try:
        return SamplingParams(
            temperature=0.0 if greedy else float(r.temperature),
            top_p=1.0 if greedy else float(r.top_p),
            top_k=0 if greedy or r.top_k < 0 else int(r.top_k),  # verl spells "off" as -1
            seed=int(r.seed),
            max_new_tokens=int(r.max_new_tokens),
            stop_token_ids=tuple(int(i) for i in r.stop_token_ids),
        )
    except SamplingError as e:
        raise ConfigError(f"rollout.*: {e}") from None


def engine_from_config(cfg: ConfigDict, model, tokenizer, mesh: Mesh | None = None) -> JaxEngine:
    """A JaxEngine sized by data.max_prompt_length, the response budget (rollout.max_new_tokens,
    or rollout.agent.max_response_tokens for multi-turn agents) and slots."""
    prefill = int(cfg.data.max_prompt_length)
    try:
        return JaxEngine(
            model,
            tokenizer,
            max_concurrent_decodes=int(cfg.rollout.max_concurrent_decodes),
            max_prefill_length=prefill,
            max_cache_length=prefill + response_len(cfg),
            mesh=mesh,
            pipeline_decode=bool(cfg.rollout.pipeline_decode),
        )
    except EngineError as e:
        raise ConfigError(
            f"rollout.max_concurrent_decodes / data.max_prompt_length / rollout.max_new_tokens: {e}"
        ) from None


def _reward_pool(cfg: ConfigDict) -> RewardPool:
    """The grader pool (local processes, or Ray tasks with reward.backend = "ray"); its workers
    inherit the run's sandbox.allow_unsandboxed choice."""
    if cfg.sandbox.allow_unsandboxed:
        os.environ[ALLOW_UNSANDBOXED_ENV] = "1"
    else:
        os.environ.pop(ALLOW_UNSANDBOXED_ENV, None)
    if cfg.reward.backend == "ray":
        from mimojax.rewards.ray_pool import RayRewardPool  # Ray is an optional extra

        return RayRewardPool(str(cfg.reward.ray_address), float(cfg.reward.timeout_s))
    return RewardPool(int(cfg.reward.num_workers), float(cfg.reward.timeout_s))


# ---------------------------------------------------------------- the roles


@dataclasses.dataclass
class Actor:
    """The trainable policy: state on `mesh`, its jitted update and log-prob pass."""

    mesh: Mesh
    graphdef: Any
    state: TrainState
    schedule: Callable[[int], Any]
    update: MiniBatchUpdate  # (state, micro-batch stacks, counts) -> (state, metrics)
    logprobs: Callable  # (params, ids, attn, prompt_len) -> logp_BxT
    logprob_stats: Callable  # (params, ids, attn, prompt_len) -> (logp_BxT, sum_pi_squared_BxT)
    on_policy: bool  # one update per batch: the old policy is the current one
    hparams: ActorHParams  # the policy loss settings (static in the jitted update)
    merge: Callable | None = None  # LoRA: adapters (state.params) -> merged full weights

    def full_params(self):
        """The policy's full weights (LoRA: the base with the adapters merged in)."""
        return self.state.params if self.merge is None else self.merge(self.state.params)


@dataclasses.dataclass
class Reference:
    """The frozen starting policy on the actor mesh (a resume rebuilds it from the same weights)."""

    params: Any
    logprobs: Callable


@dataclasses.dataclass
class Critic:
    """The value model on the actor mesh: state, jitted update and value pass."""

    graphdef: Any
    state: TrainState
    update: MiniBatchUpdate
    values: Callable  # (params, ids, attn) -> values_BxT
    warmup_steps: int


@dataclasses.dataclass
class Rollout:
    """The engine on its own mesh (or the actor's), with the run's sampling settings."""

    engine: JaxEngine
    mesh: Mesh | None
    sampling: SamplingParams
    greedy: SamplingParams
    n: int
    prompt_overflow: str
    colocated: bool
    tokenizer: Any
    agent: AgentSettings
    merge: Callable | None = None  # LoRA: adapters -> merged weights, so the engine stays plain

    def run(self, examples, n: int, sampling: SamplingParams, request_id_base: int, stats=None):
        """n trajectories per example, each from its row's agent loop (single-turn: batched)."""
        return agent_rollout(
            self.engine, self.tokenizer, examples, n, sampling, self.agent,
            request_id_base=request_id_base, prompt_overflow=self.prompt_overflow, stats=stats,
        )  # fmt: skip

    def release(self) -> None:
        """Colocated: frees the engine's weights until the next `sync` (called before a sync-mode
        update, which makes them stale; the update's peak memory then holds one copy fewer)."""
        if self.colocated:
            self.engine.release_params()

    def sync(self, params, version: int | None = None) -> int:
        """Actor params -> engine (resharded onto the rollout mesh when split); new version."""
        if self.merge is not None:
            params = self.merge(params)
        return self.engine.update_params(params, version=version)


@dataclasses.dataclass
class Roles:
    """Every role of a run; `reference` and `critic` are None when the algorithm needs none."""

    actor: Actor
    reference: Reference | None
    critic: Critic | None
    rollout: Rollout
    reward: RewardPool
    tokenizer: Any
    fingerprint: dict

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)


def _on_mesh(state, mesh: Mesh):
    """Replicates over `mesh` every leaf not already placed on it (optimizer counters, step).

    Fresh scalars are uncommitted and follow the params into jit; the same scalars restored
    from a checkpoint come back committed to one device, which jit refuses to mix with the
    mesh-sharded params. Placing them on the mesh up front makes both cases identical.
    """
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())

    def place(x):
        if isinstance(getattr(x, "sharding", None), jax.sharding.NamedSharding):
            return x
        return jax.device_put(x, replicated)

    return jax.tree.map(place, state)


def _shardings(state):
    """The sharding of every leaf of a placed state (pinned as the jitted update's outputs)."""
    return jax.tree.map(lambda x: x.sharding, state)


def _split_params(module):
    """(graphdef, pure-dict params); the decoder family holds nothing but nnx.Param state."""
    graphdef, state = nnx.split(module)
    return graphdef, nnx.to_pure_dict(state)


def _engine_model(model, mesh: Mesh, rules):
    """A view of `model` with every parameter copied onto `mesh` per the rules (split roles)."""
    graphdef, state = nnx.split(model)
    return nnx.merge(graphdef, jax.device_put(state, sh.param_shardings(state, mesh, rules)))


def _jit_logprobs(frozen=None, **kw):
    """sequence_logprobs jitted with `kw` fixed; LoRA's `frozen` base goes in as an argument."""
    fn = jax.jit(functools.partial(sequence_logprobs, **kw), static_argnames=("prompt_len",))
    return fn if frozen is None else functools.partial(fn, frozen=frozen)


def updates_per_step(cfg: ConfigDict) -> int:
    """Optimizer updates per RL step: PPO epochs x mini-batches."""
    return int(cfg.trainer.ppo_epochs) * (
        int(cfg.data.batch_size) // int(cfg.trainer.mini_batch_size)
    )


def build_roles(
    cfg: ConfigDict, devices: Sequence | None = None, on_loaded: Callable | None = None
) -> Roles:
    """Every role of the run described by `cfg` (validated), each on its mesh.

    `on_loaded(fingerprint)` runs right after the model loads, before any compile (the run
    uses it to refuse a checkpoint of another model)."""
    a, t = cfg.algorithm, cfg.trainer
    actor_devices, rollout_devices = role_devices(cfg, devices)
    model, tokenizer, mesh, rules = load_actor_model(cfg, actor_devices)
    lora = attach_lora(cfg, model, mesh, rules)  # None unless model.lora.rank > 0
    fingerprint = model_fingerprint(model.config)
    if lora is not None:
        fingerprint["lora"] = lora.fingerprint
    if on_loaded is not None:
        on_loaded(fingerprint)
    total_updates = int(t.total_steps) * updates_per_step(cfg)
    on_policy = (
        t.ppo_epochs == 1
        and t.mini_batch_size == cfg.data.batch_size
        and not a.rollout_correction.bypass_mode
        and t.mode == "sync"  # off-policy modes: old log-probs recomputed before the update
    )
    hp = actor_hparams_from_config(cfg, on_policy=on_policy)
    actor_opt = make_optimizer(optimizer_settings(cfg.optimizer), total_updates)
    graphdef, params = _split_params(model) if lora is None else (lora.graphdef, lora.adapters)
    frozen = None if lora is None else lora.frozen
    actor_state = _on_mesh(init_state(params, actor_opt), mesh)
    logprob_kw = dict(
        graphdef=graphdef,
        temperature=hp.temperature,
        top_k=hp.top_k,
        top_p=hp.top_p,
        chunk=hp.logprob_chunk,
    )
    logprobs = _jit_logprobs(frozen, **logprob_kw)
    actor = Actor(
        mesh=mesh,
        graphdef=graphdef,
        state=actor_state,
        schedule=make_schedule(optimizer_settings(cfg.optimizer), total_updates),
        update=make_actor_update(
            graphdef=graphdef,
            hp=hp,
            optimizer=actor_opt,
            state_shardings=_shardings(actor_state),
            frozen=frozen,
        ),
        logprobs=logprobs,
        logprob_stats=_jit_logprobs(frozen, sum_pi_squared=True, **logprob_kw),
        on_policy=on_policy,
        hparams=hp,
        merge=None if lora is None else lora.merge,
    )
    reference = None
    if (a.use_kl_loss or a.use_kl_in_reward) and lora is None:
        reference = Reference(jax.tree.map(jnp.copy, params), logprobs)
    elif a.use_kl_loss or a.use_kl_in_reward:  # LoRA: the base itself, adapters off; no copy
        base_logprobs = _jit_logprobs(**{**logprob_kw, "graphdef": lora.base_graphdef})
        reference = Reference(lora.frozen, base_logprobs)
    critic = None
    if ADVANTAGE_ESTIMATORS.traits(a.adv_estimator).needs_values:
        critic_def, critic_params = _split_params(ValueModel.from_decoder(model, seed=int(t.seed)))
        critic_opt = make_optimizer(
            optimizer_settings(cfg.optimizer, lr=cfg.critic.lr), total_updates
        )
        critic_state = _on_mesh(init_state(critic_params, critic_opt), mesh)
        critic = Critic(
            graphdef=critic_def,
            state=critic_state,
            update=make_critic_update(
                graphdef=critic_def,
                clip_range_value=float(cfg.critic.cliprange_value),
                agg_mode=a.loss_agg_mode,
                optimizer=critic_opt,
                state_shardings=_shardings(critic_state),
            ),
            values=jax.jit(functools.partial(critic_values, graphdef=critic_def)),
            warmup_steps=int(cfg.critic.warmup_steps),
        )
    rollout_mesh = None
    engine_model = model
    if rollout_devices is not None:
        rollout_mesh = sh.make_mesh(cfg.roles.rollout.mesh.to_dict(), rollout_devices)
        engine_model = _engine_model(model, rollout_mesh, rules)
    rollout = Rollout(
        engine=engine_from_config(cfg, engine_model, tokenizer, rollout_mesh),
        mesh=rollout_mesh or mesh,
        sampling=sampling_from_config(cfg),
        greedy=sampling_from_config(cfg, greedy=True),
        n=int(cfg.rollout.n),
        prompt_overflow=cfg.rollout.prompt_overflow,
        colocated=rollout_devices is None,
        tokenizer=tokenizer,
        agent=agent_settings(cfg),
        merge=None if lora is None else lora.merge,
    )
    return Roles(
        actor=actor,
        reference=reference,
        critic=critic,
        rollout=rollout,
        reward=_reward_pool(cfg),
        tokenizer=tokenizer,
        fingerprint=fingerprint,
    )


# ---------------------------------------------------------------- the whole run


@dataclasses.dataclass
class Run:
    """What the trainer is handed: roles, loop settings, data, checkpointer, workdir."""

    roles: Roles
    spec: LoopSpec
    train_data: PromptDataset
    eval_examples: list[dict]
    checkpointer: Checkpointer
    workdir: str


def build_run(cfg: ConfigDict, workdir: str | None = None, devices=None) -> Run:
    """Validates `cfg` and builds everything a training run needs (fails before compute on a
    checkpoint of another model). Joins a multi-host run first when its variables are set."""
    initialize_from_env()
    cfg = validate(cfg, len(devices) if devices is not None else None)
    workdir = os.path.abspath(workdir or cfg.trainer.workdir)
    os.makedirs(workdir, exist_ok=True)
    checkpointer = Checkpointer(
        os.path.join(workdir, "checkpoints"),
        keep=int(cfg.checkpoint.keep),
        async_save=bool(cfg.checkpoint.async_save),
    )

    def refuse_other_model(fingerprint: dict) -> None:
        found = checkpointer.latest_meta()  # the newest checkpoint whose meta reads
        if found is not None:
            check_fingerprint(found[1].get("model", {}), fingerprint, workdir)

    roles = build_roles(cfg, devices, on_loaded=refuse_other_model)
    train_data = prompt_dataset(cfg, roles.tokenizer, "train")
    eval_examples: list[dict] = []
    if cfg.data.eval_files:
        rows = prompt_dataset(cfg, roles.tokenizer, "eval").all_rows()
        eval_examples = rows[: cfg.eval.max_examples or None]
    spec = loop_spec(cfg)
    info = {
        **spec.run_info,
        "devices": [str(d) for d in jax.devices()],
        "cpus": os.cpu_count(),  # host cores, for CPU-seconds (mimojax/observe/run_costs.py)
        "train_rows": len(train_data),
        "train_rows_dropped": train_data.num_dropped,
        "eval_rows": len(eval_examples),
    }
    if is_main_process():  # multi-host: one writer
        with open(os.path.join(workdir, "run_info.json"), "w") as f:
            json.dump(info, f, indent=1)
    return Run(roles, spec, train_data, eval_examples, checkpointer, workdir)
