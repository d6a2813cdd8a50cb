"""Every cross-key check of a loaded config in one place: `validate`, `resolve_mesh_shape`.

`mimojax.config.loader` re-exports both. What the checks need from the rest of the package (the mesh
axes, the registries, the model's name tables) is imported on first use, so `mimojax.config.loader`,
which every config file imports, stays free of jax.
"""

from __future__ import annotations

from ml_collections import ConfigDict

from mimojax.config.errors import ConfigError

__all__ = ["ConfigError", "resolve_mesh_shape", "validate"]

DTYPES = ("float32", "bfloat16")
LR_SCHEDULES = ("constant", "cosine", "linear")
KL_CTRL_TYPES = ("fixed", "adaptive")
ROLLOUT_IS_LEVELS = (None, "token", "sequence")
WANDB_MODES = ("online", "offline", "disabled")
REWARD_BACKENDS = ("local", "ray")


def resolve_mesh_shape(mesh_cfg: ConfigDict, num_devices: int) -> dict[str, int]:
    """Mesh axis sizes {data, fsdp, tensor} for `num_devices`, filling in the one -1 axis."""
    from mimojax.sharding import MESH_AXES, mesh_shape

    try:
        sizes = {axis: mesh_cfg.get(axis, 1) for axis in MESH_AXES}  # plain values go below
        return dict(zip(MESH_AXES, mesh_shape(sizes, num_devices)))
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _check_mesh_and_batch(cfg: ConfigDict, num_devices: int, bad) -> None:
    data, rollout, trainer = cfg.data, cfg.rollout, cfg.trainer
    counts = {
        "data.batch_size": data.batch_size,
        "rollout.n": rollout.n,
        "trainer.mini_batch_size": trainer.mini_batch_size,
        "trainer.micro_batch_size": trainer.micro_batch_size,
        "trainer.ppo_epochs": trainer.ppo_epochs,
        "trainer.total_steps": trainer.total_steps,
    }
    for key, value in counts.items():
        if value < 1:
            bad(f"{key}: must be >= 1, got {value}")
    if any(v < 1 for v in counts.values()):
        return

    samples = data.batch_size * rollout.n
    if data.batch_size % trainer.mini_batch_size:
        bad(
            f"trainer.mini_batch_size: {trainer.mini_batch_size} prompts does not divide "
            f"data.batch_size = {data.batch_size}"
        )
    mini_samples = trainer.mini_batch_size * rollout.n
    if mini_samples % trainer.micro_batch_size:
        bad(
            f"trainer.micro_batch_size: {trainer.micro_batch_size} samples does not divide "
            f"trainer.mini_batch_size * rollout.n = {trainer.mini_batch_size} * {rollout.n} "
            f"= {mini_samples} samples"
        )

    tokens, longest = trainer.micro_batch_tokens, data.max_prompt_length + rollout.max_new_tokens
    if tokens < 0:
        bad(f"trainer.micro_batch_tokens: must be >= 0 (0 = row micro-batches), got {tokens}")
    elif 0 < tokens < longest:
        bad(
            f"trainer.micro_batch_tokens: {tokens} tokens cannot hold one full-length row "
            f"(data.max_prompt_length + rollout.max_new_tokens = {longest})"
        )

    try:
        sizes = resolve_mesh_shape(cfg.mesh, num_devices)
    except ConfigError as e:
        bad(str(e))
        return
    dp = sizes["data"] * sizes["fsdp"]
    dp_desc = (
        f"{dp} data-parallel devices (mesh.data * mesh.fsdp = {sizes['data']} * {sizes['fsdp']})"
    )
    if samples % dp:
        bad(
            f"data.batch_size * rollout.n: {data.batch_size} * {rollout.n} = {samples} samples "
            f"do not split over {dp_desc}"
        )
    if trainer.micro_batch_size % dp:
        bad(
            f"trainer.micro_batch_size: {trainer.micro_batch_size} samples do not split over "
            f"{dp_desc}"
        )


def _check_registered_names(algo: ConfigDict, bad) -> None:
    # Names resolve against the live registries, so a newly registered algorithm is valid.
    from mimojax.algos import ADVANTAGE_ESTIMATORS, AGG_MODES, KL_ESTIMATORS, POLICY_LOSSES

    for key, registry in (
        ("adv_estimator", ADVANTAGE_ESTIMATORS),
        ("policy_loss", POLICY_LOSSES),
        ("kl_loss_type", KL_ESTIMATORS),
        ("loss_agg_mode", AGG_MODES),
    ):
        name = algo[key]
        if name not in registry:
            known = ", ".join(sorted(registry))
            bad(f"algorithm.{key}: unknown name '{name}'; registered: {known}")


def _estimator_traits(name: str):
    """The estimator's registered traits; None for an unknown name (reported on its own)."""
    from mimojax.algos.registry import ADVANTAGE_ESTIMATORS

    return ADVANTAGE_ESTIMATORS.traits(name) if name in ADVANTAGE_ESTIMATORS else None


def _check_algorithm(cfg: ConfigDict, bad) -> None:
    from mimojax.algos.advantage_stage import TRUNCATED_MODES

    algo = cfg.algorithm
    _check_registered_names(algo, bad)
    traits = _estimator_traits(algo.adv_estimator)
    if algo.truncated_responses not in TRUNCATED_MODES:
        bad(
            f"algorithm.truncated_responses: '{algo.truncated_responses}' is not one of "
            f"{TRUNCATED_MODES}"
        )
    if traits is not None and traits.needs_groups and cfg.rollout.n < 2:
        bad(
            f"rollout.n: algorithm.adv_estimator = '{algo.adv_estimator}' compares samples "
            f"of the same prompt and needs rollout.n >= 2, got {cfg.rollout.n}"
        )
    if traits is not None and traits.needs_values and not cfg.model.value_head:
        bad(
            f"model.value_head: algorithm.adv_estimator = '{algo.adv_estimator}' needs a "
            "critic; set it True"
        )
    if not 0.0 <= algo.clip_ratio_low < 1.0:
        bad(f"algorithm.clip_ratio_low: must be in [0, 1), got {algo.clip_ratio_low}")
    if algo.clip_ratio_high < 0.0:
        bad(f"algorithm.clip_ratio_high: must be >= 0, got {algo.clip_ratio_high}")
    if algo.clip_ratio_c <= 1.0:
        bad(f"algorithm.clip_ratio_c: dual-clip bound must be > 1, got {algo.clip_ratio_c}")
    if not 0.0 <= algo.gamma <= 1.0:
        bad(f"algorithm.gamma: must be in [0, 1], got {algo.gamma}")
    if not 0.0 <= algo.lam <= 1.0:
        bad(f"algorithm.lam: must be in [0, 1], got {algo.lam}")
    if algo.use_kl_loss and algo.use_kl_in_reward:
        bad(
            "algorithm.use_kl_loss, algorithm.use_kl_in_reward: both on would apply the KL "
            "penalty twice; choose one (as verl does)"
        )
    ec = algo.entropy_control
    if ec.target < 0.0 or ec.delta <= 0.0 or ec.max_coeff < 0.0:
        bad(
            "algorithm.entropy_control: needs target >= 0 (0 = off), delta > 0, max_coeff >= 0, "
            f"got target={ec.target}, delta={ec.delta}, max_coeff={ec.max_coeff}"
        )
    if ec.target > 0.0 and algo.entropy_coeff != 0.0:
        bad(
            "algorithm.entropy_control.target, algorithm.entropy_coeff: an entropy target sets "
            f"the bonus weight itself; set entropy_coeff=0 (got {algo.entropy_coeff})"
        )
    if algo.kl_ctrl.type not in KL_CTRL_TYPES:
        bad(f"algorithm.kl_ctrl.type: '{algo.kl_ctrl.type}' is not one of {KL_CTRL_TYPES}")
    dd = cfg.data.difficulty
    if not 0.0 < dd.floor <= 1.0:
        bad(f"data.difficulty.floor: must be in (0, 1], got {dd.floor}")
    ds = algo.dynamic_sampling
    if ds.enable and cfg.rollout.n < 2:
        bad(f"algorithm.dynamic_sampling.enable: needs groups, rollout.n >= 2, got {cfg.rollout.n}")
    if not isinstance(ds.max_num_gen_batches, int) or ds.max_num_gen_batches < 1:
        bad(
            "algorithm.dynamic_sampling.max_num_gen_batches: must be an int >= 1, got "
            f"{ds.max_num_gen_batches!r}"
        )
    rc = algo.rollout_correction
    if rc.rollout_is not in ROLLOUT_IS_LEVELS:
        bad(
            f"algorithm.rollout_correction.rollout_is: '{rc.rollout_is}' is not one of "
            "None, 'token', 'sequence'"
        )


def _check_rollout(cfg: ConfigDict, bad) -> None:
    r = cfg.rollout
    if r.temperature < 0.0:
        bad(f"rollout.temperature: must be >= 0 (0 = greedy), got {r.temperature}")
    if not 0.0 < r.top_p <= 1.0:
        bad(f"rollout.top_p: must be in (0, 1], got {r.top_p}")
    if r.top_k < -1:
        bad(f"rollout.top_k: must be >= 1, or 0 / -1 to disable, got {r.top_k}")
    if r.max_new_tokens < 1:
        bad(f"rollout.max_new_tokens: must be >= 1, got {r.max_new_tokens}")
    if r.max_concurrent_decodes < 1:
        bad(f"rollout.max_concurrent_decodes: must be >= 1, got {r.max_concurrent_decodes}")
    if cfg.data.max_prompt_length < 1:
        bad(f"data.max_prompt_length: must be >= 1, got {cfg.data.max_prompt_length}")
    _check_agent(cfg, bad)


def _check_agent(cfg: ConfigDict, bad) -> None:
    from mimojax.rollout import agent_loop  # noqa: F401  (importing it registers every loop)
    from mimojax.rollout.agents import AGENT_LOOPS

    ag, sb = cfg.rollout.agent, cfg.sandbox
    if ag.default not in AGENT_LOOPS:
        known = ", ".join(sorted(AGENT_LOOPS))
        bad(f"rollout.agent.default: unknown agent loop '{ag.default}'; registered: {known}")
    for key in ("max_turns", "max_tool_calls", "max_response_tokens"):
        if ag[key] < 1:
            bad(f"rollout.agent.{key}: must be >= 1, got {ag[key]}")
    if ag.max_wall_s <= 0:
        bad(f"rollout.agent.max_wall_s: must be > 0, got {ag.max_wall_s}")
    if sb.timeout_s <= 0:
        bad(f"sandbox.timeout_s: must be > 0, got {sb.timeout_s}")
    if sb.memory_mb < 16:
        bad(f"sandbox.memory_mb: must be >= 16, got {sb.memory_mb}")


def _check_model_and_sharding(cfg: ConfigDict, bad) -> None:
    for key in ("dtype", "param_dtype"):
        if cfg.model[key] not in DTYPES:
            bad(f"model.{key}: '{cfg.model[key]}' is not one of {DTYPES}")
    from mimojax.models.remat import REMAT_POLICIES

    if cfg.model.remat not in REMAT_POLICIES:
        bad(f"model.remat: '{cfg.model.remat}' is not one of {tuple(REMAT_POLICIES)}")
    from mimojax.models.attention import ATTENTION_IMPLS

    if cfg.model.attention_impl not in ATTENTION_IMPLS:
        known = ", ".join(sorted(ATTENTION_IMPLS))
        bad(f"model.attention_impl: unknown name '{cfg.model.attention_impl}'; registered: {known}")
    if cfg.model.logprob_chunk_size < 0:
        bad(f"model.logprob_chunk_size: must be >= 0, got {cfg.model.logprob_chunk_size}")
    from mimojax.sharding import MESH_AXES, RULES_PRESETS

    if cfg.sharding.preset not in RULES_PRESETS:
        bad(f"sharding.preset: '{cfg.sharding.preset}' is not one of {tuple(RULES_PRESETS)}")
    for name, axes in cfg.sharding.overrides.items():
        if axes is None or axes == "":
            continue
        unknown = [a.strip() for a in axes.split(",") if a.strip() not in MESH_AXES]
        if unknown:
            bad(f"sharding.overrides.{name}: {unknown} in '{axes}' are not mesh axes {MESH_AXES}")


def _check_lora(lo: ConfigDict, bad) -> None:
    # Whether the targets match a linear of the model is checked where adapters are attached
    # (mimojax.models.lora.add_lora), against the model's own names.
    import re

    if not isinstance(lo.rank, int) or lo.rank < 0:
        bad(f"model.lora.rank: must be an int >= 0 (0 = off), got {lo.rank}")
    if lo.alpha <= 0.0:
        bad(f"model.lora.alpha: must be > 0, got {lo.alpha}")
    if not 0.0 <= lo.dropout < 1.0:
        bad(f"model.lora.dropout: must be in [0, 1), got {lo.dropout}")
    targets = (lo.targets,) if isinstance(lo.targets, str) else tuple(lo.targets)
    if not targets:
        bad("model.lora.targets: give at least one regex over linear names (e.g. '.*_proj')")
    for pattern in targets:
        try:
            re.compile(pattern)
        except (re.error, TypeError) as e:
            bad(f"model.lora.targets: {pattern!r} is not a regex ({e})")


def _check_optimizer_and_io(cfg: ConfigDict, bad) -> None:
    opt = cfg.optimizer
    if opt.lr < 0.0:
        bad(f"optimizer.lr: must be >= 0, got {opt.lr}")
    if len(opt.betas) != 2 or not all(0.0 <= b < 1.0 for b in opt.betas):
        bad(f"optimizer.betas: must be two values in [0, 1), got {opt.betas}")
    if opt.schedule not in LR_SCHEDULES:
        bad(f"optimizer.schedule: '{opt.schedule}' is not one of {LR_SCHEDULES}")
    if opt.warmup_steps < 0:
        bad(f"optimizer.warmup_steps: must be >= 0, got {opt.warmup_steps}")
    if opt.grad_clip < 0.0:
        bad(f"optimizer.grad_clip: must be >= 0 (0 = off), got {opt.grad_clip}")
    if cfg.logging.wandb.mode not in WANDB_MODES:
        bad(f"logging.wandb.mode: '{cfg.logging.wandb.mode}' is not one of {WANDB_MODES}")
    if cfg.checkpoint.every_steps < 0:
        bad(f"checkpoint.every_steps: must be >= 0 (0 = never), got {cfg.checkpoint.every_steps}")
    if cfg.checkpoint.keep < 1:
        bad(f"checkpoint.keep: must be >= 1, got {cfg.checkpoint.keep}")
    if cfg.checkpoint.preemption_grace_s <= 0:
        bad(f"checkpoint.preemption_grace_s: must be > 0, got {cfg.checkpoint.preemption_grace_s}")
    for key in ("device_per_hour", "cpu_per_hour"):
        if not cfg.cost[key] >= 0.0 or cfg.cost[key] == float("inf"):  # NaN fails >= too
            bad(f"cost.{key}: must be a finite price >= 0 (0 = unknown), got {cfg.cost[key]}")


def _check_trainer(cfg: ConfigDict, bad) -> None:
    traits = _estimator_traits(cfg.algorithm.adv_estimator)
    if cfg.model.value_head and traits is not None and not traits.needs_values:
        bad(
            "model.value_head: a critic is only trained for an estimator that uses values "
            f"(e.g. 'gae'), got algorithm.adv_estimator = '{cfg.algorithm.adv_estimator}'"
        )
    ob = cfg.reward.overlong_buffer
    if ob.enable and not 0 < ob.len < cfg.rollout.max_new_tokens:
        bad(
            f"reward.overlong_buffer.len: must be in (0, rollout.max_new_tokens = "
            f"{cfg.rollout.max_new_tokens}), got {ob.len}"
        )
    if cfg.reward.num_workers < 0:
        bad(f"reward.num_workers: must be >= 0, got {cfg.reward.num_workers}")
    if cfg.reward.timeout_s <= 0:
        bad(f"reward.timeout_s: must be > 0, got {cfg.reward.timeout_s}")
    if cfg.reward.backend not in REWARD_BACKENDS:
        bad(f"reward.backend: '{cfg.reward.backend}' is not one of {REWARD_BACKENDS}")
    elif cfg.reward.backend == "ray":
        from mimojax.extras import missing_message, missing_modules

        if missing_modules("ray"):
            bad(missing_message("reward.backend: 'ray'", "ray", "ray"))
        if not isinstance(cfg.reward.ray_address, str) or not cfg.reward.ray_address:
            bad(
                "reward.ray_address: 'auto' (join a running cluster), 'local' (start one) or "
                f"'host:port', got {cfg.reward.ray_address!r}"
            )
    if cfg.trainer.eval_every < 0:
        bad(f"trainer.eval_every: must be >= 0 (0 = never), got {cfg.trainer.eval_every}")
    if (cfg.trainer.eval_every > 0 or cfg.trainer.eval_at_minutes) and not cfg.data.eval_files:
        bad(
            "data.eval_files: trainer.eval_every / trainer.eval_at_minutes ask for evaluation "
            "but no eval files are given; set data.eval_files or turn evaluation off"
        )
    if cfg.eval.pass_k < 0:
        bad(f"eval.pass_k: must be >= 0 (0 = greedy only), got {cfg.eval.pass_k}")
    if cfg.critic.warmup_steps < 0:
        bad(f"critic.warmup_steps: must be >= 0, got {cfg.critic.warmup_steps}")
    _check_async(cfg, bad)


def _file_worlds(path: str) -> set[str]:
    """The `env` values of a JSONL/Parquet prompt file's rows (what cannot be read: none; the
    data loader reports a bad file)."""
    envs: set[str] = set()
    try:
        if str(path).endswith(".parquet"):
            import pyarrow.parquet as pq

            if "env" in pq.read_schema(path).names:
                envs.update(pq.read_table(path, columns=["env"]).column("env").to_pylist())
        else:
            import json

            with open(path, encoding="utf-8") as f:
                for line in f:
                    if '"env"' in line:
                        row = json.loads(line)
                        envs.add(row.get("env") if isinstance(row, dict) else None)
    except Exception:  # noqa: BLE001 - missing or malformed: the data loader's error, not ours
        pass
    return {e for e in envs if isinstance(e, str)}


def _check_world_extras(cfg: ConfigDict, bad) -> None:
    """A world of the data (the rows' `env`, data.default_env) whose grader needs an extra that
    is not installed here (music21 for envs/music, ...): one line naming the pip command."""
    from mimojax.extras import WORLD_EXTRAS, missing_message, missing_modules

    d = cfg.data
    worlds: dict[str, str] = {}  # world -> the config key that brings it in
    if d.get("default_env", None):
        worlds[d.default_env] = "data.default_env"
    for key in ("train_files", "eval_files"):
        for path in d.get(key, None) or ():
            for world in sorted(_file_worlds(path)):
                worlds.setdefault(world, f"data.{key}")
    for world, key in worlds.items():
        extra = WORLD_EXTRAS.get(world)
        missing = missing_modules(extra) if extra else []
        if missing:
            feature = f"{key}: the {world} world (env '{world}')"
            bad(missing_message(feature, extra, missing))


TRAINER_MODES = ("sync", "one_step_off", "async")
STALENESS_POLICIES = ("wait", "drop")


def _check_async(cfg: ConfigDict, bad) -> None:
    t = cfg.trainer
    if t.mode not in TRAINER_MODES:
        bad(f"trainer.mode: '{t.mode}' is not one of {TRAINER_MODES}")
    if not isinstance(t.max_off_policy_steps, int) or t.max_off_policy_steps < 0:
        bad(f"trainer.max_off_policy_steps: must be an int >= 0, got {t.max_off_policy_steps!r}")
    if t.staleness_policy not in STALENESS_POLICIES:
        bad(f"trainer.staleness_policy: '{t.staleness_policy}' is not one of {STALENESS_POLICIES}")
    if t.mode == "one_step_off" and (t.max_off_policy_steps != 1 or t.staleness_policy != "wait"):
        bad(
            "trainer.max_off_policy_steps: trainer.mode = 'one_step_off' lags exactly one step "
            "(max_off_policy_steps = 1, staleness_policy = 'wait'); use mode = 'async' for "
            f"another bound, got {t.max_off_policy_steps} / '{t.staleness_policy}'"
        )
    k = t.sync_every_steps
    if not isinstance(k, int) or k < 1:
        bad(f"trainer.sync_every_steps: must be an int >= 1, got {k!r}")
    elif k > 1 and t.mode != "async":
        bad(
            f"trainer.sync_every_steps: {k} needs trainer.mode = 'async' ('{t.mode}' syncs the "
            "weights after every update)"
        )
    elif k > 1 and isinstance(t.max_off_policy_steps, int) and t.max_off_policy_steps < k - 1:
        bad(
            f"trainer.sync_every_steps: weights published every {k} updates are up to {k - 1} "
            f"versions old; trainer.max_off_policy_steps = {t.max_off_policy_steps} must be >= "
            f"{k - 1}"
        )
    if t.partial_rollouts and t.mode != "async":
        bad(
            f"trainer.partial_rollouts: needs trainer.mode = 'async' ('{t.mode}' generates each "
            "batch with one weights version)"
        )
    if t.flow not in ("batch", "stream"):
        bad(f"trainer.flow: '{t.flow}' is not one of ('batch', 'stream')")
    elif t.flow == "stream" and t.mode != "async":
        bad(f"trainer.flow: 'stream' needs trainer.mode = 'async', got '{t.mode}'")
    elif t.flow == "stream" and cfg.algorithm.dynamic_sampling.enable:
        bad("trainer.flow: 'stream' takes units as they finish; dynamic sampling needs batches")
    elif t.flow == "stream" and cfg.rollout.agent.default != "single_turn":
        bad("trainer.flow: 'stream' runs single-turn rows (rollout.agent.default)")
    if not isinstance(t.long_response_tokens, int) or t.long_response_tokens < 0:
        bad(f"trainer.long_response_tokens: must be an int >= 0, got {t.long_response_tokens!r}")
    traits = _estimator_traits(cfg.algorithm.adv_estimator)
    if t.mode != "sync" and traits is not None and traits.needs_baseline_rollout:
        bad(
            f"trainer.mode: '{t.mode}' keeps the engine busy producing; algorithm.adv_estimator "
            f"= '{cfg.algorithm.adv_estimator}' needs a greedy baseline rollout each step, so "
            "it runs in mode = 'sync' only"
        )


def _check_roles(cfg: ConfigDict, num_devices: int, bad) -> int:
    """Role placement (`roles.*.devices`); returns how many devices the actor's `mesh` spans."""
    actor = [int(i) for i in cfg.roles.actor.devices]
    rollout = [int(i) for i in cfg.roles.rollout.devices]
    for key, idx in (("roles.actor.devices", actor), ("roles.rollout.devices", rollout)):
        out = [i for i in idx if not 0 <= i < num_devices]
        if out:
            bad(f"{key}: device indices {out} out of range (there are {num_devices} devices)")
        if len(set(idx)) != len(idx):
            bad(f"{key}: a device index is listed twice ({idx})")
    if not rollout:
        return len(actor) or num_devices
    shared = sorted(set(actor) & set(rollout))
    if shared:
        bad(
            f"roles.actor.devices / roles.rollout.devices: both list devices {shared}; split "
            "roles need disjoint device sets (leave roles.rollout.devices empty to colocate)"
        )
    n_actor = len(actor) or num_devices - len(set(rollout))
    if n_actor < 1:
        bad("roles.rollout.devices: takes every device; the actor has none")
        return num_devices
    try:
        resolve_mesh_shape(cfg.roles.rollout.mesh, len(set(rollout)))
    except ConfigError as e:
        bad(str(e).replace("mesh.", "roles.rollout.mesh."))
    return n_actor


def validate(cfg: ConfigDict, num_devices: int | None = None) -> ConfigDict:
    """Raise one ConfigError listing every inconsistency in `cfg`; return `cfg` if none."""
    if num_devices is None:
        import jax

        num_devices = jax.device_count()
    problems: list[str] = []
    actor_devices = _check_roles(cfg, num_devices, problems.append)
    _check_mesh_and_batch(cfg, actor_devices, problems.append)
    _check_algorithm(cfg, problems.append)
    _check_rollout(cfg, problems.append)
    _check_model_and_sharding(cfg, problems.append)
    _check_lora(cfg.model.lora, problems.append)
    _check_optimizer_and_io(cfg, problems.append)
    _check_trainer(cfg, problems.append)
    _check_world_extras(cfg, problems.append)
    if problems:
        lines = "\n".join(f"  {p}" for p in problems)
        count = f"{len(problems)} problem" + ("s" if len(problems) > 1 else "")
        raise ConfigError(f"invalid config ({count}):\n{lines}")
    return cfg
