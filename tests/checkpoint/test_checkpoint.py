"""Checkpointer: bitwise round trips, retention, async saves, kills mid-save, sharded restores."""

import os
import signal
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from mimojax.algos.optimizer import init_state
from mimojax.checkpoint.fingerprint import check_fingerprint, model_fingerprint
from mimojax.checkpoint.manager import Checkpointer, CheckpointError, abstract_like, to_pure
from mimojax.models.registry import TINY_MODELS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _state(seed: int = 0) -> dict:
    """A nested state with every dtype a run saves, filled with non-trivial bit patterns."""
    k = jax.random.split(jax.random.key(seed), 4)
    params = {
        "embed": jax.random.normal(k[0], (8, 4), jnp.float32),
        "layers": {"0": {"w": jax.random.normal(k[1], (4, 4)).astype(jnp.bfloat16)}},
    }
    return {
        "actor": init_state(params, optax.adamw(1e-3)),
        "counts": jax.random.randint(k[2], (5,), -1000, 1000, jnp.int32),
        "rng": jax.random.key_data(k[3]),  # uint32
    }


def _assert_bitwise(a, b):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert np.asarray(x).tobytes() == np.asarray(y).tobytes()


def test_round_trip_is_bitwise_and_keeps_types(tmp_path):
    state = _state()
    # A few updates so adam's mu/nu/count hold real values, not zeros.
    opt = optax.adamw(1e-3)
    grads = jax.tree.map(jnp.ones_like, state["actor"].params)
    for _ in range(2):
        upd, opt_state = opt.update(grads, state["actor"].opt_state, state["actor"].params)
        state["actor"] = state["actor"]._replace(opt_state=opt_state)
    meta = {"data": {"epoch": 1, "index": 37}, "policy_version": 5}
    with Checkpointer(str(tmp_path / "ck"), async_save=False) as ck:
        ck.save(7, state, meta)
        restored, got_meta = ck.restore(7, state)
    _assert_bitwise(restored, state)
    assert type(restored["actor"]) is type(state["actor"])
    assert got_meta == {**meta, "step": 7}
    assert restored["rng"].dtype == jnp.uint32
    # The rng stream continues exactly where it stopped.
    key = jax.random.wrap_key_data(restored["rng"])
    want = jax.random.wrap_key_data(state["rng"])
    assert np.array_equal(jax.random.uniform(key, (3,)), jax.random.uniform(want, (3,)))


def test_restore_from_shape_dtype_structs_in_a_fresh_manager(tmp_path):
    state = _state(1)
    with Checkpointer(str(tmp_path), async_save=False) as ck:
        ck.save(1, state, {})
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
    with Checkpointer(str(tmp_path)) as ck:
        assert ck.latest_step() == 1
        restored, meta = ck.restore(None, abstract)
        assert ck.read_meta() == {"step": 1} == meta
    _assert_bitwise(restored, state)


def test_keep_deletes_the_oldest(tmp_path):
    with Checkpointer(str(tmp_path), keep=2, async_save=False) as ck:
        for step in (1, 2, 3, 4):
            ck.save(step, {"x": jnp.full((2,), step, jnp.int32)}, {})
        assert ck.all_steps() == [3, 4]
        assert sorted(p for p in os.listdir(tmp_path) if p.isdigit()) == ["3", "4"]
        got, _ = ck.restore(3, {"x": jnp.zeros((2,), jnp.int32)})
    assert got["x"].tolist() == [3, 3]


def test_async_save_then_wait(tmp_path):
    state = {"w": jnp.arange(100_000, dtype=jnp.float32)}
    want = np.asarray(state["w"]).copy()
    ck = Checkpointer(str(tmp_path), async_save=True)
    live = {"w": state["w"] + 0}
    ck.save(5, live, {"k": "v"})
    # The next jitted step donates (deletes) the saved buffers while the write is in flight.
    live["w"].delete()
    ck.wait()
    assert ck.latest_step() == 5
    ck.close()
    # A new process-equivalent manager sees the committed step and its contents.
    with Checkpointer(str(tmp_path)) as again:
        got, meta = again.restore(5, state)
    assert np.asarray(got["w"]).tobytes() == want.tobytes()
    assert meta == {"k": "v", "step": 5}


def test_empty_directory(tmp_path):
    with Checkpointer(str(tmp_path / "none")) as ck:
        assert ck.latest_step() is None
        with pytest.raises(CheckpointError, match="no committed checkpoint in .*none"):
            ck.restore(None, {"x": jnp.zeros(1)})
        with pytest.raises(CheckpointError, match="no committed checkpoint at step 3"):
            ck.read_meta(3)


def test_uncommitted_tmp_dir_is_ignored_and_overwritten(tmp_path):
    with Checkpointer(str(tmp_path), async_save=False) as ck:
        ck.save(3, {"x": jnp.ones(2)}, {})
    # What a kill mid-save of step 4 leaves behind (orbax's tmp naming, with and without stamp).
    for name in ("4.orbax-checkpoint-tmp", "5.orbax-checkpoint-tmp-1700000000"):
        os.makedirs(tmp_path / name / "state")
        (tmp_path / name / "state" / "junk").write_bytes(b"\x00" * 10)
    with Checkpointer(str(tmp_path), async_save=False) as ck:
        assert ck.latest_step() == 3
        ck.save(4, {"x": jnp.full(2, 4.0)}, {"again": True})
        got, meta = ck.restore(None, {"x": jnp.zeros(2)})
    assert got["x"].tolist() == [4.0, 4.0] and meta["again"] is True


def test_kill_9_mid_async_save_resumes_from_the_last_commit(tmp_path):
    script = textwrap.dedent(
        """
        import os, signal, sys
        import jax.numpy as jnp
        from mimojax.checkpoint.manager import Checkpointer
        ck = Checkpointer(sys.argv[1])
        ck.save(1, {"w": jnp.full((4,), 1.0)}, {"n": 1})
        ck.wait()
        ck.save(2, {"w": jnp.arange(8_000_000, dtype=jnp.float32)}, {"n": 2})
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": ""}
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], cwd=REPO, env=env, capture_output=True
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    if "2" in os.listdir(tmp_path):
        pytest.skip("the 32 MB save committed before the kill landed")
    assert any(n.startswith("2.orbax-checkpoint-tmp") for n in os.listdir(tmp_path))
    with Checkpointer(str(tmp_path), async_save=False) as ck:
        assert ck.latest_step() == 1
        got, meta = ck.restore(None, {"w": jnp.zeros(4)})
        assert got["w"].tolist() == [1.0] * 4 and meta == {"n": 1, "step": 1}
        ck.save(2, {"w": jnp.zeros(4)}, {"n": 2})
        assert ck.all_steps() == [1, 2]


def test_mismatched_restore_target_names_the_leaf(tmp_path):
    state = {"actor": {"w": jnp.zeros((4, 8)), "b": jnp.zeros(8)}}
    with Checkpointer(str(tmp_path), async_save=False) as ck:
        ck.save(2, state, {})
        wrong_shape = {"actor": {"w": jnp.zeros((4, 16)), "b": jnp.zeros(8)}}
        with pytest.raises(CheckpointError) as e:
            ck.restore(2, wrong_shape)
        assert "step 2" in str(e.value) and str(tmp_path) in str(e.value)
        assert "actor.w: shape (4, 8) in the checkpoint vs (4, 16) wanted" in str(e.value)
        assert "actor.b" not in str(e.value)

        renamed = {"actor": {"w": jnp.zeros((4, 8)), "bias": jnp.zeros(8)}}
        with pytest.raises(CheckpointError) as e:
            ck.restore(2, renamed)
        assert "actor.b: in the checkpoint, not in the restore target" in str(e.value)
        assert "actor.bias: in the restore target, not in the checkpoint" in str(e.value)


def test_meta_must_be_json(tmp_path):
    with Checkpointer(str(tmp_path), async_save=False) as ck:
        with pytest.raises(CheckpointError, match="step 1: meta is not JSON-serializable"):
            ck.save(1, {"x": jnp.zeros(1)}, {"bad": object()})
        assert ck.latest_step() is None


def test_sharded_restore_onto_8_fake_devices(tmp_path):
    assert jax.device_count() == 8
    full = jnp.arange(16 * 6, dtype=jnp.float32).reshape(16, 6)
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("fsdp", "tensor"))
    saved_sharding = NamedSharding(mesh, P("fsdp", "tensor"))
    state = {"w": jax.device_put(full, saved_sharding), "v": full[0].astype(jnp.bfloat16)}
    with Checkpointer(str(tmp_path), async_save=False) as ck:
        ck.save(1, state, {})
        # Restore resharded: w over all 8 devices on one axis, v replicated.
        mesh8 = Mesh(np.array(jax.devices()), ("data",))
        target = {
            "w": jax.ShapeDtypeStruct(
                (16, 6), jnp.float32, sharding=NamedSharding(mesh8, P("data"))
            ),
            "v": jax.ShapeDtypeStruct((6,), jnp.bfloat16, sharding=NamedSharding(mesh8, P())),
        }
        got, _ = ck.restore(1, target)
    assert got["w"].sharding == target["w"].sharding
    assert [s.data.shape for s in got["w"].addressable_shards] == [(2, 6)] * 8
    assert got["v"].sharding.is_fully_replicated
    assert np.array_equal(np.asarray(got["w"]), np.asarray(full))
    assert np.asarray(got["v"]).tobytes() == np.asarray(state["v"]).tobytes()


def test_to_pure_and_abstract_like_helpers():
    module = nnx.Linear(3, 2, rngs=nnx.Rngs(0))
    tree = {"params": nnx.state(module, nnx.Param), "rng": jax.random.key(3)}
    pure = to_pure(tree)
    assert set(pure["params"]) == {"kernel", "bias"}
    assert isinstance(pure["params"]["kernel"], jax.Array)
    assert pure["rng"].dtype == jnp.uint32
    abstract = abstract_like(pure)
    assert abstract["params"]["kernel"] == jax.ShapeDtypeStruct(
        (3, 2), jnp.float32, sharding=pure["params"]["kernel"].sharding
    )
    with pytest.raises(CheckpointError, match="cannot restore into a str leaf"):
        abstract_like({"x": "nope"})


def test_fingerprint_mismatch_lists_every_field():
    tiny = TINY_MODELS["tiny-random-llama"][0]()
    fp = model_fingerprint(tiny)
    assert fp == {
        "model_type": "llama",
        "vocab_size": 49152,
        "hidden_size": 64,
        "num_layers": 2,
        "num_heads": 4,
        "num_kv_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "tie_word_embeddings": True,
    }
    check_fingerprint(fp, model_fingerprint(tiny.replace(rope_theta=5e5)), "/w")  # not identity
    big = model_fingerprint(tiny.replace(hidden_size=576, num_layers=30))
    with pytest.raises(CheckpointError) as e:
        check_fingerprint(big, fp, "/runs/a")
    msg = str(e.value)
    assert "workdir /runs/a holds a checkpoint of a different model" in msg
    assert "hidden_size 576 vs 64" in msg and "num_layers 30 vs 2" in msg
    assert "vocab_size" not in msg
