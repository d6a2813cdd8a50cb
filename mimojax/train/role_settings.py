"""The plain-value settings a run config gives the loop and the actor's loss.

`roles.py` calls these: the trainer gets a frozen `LoopSpec` and the jitted update an
`ActorHParams`, so nothing below the roles layer reads a run config.
"""

from __future__ import annotations

import dataclasses
import inspect

from ml_collections import ConfigDict

from mimojax.algos import EntropyController, KLController
from mimojax.algos.advantage_stage import AdvantageSettings
from mimojax.algos.optimizer import OptimizerSettings
from mimojax.algos.registry import POLICY_LOSSES
from mimojax.data.prompts import DataError, PromptDataset, read_rows
from mimojax.distributed import is_main_process
from mimojax.rollout.agents import AgentSettings
from mimojax.rollout.tools import ToolSettings
from mimojax.train.step import ActorHParams


def policy_loss_options(loss_name: str, algo_cfg) -> tuple:
    """The config's clip settings that this policy loss accepts, as hashable pairs."""
    core = POLICY_LOSSES[loss_name].core
    accepted = {
        p.name for p in inspect.signature(core).parameters.values() if p.kind == p.KEYWORD_ONLY
    }
    given = {
        "clip_low": float(algo_cfg.clip_ratio_low),
        "clip_high": float(algo_cfg.clip_ratio_high),
        "clip_c": float(algo_cfg.clip_ratio_c),
    }
    return tuple(sorted((k, v) for k, v in given.items() if k in accepted))


def actor_hparams_from_config(cfg, *, on_policy: bool) -> ActorHParams:
    """The actor loss's static settings from a run config (`algorithm.*`, `rollout.*`)."""
    a, r, rc = cfg.algorithm, cfg.rollout, cfg.algorithm.rollout_correction
    return ActorHParams(
        policy_loss=a.policy_loss,
        loss_options=policy_loss_options(a.policy_loss, a),
        agg_mode=a.loss_agg_mode,
        temperature=float(r.temperature) or 1.0,
        top_k=max(int(r.top_k), 0),
        top_p=float(r.top_p),
        logprob_chunk=int(cfg.model.logprob_chunk_size) or 1 << 30,
        entropy_coeff=float(a.entropy_coeff),
        use_kl_loss=bool(a.use_kl_loss),
        kl_coef=float(a.kl_loss_coef),
        kl_type=a.kl_loss_type,
        on_policy=on_policy,
        rollout_is=rc.rollout_is,
        rollout_is_threshold=float(rc.rollout_is_threshold),
        rollout_is_batch_normalize=bool(rc.rollout_is_batch_normalize),
        rollout_rs=rc.rollout_rs,
        rollout_rs_threshold=rc.rollout_rs_threshold,
        bypass_mode=bool(rc.bypass_mode),
    )


@dataclasses.dataclass(frozen=True)
class LoopSpec:
    """Everything the trainer's loop reads, as plain values (the loop never sees the config)."""

    total_steps: int
    batch_size: int  # prompts per step (= GRPO groups)
    n: int  # samples per prompt
    max_new_tokens: int
    response_len: int  # R of a batch: max_new_tokens, or an agent's whole multi-turn budget
    ppo_epochs: int
    mini_batch_size: int  # prompts per optimizer update
    micro_batch_size: int  # samples per forward/backward pass
    micro_batch_tokens: int  # > 0: token-budget micro-batches instead of row ones
    shuffle_mini_batches: bool
    seed: int
    advantage: AdvantageSettings
    kl_ctrl: KLController
    entropy_ctrl: EntropyController  # algorithm.entropy_control (target 0: off)
    eval_every: int
    eval_at_minutes: tuple[float, ...]
    eval_at_start: bool
    eval_at_end: bool
    eval_pass_k: int
    time_limit_minutes: float
    checkpoint_every: int
    preemption_grace_s: float  # SIGTERM to SIGKILL on the platform: the save must fit in it
    logger_kwargs: dict  # MetricsLogger's keyword arguments (jsonl, wandb_*)
    run_info: dict  # what run_info.json records about the run
    dynamic_sampling: bool = False  # DAPO: generate until batch_size informative groups
    max_num_gen_batches: int = 1  # ... drawing at most this many generation batches per step
    mode: str = "sync"  # "sync" | "one_step_off" | "async" (mimojax/rollout/async_buffer.py)
    max_off_policy_steps: int = 1  # async: staleness bound
    staleness_policy: str = "wait"  # async: "wait" | "drop"
    sync_every_steps: int = 1  # async: weights reach the producer after every k-th update
    partial_rollouts: bool = False  # async: in-flight trajectories continue under new weights
    flow: str = "batch"  # async: "batch" | "stream" (units as they finish: rollout/stream.py)
    long_response_tokens: int = 0  # async/long_share/*: "long" above this; 0 = sampled median


def advantage_settings(cfg: ConfigDict) -> AdvantageSettings:
    """The advantage stage's static settings from `algorithm.*`, `reward.overlong_buffer.*`."""
    a, ob = cfg.algorithm, cfg.reward.overlong_buffer
    return AdvantageSettings(
        estimator=a.adv_estimator,
        gamma=float(a.gamma),
        lam=float(a.lam),
        norm_by_std=bool(a.norm_adv_by_std_in_grpo),
        overlong_enable=bool(ob.enable),
        overlong_max_response_len=int(cfg.rollout.max_new_tokens),
        overlong_buffer_len=int(ob.len),
        overlong_penalty_factor=float(ob.penalty_factor),
        use_kl_in_reward=bool(a.use_kl_in_reward),
        kl_type=a.kl_loss_type,
        filter_groups=bool(a.filter_groups) or bool(a.dynamic_sampling.enable),
        truncated=str(a.truncated_responses),
        num_groups=int(cfg.data.batch_size),
    )


def agent_settings(cfg: ConfigDict) -> AgentSettings:
    """Agent-loop limits (`rollout.agent.*`) and the tools' sandbox limits (`sandbox.*`)."""
    ag, sb = cfg.rollout.agent, cfg.sandbox
    return AgentSettings(
        default=ag.default,
        max_turns=int(ag.max_turns),
        max_tool_calls=int(ag.max_tool_calls),
        max_response_tokens=int(ag.max_response_tokens),
        max_wall_s=float(ag.max_wall_s),
        reuse_kv=bool(ag.reuse_kv),
        tools=ToolSettings(
            timeout_s=float(sb.timeout_s),
            memory_mb=int(sb.memory_mb),
            allow_unsandboxed=bool(sb.allow_unsandboxed),
        ),
    )


def uses_agent_loops(cfg: ConfigDict) -> bool:
    """Whether the default loop or any data row (`agent` field) is multi-turn."""
    if cfg.rollout.agent.default != "single_turn":
        return True
    d = cfg.data
    for path in [*d.train_files, *d.eval_files]:
        rows = read_rows(path, prompt_key=d.prompt_key, default_env=d.get("default_env", None))
        if any(row["agent"] not in (None, "single_turn") for row in rows):
            return True
    return False


def response_len(cfg: ConfigDict) -> int:
    """Response tokens per trajectory: one turn's budget, or a multi-turn agent's whole one
    (the batch's R and the engine's cache beyond the prompt)."""
    single = int(cfg.rollout.max_new_tokens)
    if uses_agent_loops(cfg):
        return max(single, int(cfg.rollout.agent.max_response_tokens))
    return single


def loop_spec(cfg: ConfigDict) -> LoopSpec:
    """The loop's settings from `trainer.*`, `eval.*`, `checkpoint.*`, `logging.*` ..."""
    t, a, ev, wb = cfg.trainer, cfg.algorithm, cfg.eval, cfg.logging.wandb
    kc = a.kl_ctrl
    return LoopSpec(
        total_steps=int(t.total_steps),
        batch_size=int(cfg.data.batch_size),
        n=int(cfg.rollout.n),
        max_new_tokens=int(cfg.rollout.max_new_tokens),
        response_len=response_len(cfg),
        ppo_epochs=int(t.ppo_epochs),
        mini_batch_size=int(t.mini_batch_size),
        micro_batch_size=int(t.micro_batch_size),
        micro_batch_tokens=int(t.get("micro_batch_tokens", 0)),
        shuffle_mini_batches=bool(t.shuffle_mini_batches),
        seed=int(t.seed),
        advantage=advantage_settings(cfg),
        kl_ctrl=KLController(float(kc.kl_coef), kc.type, float(kc.target_kl), float(kc.horizon)),
        entropy_ctrl=EntropyController(
            float(a.entropy_control.target),
            float(a.entropy_control.delta),
            float(a.entropy_control.max_coeff),
        ),
        eval_every=int(t.eval_every),
        eval_at_minutes=tuple(float(m) for m in t.eval_at_minutes),
        eval_at_start=bool(ev.at_start),
        eval_at_end=bool(ev.at_end),
        eval_pass_k=int(ev.pass_k),
        time_limit_minutes=float(t.time_limit_minutes),
        checkpoint_every=int(cfg.checkpoint.every_steps),
        preemption_grace_s=float(cfg.checkpoint.preemption_grace_s),
        dynamic_sampling=bool(a.dynamic_sampling.enable),
        max_num_gen_batches=int(a.dynamic_sampling.max_num_gen_batches),
        mode=t.mode,
        max_off_policy_steps=int(t.max_off_policy_steps),
        staleness_policy=t.staleness_policy,
        sync_every_steps=int(t.sync_every_steps),
        partial_rollouts=bool(t.partial_rollouts),
        flow=t.flow,
        long_response_tokens=int(t.long_response_tokens),
        logger_kwargs=dict(  # multi-host: only process 0 writes metrics
            jsonl=bool(cfg.logging.jsonl) and is_main_process(),
            wandb_mode=wb.mode if is_main_process() else "disabled",
            wandb_project=wb.project,
            wandb_entity=wb.entity,
            wandb_name=wb.name,
            config=cfg.to_dict(),
        ),
        run_info={
            "model": cfg.model.name_or_path,
            "algorithm": a.adv_estimator,
            "policy_loss": a.policy_loss,
            "batch": f"{cfg.data.batch_size} prompts x {cfg.rollout.n} samples",
            "max_new_tokens": int(cfg.rollout.max_new_tokens),
            "roles": "colocated" if not tuple(cfg.roles.rollout.devices) else "split",
            "mode": t.mode,
            "cost": {k: float(v) for k, v in cfg.cost.items()},  # $/hour, 0 = unknown
        },
    )


def prompt_dataset(cfg: ConfigDict, tokenizer, split: str) -> PromptDataset:
    """The train or eval PromptDataset described by ``cfg.data``."""
    d = cfg.data
    if split not in ("train", "eval"):
        raise DataError(f"split must be 'train' or 'eval', got {split!r}")
    key = "train_files" if split == "train" else "eval_files"
    files = d[key]
    files = [files] if isinstance(files, str) else list(files or ())
    if not files:
        raise DataError(f"data.{key} is empty: give at least one .jsonl or .parquet file")
    return PromptDataset(
        files,
        tokenizer,
        max_prompt_length=int(d.max_prompt_length),
        batch_size=int(d.batch_size),
        prompt_key=str(d.prompt_key),
        shuffle=bool(d.shuffle) if split == "train" else False,
        seed=int(d.seed),
        system_prompt=d.get("system_prompt", None),
        default_env=d.get("default_env", None),
        difficulty=_difficulty_kwargs(d) if split == "train" else None,
    )


def _difficulty_kwargs(d) -> dict | None:
    dd = d.get("difficulty", None)
    if dd is None or not dd.enable:
        return None
    return {"floor": float(dd.floor), "success_threshold": float(dd.success_threshold)}


def optimizer_settings(opt_cfg: ConfigDict, lr: float | None = None) -> OptimizerSettings:
    """`optimizer.*` as plain values; `lr` replaces the peak rate (the critic's `critic.lr`)."""
    return OptimizerSettings(
        name=str(opt_cfg.name),
        lr=float(opt_cfg.lr if lr is None else lr),
        betas=tuple(float(b) for b in opt_cfg.betas),
        eps=float(opt_cfg.eps),
        weight_decay=float(opt_cfg.weight_decay),
        warmup_steps=int(opt_cfg.warmup_steps),
        schedule=str(opt_cfg.schedule),
        min_lr_ratio=float(opt_cfg.min_lr_ratio),
        grad_clip=float(opt_cfg.grad_clip),
    )
