"""On 8 fake CPU devices, sharded forwards equal the single-device forward and params follow
the rules table."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hf_fixtures import make_hf_model, save_hf_dir
from jax.sharding import PartitionSpec as P

from mimojax import sharding as sh
from mimojax.models import Decoder, load_model
from mimojax.models.hf_io import load_hf_model

MESHES = {
    "fsdp": ({"data": 1, "fsdp": -1, "tensor": 1}, "fsdp"),
    "fsdp_tensor": ({"data": 1, "fsdp": 4, "tensor": 2}, "fsdp_tensor"),
    "data_fsdp_tensor": ({"data": 2, "fsdp": 2, "tensor": 2}, "fsdp_tensor"),
}


def test_eight_fake_devices():
    assert jax.device_count() == 8


def _expected_spec(axes, shape, mesh, rules):
    spec = []
    for name, dim in zip(axes, shape):
        target = rules.get(name)
        size = 1 if target is None else int(np.prod([mesh.shape[a] for a in np.atleast_1d(target)]))
        spec.append(target if target is not None and dim % size == 0 else None)
    return P(*spec)


@pytest.mark.parametrize("name", sorted(MESHES))
def test_sharded_forward_matches_single_device(name, tmp_path):
    mesh_cfg, preset = MESHES[name]
    mesh, rules = sh.make_mesh(mesh_cfg), sh.get_rules(preset)
    path = save_hf_dir(make_hf_model("qwen3", tied=False), tmp_path)
    single = load_hf_model(path)
    sharded = load_hf_model(path, mesh=mesh, rules=rules)
    for path_, var in nnx.to_flat_state(nnx.state(sharded, nnx.Param)):
        arr = var[...]
        expect = _expected_spec(var.get_metadata()["axes"], arr.shape, mesh, rules)
        assert arr.sharding.spec == expect, path_
        assert arr.sharding.mesh.shape == mesh.shape
    ids = np.random.default_rng(0).integers(0, 96, (8, 10))
    mask = np.ones_like(ids)
    mask[3, 6:] = 0
    ids_sharded = jax.device_put(jnp.asarray(ids), sh.batch_sharding(mesh, rules))
    mask_sharded = jax.device_put(jnp.asarray(mask), sh.batch_sharding(mesh, rules))
    got = nnx.jit(lambda m, i, k: m(i, attention_mask=k))(sharded, ids_sharded, mask_sharded)
    want = single(jnp.asarray(ids), attention_mask=jnp.asarray(mask))
    assert np.abs(np.asarray(got) - np.asarray(want)).max() < 1e-5


def test_tensor_axis_actually_splits_heads():
    mesh, rules = sh.make_mesh(MESHES["fsdp_tensor"][0]), sh.get_rules("fsdp_tensor")
    model, _ = load_model("tiny-random-qwen3", mesh=mesh, rules=rules)
    q = model.layers.q_proj[...]  # [layers, embed, heads, head_dim]
    assert q.sharding.spec == P(None, "fsdp", "tensor", None)
    shard_shapes = {s.data.shape for s in q.addressable_shards}
    assert shard_shapes == {(2, 64 // 4, 4 // 2, 16)}


def test_uneven_dimension_is_replicated():
    mesh = sh.make_mesh({"data": 1, "fsdp": 4, "tensor": 2})
    spec = sh.logical_to_spec(("kv_heads", "embed"), (3, 576), mesh, sh.get_rules("fsdp_tensor"))
    assert spec == P(None, "fsdp")  # SmolLM2's 3 KV heads on a 2-way tensor axis
    mesh = sh.make_mesh({"data": 1, "fsdp": 8, "tensor": 1})
    spec = sh.logical_to_spec(("embed",), (36,), mesh, sh.get_rules("fsdp"))
    assert spec == P(None)


def test_create_sharded_never_builds_unsharded_and_matches_eager_init():
    mesh, rules = sh.make_mesh(MESHES["fsdp"][0]), sh.get_rules("fsdp")
    model, _ = load_model("tiny-random-llama", seed=3)
    cfg = model.config
    sharded = sh.create_sharded(lambda: Decoder(cfg, rngs=nnx.Rngs(3)), mesh, rules)
    assert sharded.layers.gate_proj[...].sharding.spec == P(None, "fsdp", None)
    np.testing.assert_allclose(
        np.asarray(sharded.layers.gate_proj[...]),
        np.asarray(model.layers.gate_proj[...]),
        atol=1e-7,
    )


def test_reshard_between_meshes_preserves_values():
    devices = jax.devices()
    mesh_a = sh.make_mesh({"fsdp": -1}, devices[:4])
    mesh_b = sh.make_mesh({"data": 1, "fsdp": 2, "tensor": 2}, devices[4:])
    model, _ = load_model("tiny-random-qwen2", mesh=mesh_a)
    state = nnx.state(model, nnx.Param)
    target = sh.param_shardings(state, mesh_b, sh.get_rules("fsdp_tensor"))
    moved = sh.reshard(state, target)
    for (p, a), (_, b) in zip(nnx.to_flat_state(state), nnx.to_flat_state(moved)):
        np.testing.assert_array_equal(np.asarray(a[...]), np.asarray(b[...]), err_msg=str(p))
        assert set(b[...].devices()) <= set(devices[4:])


def test_mesh_config_errors_name_the_keys():
    with pytest.raises(ValueError, match="mesh.data \\* mesh.fsdp \\* mesh.tensor = 3"):
        sh.make_mesh({"data": 3, "fsdp": 1, "tensor": 1})
    with pytest.raises(ValueError, match="at most one"):
        sh.make_mesh({"data": -1, "fsdp": -1})
    with pytest.raises(ValueError, match="sharding.preset"):
        sh.get_rules("zero3")


def test_model_from_run_config_follows_mesh_and_preset():
    from mimojax.config.loader import load_config
    from mimojax.train.roles import load_actor_model

    cfg = load_config(
        "configs/grpo_tiny.py:model=tiny-random-qwen3",
        ["mesh.fsdp=4", "mesh.tensor=2", "sharding.preset=fsdp_tensor"],
    )
    model, tok, mesh, rules = load_actor_model(cfg)
    assert dict(mesh.shape) == {"data": 1, "fsdp": 4, "tensor": 2}
    assert model.layers.gate_proj[...].sharding.spec == P(None, "fsdp", "tensor")
    assert model.config.model_type == "qwen3" and tok.eos_token_id == model.config.eos_token_id


def test_each_checkpoint_tensor_is_read_once_on_an_8_device_mesh(tmp_path):
    from collections import Counter

    from mimojax.models.hf_io import SafetensorsReader, read_hf_config
    from mimojax.models.weights import build_model

    path = save_hf_dir(make_hf_model("llama", tied=False), tmp_path)
    reader, reads = SafetensorsReader(path), Counter()

    def counting_read(name):
        reads[name] += 1
        return reader(name)

    mesh, rules = sh.make_mesh(MESHES["data_fsdp_tensor"][0]), sh.get_rules("fsdp_tensor")
    model = build_model(read_hf_config(path), counting_read, mesh, rules)
    assert set(reads) == set(reader.files) and set(reads.values()) == {1}
    assert model.layers.down_proj[...].sharding.spec == P(None, "tensor", "fsdp")


def test_save_from_sharded_model_round_trips(tmp_path):
    from mimojax.models.hf_io import save_hf_model

    path = save_hf_dir(make_hf_model("qwen2", tied=False), tmp_path / "src")
    mesh, rules = sh.make_mesh(MESHES["fsdp_tensor"][0]), sh.get_rules("fsdp_tensor")
    sharded = load_hf_model(path, mesh=mesh, rules=rules)
    save_hf_model(sharded, str(tmp_path / "out"), max_shard_bytes=100_000)
    again = load_hf_model(str(tmp_path / "out"))
    for (p, a), (_, b) in zip(
        nnx.to_flat_state(nnx.state(sharded, nnx.Param)),
        nnx.to_flat_state(nnx.state(again, nnx.Param)),
    ):
        np.testing.assert_array_equal(np.asarray(a[...]), np.asarray(b[...]), err_msg=str(p))


def test_shard_module_moves_an_existing_model_onto_a_mesh():
    model, _ = load_model("tiny-random-llama", seed=5)
    before = np.asarray(model.layers.up_proj[...])
    mesh, rules = sh.make_mesh(MESHES["fsdp_tensor"][0]), sh.get_rules("fsdp_tensor")
    sh.shard_module(model, mesh, rules)
    assert model.layers.up_proj[...].sharding.spec == P(None, "fsdp", "tensor")
    np.testing.assert_array_equal(np.asarray(model.layers.up_proj[...]), before)
