"""update_params swaps weights (cast and resharded) without recompiling, and stamps versions."""

import jax
import numpy as np
import pytest
from engine_fixtures import prompts, tiny_engine
from flax import nnx
from tiny_configs import TINY_CONFIGS

from mimojax import sharding as sh
from mimojax.engine import EngineError, JaxEngine, SamplingParams, generate
from mimojax.models import Decoder

GREEDY = SamplingParams(temperature=0.0, max_new_tokens=8, ignore_eos=True)


def _tokens(out):
    return [[c.token_ids for c in r] for r in out]


def test_update_params_changes_outputs_without_recompiling():
    engine, model = tiny_engine("qwen2", seed=0, slots=2)
    other_engine, other = tiny_engine("qwen2", seed=1, slots=2)
    ps = prompts(model.config.vocab_size, (5, 12, 3))
    before = generate(engine, ps, sampling=GREEDY)
    expected_after = _tokens(generate(other_engine, ps, sampling=GREEDY))
    assert _tokens(before) != expected_after
    counts = engine.compile_counts()
    assert engine.update_params(nnx.state(other), version=7) == 7
    after = generate(engine, ps, sampling=GREEDY)
    assert _tokens(after) == expected_after
    assert engine.compile_counts() == counts  # same avals and shardings: no recompilation
    assert {c.policy_version for r in before for c in r} == {0}
    assert {c.policy_version for r in after for c in r} == {7}
    engine.update_params(model)  # a module works too; version defaults to +1
    assert engine.policy_version == 8
    assert _tokens(generate(engine, ps, sampling=GREEDY)) == _tokens(before)
    assert engine.compile_counts() == counts


def test_update_params_casts_and_reshards_from_a_training_mesh():
    cfg = TINY_CONFIGS["llama_tied"]
    engine, _ = tiny_engine("llama_tied", seed=0, slots=2)
    mesh = sh.make_mesh({"data": 1, "fsdp": 4, "tensor": 2}, jax.devices()[:8])
    trainer_model = sh.create_sharded(
        lambda: Decoder(cfg.replace(param_dtype="bfloat16"), rngs=nnx.Rngs(5)),
        mesh,
        sh.get_rules("fsdp_tensor"),
    )
    ps = [[1, 2, 3], [9, 8, 7, 6, 5]]
    generate(engine, ps, sampling=GREEDY)  # compiles every shape the run below uses
    counts = engine.compile_counts()
    engine.update_params(nnx.state(trainer_model))
    for leaf in jax.tree.leaves(engine.load_params()):
        assert leaf.dtype == np.float32 and len(leaf.sharding.device_set) == 1
    reference = JaxEngine(
        Decoder(cfg, rngs=nnx.Rngs(0)),
        None,
        max_concurrent_decodes=2,
        max_prefill_length=32,
        max_cache_length=64,
    )
    reference.update_params(jax.device_get(nnx.state(trainer_model)))
    assert _tokens(generate(engine, ps, sampling=GREEDY)) == _tokens(
        generate(reference, ps, sampling=GREEDY)
    )
    assert engine.compile_counts() == counts


def test_update_params_rejects_another_model():
    engine, _ = tiny_engine("qwen2", slots=2)
    wrong = Decoder(TINY_CONFIGS["qwen3"], rngs=nnx.Rngs(0))
    with pytest.raises(EngineError, match="update_params"):
        engine.update_params(nnx.state(wrong))


def test_release_params_drops_the_weights_until_the_next_update():
    """A colocated trainer frees the engine's copy during its update; the next sync restores it."""
    engine, model = tiny_engine("qwen2", seed=0, slots=2)
    ps = prompts(model.config.vocab_size, (5, 3))
    before = _tokens(generate(engine, ps, sampling=GREEDY))
    engine.release_params()
    assert engine.load_params() is None
    assert engine.update_params(model, version=3) == 3
    assert _tokens(generate(engine, ps, sampling=GREEDY)) == before
