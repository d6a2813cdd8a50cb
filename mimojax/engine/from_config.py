"""The engine and its sampling settings from a run config's `rollout` section."""

from __future__ import annotations

from mimojax.config import ConfigError
from mimojax.engine.engine import EngineError, JaxEngine
from mimojax.engine.sampling import SamplingError, SamplingParams


def sampling_from_config(cfg, greedy: bool = False) -> SamplingParams:
    """SamplingParams from cfg.rollout (greedy=True for evaluation); errors name the key."""
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


def engine_from_config(cfg, model, tokenizer, mesh=None) -> JaxEngine:
    """A JaxEngine sized by data.max_prompt_length, rollout.max_new_tokens and slots."""
    prefill = int(cfg.data.max_prompt_length)
    try:
        return JaxEngine(
            model,
            tokenizer,
            max_concurrent_decodes=int(cfg.rollout.max_concurrent_decodes),
            max_prefill_length=prefill,
            max_cache_length=prefill + int(cfg.rollout.max_new_tokens),
            mesh=mesh,
        )
    except EngineError as e:
        raise ConfigError(
            f"rollout.max_concurrent_decodes / data.max_prompt_length / rollout.max_new_tokens: {e}"
        ) from None
