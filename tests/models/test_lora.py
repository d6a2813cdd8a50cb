"""LoRA adapters on the tiny random models: exact base at B = 0, the adapter forward against a
float64 NumPy W + A B alpha / r, merged = unmerged, the merged export in transformers, targets,
sharding, dropout only in a training forward."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import transformers
from flax import nnx
from hf_fixtures import torch_logits
from jax.sharding import Mesh

from mimojax import sharding as sh
from mimojax.models.loader import load_model, save_hf
from mimojax.models.lora import (
    LINEARS,
    LoRAError,
    LoRAParam,
    add_lora,
    lora_linear,
    lora_model,
    merged_model,
    split_lora,
)

MODELS = ("tiny-random-llama", "tiny-random-qwen2")
IDS_BxT = np.array([[5, 17, 230, 9, 41, 7, 300, 12], [8, 3, 99, 1000, 4, 2, 6, 77]])


def _random_adapters(adapters, seed=1, scale=0.2):
    """Adapters with random B (and A), so the adapter term is far from zero."""
    leaves, treedef = jax.tree.flatten(adapters)
    keys = jax.random.split(jax.random.key(seed), len(leaves))
    new = [scale * jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves)]
    return jax.tree.unflatten(treedef, new)


def _lora(name, rank=4, alpha=8.0, **kw):
    model, tok = load_model(name)
    return add_lora(model, rank, alpha, **kw), tok


@pytest.mark.parametrize("name", MODELS)
def test_zero_b_is_the_base_model_exactly(name):
    base, _ = load_model(name)
    want = np.asarray(base(jnp.asarray(IDS_BxT)))
    model, _ = _lora(name, dropout=0.1)
    assert len(nnx.to_flat_state(nnx.state(model, LoRAParam))) == 2 * len(LINEARS)
    np.testing.assert_array_equal(np.asarray(model(jnp.asarray(IDS_BxT))), want)


def test_adapter_linears_match_float64_reference():
    model, _ = _lora("tiny-random-qwen2", rank=4, alpha=8.0)
    graphdef, base, adapters = split_lora(model)
    model = lora_model(graphdef, base, _random_adapters(adapters))
    p = {k: np.asarray(v[1]) for k, v in model.layers.stacked().items()}  # layer 1
    for name, n_in in LINEARS.items():
        w = p[name]
        fan_in = int(np.prod(w.shape[:n_in]))
        x = np.random.default_rng(0).normal(size=(2, 3, *w.shape[:n_in])).astype(np.float32)
        got = np.asarray(lora_linear(jnp.asarray(x), p, name, model.layers.lora, n_in))
        a, b = p[f"{name}_lora_a"].astype(np.float64), p[f"{name}_lora_b"].astype(np.float64)
        w_eff = w.reshape(fan_in, -1).astype(np.float64) + (
            a.reshape(fan_in, 4) @ b.reshape(4, -1)
        ) * (8.0 / 4)
        x_NxI = x.reshape(-1, fan_in).astype(np.float64)
        want = (x_NxI @ w_eff).reshape(got.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
        base_out = (x_NxI @ w.reshape(fan_in, -1)).reshape(got.shape)
        assert np.abs(want - base_out).max() > 1e-2, name  # the adapter term is not negligible


@pytest.mark.parametrize("name", MODELS)
def test_merged_weights_give_the_adapters_logits_and_transformers_agrees(name, tmp_path):
    model, tok = _lora(name, rank=4, alpha=8.0)
    graphdef, base, adapters = split_lora(model)
    model = lora_model(graphdef, base, _random_adapters(adapters))
    ids = jnp.asarray(IDS_BxT)
    with_adapters = np.asarray(model(ids))
    merged = merged_model(model)
    assert not nnx.state(merged, LoRAParam) and merged.layers.lora is None
    np.testing.assert_allclose(np.asarray(merged(ids)), with_adapters, atol=1e-5, rtol=0)
    base_logits = np.asarray(nnx.merge(*nnx.split(load_model(name)[0]))(ids))
    assert np.abs(with_adapters - base_logits).max() > 1e-2  # the adapters matter
    save_hf(merged, tok, str(tmp_path / "hf"))
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    got = torch_logits(reloaded, IDS_BxT, np.ones_like(IDS_BxT))
    np.testing.assert_allclose(got, with_adapters, atol=1e-4, rtol=0)


def test_targets_select_linears_and_unmatched_ones_are_named():
    model, _ = _lora("tiny-random-llama", targets=(r"q_proj", r"(up|down)_proj"))
    assert model.layers.lora.targets == ("q_proj", "up_proj", "down_proj")
    names = {p[-1] for p, _ in nnx.to_flat_state(nnx.state(model, LoRAParam))}
    assert names == {f"{n}_lora_{s}" for n in ("q_proj", "up_proj", "down_proj") for s in "ab"}
    with pytest.raises(LoRAError, match=r"model\.lora\.targets: \['attn'\].*available: q_proj"):
        add_lora(load_model("tiny-random-llama")[0], 4, 8.0, targets=("q_proj", "attn"))
    with pytest.raises(LoRAError, match=r"model\.lora\.rank"):
        add_lora(load_model("tiny-random-llama")[0], 0, 8.0)


def test_adapters_carry_logical_axes_and_shard_on_the_mesh():
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(1, 8, 1), sh.MESH_AXES)
    rules = sh.get_rules("fsdp")
    model, _ = load_model("tiny-random-qwen2", mesh=mesh, rules=rules)
    add_lora(model, 4, 8.0, mesh=mesh, rules=rules)
    a, b = model.layers.q_proj_lora_a, model.layers.q_proj_lora_b
    assert a.get_metadata()["axes"] == ("layers", "embed", "lora_rank")
    assert b.get_metadata()["axes"] == ("layers", "lora_rank", "heads", "head_dim")
    assert a[...].sharding.spec == jax.sharding.PartitionSpec(None, "fsdp", None)
    assert model.layers.o_proj_lora_b[...].sharding.spec[-1] == "fsdp"  # [L, r, embed]
    single, _ = _lora("tiny-random-qwen2")
    ids = jnp.asarray(IDS_BxT)
    np.testing.assert_allclose(np.asarray(model(ids)), np.asarray(single(ids)), atol=1e-5)


def test_dropout_only_in_a_training_forward():
    model, _ = _lora("tiny-random-llama", rank=4, alpha=8.0, dropout=0.5)
    graphdef, base, adapters = split_lora(model)
    adapters = _random_adapters(adapters)
    ids = jnp.asarray(IDS_BxT)
    evaluated = np.asarray(lora_model(graphdef, base, adapters)(ids))
    np.testing.assert_array_equal(evaluated, np.asarray(lora_model(graphdef, base, adapters)(ids)))
    train_a = np.asarray(lora_model(graphdef, base, adapters, ids)(ids))
    train_b = np.asarray(lora_model(graphdef, base, adapters, ids)(ids))
    np.testing.assert_array_equal(train_a, train_b)  # the same micro-batch draws the same masks
    assert np.abs(train_a - evaluated).max() > 1e-3
