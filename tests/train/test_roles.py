"""The roles built from a real config (configs/grpo_tiny.py): engine, sampling, errors."""

import pytest

from mimojax.config.loader import ConfigError, load_config
from mimojax.engine import SamplingParams, generate
from mimojax.train.roles import engine_from_config, load_actor_model, sampling_from_config


def test_engine_from_grpo_tiny_config():
    cfg = load_config("configs/grpo_tiny.py", ["rollout.top_k=-1", "rollout.temperature=0.9"])
    model, tok, mesh, _ = load_actor_model(cfg)
    engine = engine_from_config(cfg, model, tok)
    assert engine.max_concurrent_decodes == cfg.rollout.max_concurrent_decodes
    assert engine.max_cache_length == cfg.data.max_prompt_length + cfg.rollout.max_new_tokens
    sampling = sampling_from_config(cfg)
    assert sampling == SamplingParams(
        temperature=0.9, top_k=0, max_new_tokens=16, stop_token_ids=()
    )
    assert sampling_from_config(cfg, greedy=True).temperature == 0.0
    out = generate(engine, [tok.encode("hello there")], n=cfg.rollout.n, sampling=sampling)
    assert len(out[0]) == cfg.rollout.n


def test_bad_rollout_values_name_the_key():
    cfg = load_config("configs/grpo_tiny.py", ["rollout.top_p=1.5"])
    with pytest.raises(ConfigError, match=r"rollout\.\*: .*top_p"):
        sampling_from_config(cfg)
    cfg = load_config("configs/grpo_tiny.py", ["rollout.max_concurrent_decodes=0"])
    model, tok, _, _ = load_actor_model(cfg)
    with pytest.raises(ConfigError, match="max_concurrent_decodes=0"):
        engine_from_config(cfg, model, tok)


def test_engine_on_an_8_device_mesh_matches_one_device():
    from mimojax.models import load_model

    cfg = load_config(
        "configs/grpo_tiny.py",
        ["mesh.data=2", "mesh.fsdp=2", "mesh.tensor=2", "sharding.preset=fsdp_tensor"],
    )
    model, tok, mesh, _ = load_actor_model(cfg)
    sharded = engine_from_config(cfg, model, tok)
    assert sharded.mesh is mesh
    cache_sharding = sharded.init_decode_state().cache.k_L[0].sharding
    assert cache_sharding.spec[0] == ("data", "fsdp")  # slots split over data-parallel axes
    single_model, _ = load_model(cfg.model.name_or_path, dtype="float32")
    single = engine_from_config(cfg, single_model, tok)
    prompts = [tok.encode("one two"), tok.encode("three"), tok.encode("a b c d e")]
    greedy = sampling_from_config(cfg, greedy=True)
    got = generate(sharded, prompts, sampling=greedy)
    want = generate(single, prompts, sampling=greedy)
    assert [r[0].token_ids for r in got] == [r[0].token_ids for r in want]
    assert sharded.compile_counts()["generate"] == 1
