"""Checkpoint fault injection: damaged files of the latest step fall back to the previous one,
every step damaged is one clear error, and failed saves (disk full, directory gone) raise one
clear error that leaves the previous checkpoint restorable."""

import errno
import glob
import logging
import os
import resource
import shutil
import signal

import jax.numpy as jnp
import numpy as np
import pytest
from etils import epath

from mimojax.checkpoint.manager import (
    Checkpointer,
    CheckpointError,
    CheckpointMismatchError,
    CheckpointSaveError,
    CheckpointUnreadableError,
)

# A failed orbax read or write leaves coroutines of its other arrays unawaited: noise, not signal.
pytestmark = [
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore:coroutine .* was never awaited:RuntimeWarning"),
]


def _state(step: int) -> dict:
    """Arrays above OCDBT's 1 KiB inline limit, so their bytes live in the `d/` data files."""
    return {
        "w": jnp.arange(4096, dtype=jnp.float32) * step,
        "opt": {"count": jnp.full((600,), step, jnp.int32), "b": jnp.ones(3, jnp.bfloat16)},
    }


def _zeros() -> dict:
    return _state(0)


def _assert_exact(got, step):
    want = _state(step)
    for path in (("w",), ("opt", "count"), ("opt", "b")):
        a, b = got, want
        for k in path:
            a, b = a[k], b[k]
        assert a.dtype == b.dtype and np.asarray(a).tobytes() == np.asarray(b).tobytes(), path


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """Steps 1, 2, 3 saved once; each test damages its own copy."""
    d = tmp_path_factory.mktemp("pristine") / "ck"
    with Checkpointer(str(d), async_save=False) as ck:
        for step in (1, 2, 3):
            ck.save(step, _state(step), {"data": {"index": step}})
    return d


@pytest.fixture
def ckdir(pristine, tmp_path):
    d = tmp_path / "ck"
    shutil.copytree(pristine, d)
    return d


def _truncate(path):
    with open(path, "r+b") as f:
        f.truncate(10)


def _garble(path):
    with open(path, "wb") as f:
        f.write(b"\x00{not json")


def _data_files(step_dir):
    files = glob.glob(str(step_dir / "state" / "ocdbt.process_0" / "d" / "*"))
    assert files
    return sorted(files, key=os.path.getsize)


DAMAGE = {
    "array data truncated": lambda s: [_truncate(p) for p in _data_files(s)],
    "one array file truncated": lambda s: _truncate(_data_files(s)[-1]),
    "one array file deleted": lambda s: os.remove(_data_files(s)[-1]),
    "array index deleted": lambda s: shutil.rmtree(s / "state" / "d"),
    "state/_METADATA garbled": lambda s: _garble(s / "state" / "_METADATA"),
    "state/_METADATA deleted": lambda s: os.remove(s / "state" / "_METADATA"),
    "_CHECKPOINT_METADATA garbled": lambda s: _garble(s / "_CHECKPOINT_METADATA"),
    "_CHECKPOINT_METADATA deleted": lambda s: os.remove(s / "_CHECKPOINT_METADATA"),
    "meta/metadata garbled": lambda s: _garble(s / "meta" / "metadata"),
    "meta/metadata deleted": lambda s: os.remove(s / "meta" / "metadata"),
    "commit marker deleted": lambda s: os.remove(s / "commit_success.txt"),
}
# What the one-line reason names, per damage.
REASON = {
    "array data truncated": "is not valid for value of size 10",
    "one array file truncated": "is not valid for value of size 10",
    "one array file deleted": 'Error reading "w/0" in OCDBT database',
    "array index deleted": "NOT_FOUND",
    "state/_METADATA garbled": "state/_METADATA: not valid JSON",
    "state/_METADATA deleted": "state/_METADATA",
    "_CHECKPOINT_METADATA garbled": "_CHECKPOINT_METADATA: not valid JSON",
    "_CHECKPOINT_METADATA deleted": "_CHECKPOINT_METADATA: [Errno 2] No such file",
    "meta/metadata garbled": "meta/metadata: not valid JSON",
    "meta/metadata deleted": "meta/metadata",
    "commit marker deleted": "commit_success.txt (the commit marker) is missing",
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_latest_step_falls_back_to_the_previous(ckdir, damage, caplog, capsys):
    DAMAGE[damage](ckdir / "3")
    with Checkpointer(str(ckdir), async_save=False) as ck:
        assert ck.all_steps() == [1, 2, 3]  # orbax still lists the damaged step
        # An explicit restore of the damaged step names it instead of a tensorstore traceback.
        with pytest.raises(CheckpointUnreadableError, match="step 3: checkpoint is unreadable"):
            ck.restore(3, _zeros())
        # Only damage that reaches the meta (or the step's own records) stops latest_meta.
        meta_step, meta = ck.latest_meta()
        meta_damaged = damage.startswith(("meta/", "_CHECKPOINT", "commit"))
        assert meta_step == (2 if meta_damaged else 3) and meta["step"] == meta_step
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mimojax.checkpoint.manager"):
            step, state, meta = ck.restore_latest(_zeros())
        assert step == 2 and meta == {"data": {"index": 2}, "step": 2}
        _assert_exact(state, 2)
        warnings = [
            r.getMessage() for r in caplog.records if r.name == "mimojax.checkpoint.manager"
        ]
        assert len(warnings) == 2, warnings  # the skip, then the step set aside
        assert f"checkpoint step 3 in {ckdir} is unreadable, trying step 2: " in warnings[0]
        assert REASON[damage] in warnings[0] and "\n" not in warnings[0]
        assert "tensorstore_spec" not in warnings[0] and len(warnings[0]) < 600
        # the unreadable step leaves orbax's listing (kept for inspection): step 3 saves again
        assert warnings[1] == f"moved unreadable checkpoint step 3 aside to {ckdir}/3.unreadable"
        assert ck.all_steps() == [1, 2] and os.path.isdir(ckdir / "3.unreadable")
        ck.save(3, _state(3), {"data": {"index": 3}})
        assert ck.all_steps() == [1, 2, 3]


def test_every_step_damaged_is_one_clear_error(ckdir, capsys):
    _truncate(_data_files(ckdir / "3")[-1])
    _garble(ckdir / "2" / "meta" / "metadata")
    os.remove(ckdir / "1" / "commit_success.txt")
    with Checkpointer(str(ckdir), async_save=False) as ck:
        with pytest.raises(CheckpointUnreadableError) as e:
            ck.restore_latest(_zeros())
    msg = str(e.value)
    assert msg.startswith(f"no readable checkpoint in {ckdir} (tried steps 3, 2, 1: step 3: ")
    assert "step 2: meta/metadata: not valid JSON" in msg
    assert "step 1: commit_success.txt (the commit marker) is missing" in msg
    assert "--no-resume --workdir NEW_DIR" in msg and f"delete {ckdir}" in msg
    assert "\n" not in msg
    # The skipped steps were warned about one by one, on stderr (no logging handler in tests).
    err = capsys.readouterr().err
    assert "checkpoint step 3 in" in err and "trying step 2" in err
    assert "checkpoint step 1 in" in err and "no older checkpoint" in err


def test_no_checkpoint_is_none(tmp_path):
    with Checkpointer(str(tmp_path / "empty"), async_save=False) as ck:
        assert ck.restore_latest(_zeros()) is None
        assert ck.latest_meta() is None


def test_tree_mismatch_is_reported_not_skipped(ckdir):
    """A different optimizer/role layout is a config change shared by every step of the run."""
    other = {**_zeros(), "critic": jnp.zeros(4)}
    with Checkpointer(str(ckdir), async_save=False) as ck:
        with pytest.raises(
            CheckpointMismatchError, match="step 3: .*critic: in the restore target"
        ):
            ck.restore_latest(other)


# ---- failing saves ----


def _enospc_on_write(monkeypatch, directory):
    """Every Python-side orbax write under `directory` (meta, metadata, commit marker) fails."""
    cls = type(epath.Path(directory))
    real_text, real_bytes = cls.write_text, cls.write_bytes

    def fail(real):
        def write(self, *args, **kwargs):
            if str(self).startswith(str(directory)):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
            return real(self, *args, **kwargs)

        return write

    monkeypatch.setattr(cls, "write_text", fail(real_text))
    monkeypatch.setattr(cls, "write_bytes", fail(real_bytes))


def _assert_previous_intact(directory, step=2):
    with Checkpointer(str(directory), async_save=False) as ck:
        assert ck.all_steps()[-1] == step
        got_step, state, meta = ck.restore_latest(_zeros())
    assert got_step == step and meta["step"] == step
    _assert_exact(state, step)
    assert not [n for n in os.listdir(directory) if "tmp" in n]  # reopening cleaned the tmp dir


def _save_two(directory, async_save):
    ck = Checkpointer(str(directory), keep=2, async_save=async_save)
    ck.save(1, _state(1), {})
    ck.save(2, _state(2), {})
    ck.wait()
    return ck


ENOSPC_MSG = "could not save checkpoint step 3 to {d}: [Errno 28] No space left on device"


def test_disk_full_sync_save(tmp_path, monkeypatch):
    d = tmp_path / "ck"
    ck = _save_two(d, async_save=False)
    _enospc_on_write(monkeypatch, d)
    with pytest.raises(CheckpointSaveError) as e:
        ck.save(3, _state(3), {})
    msg = str(e.value)
    assert msg.startswith(ENOSPC_MSG.format(d=d)) and "(step 2 is the newest checkpoint)" in msg
    assert "\n" not in msg and isinstance(e.value, CheckpointError)
    monkeypatch.undo()
    ck.close()
    _assert_previous_intact(d)


def test_disk_full_async_save_surfaces_at_wait_then_recovers(tmp_path, monkeypatch):
    d = tmp_path / "ck"
    ck = _save_two(d, async_save=True)
    _enospc_on_write(monkeypatch, d)
    ck.save(3, _state(3), {})  # returns: the writes fail in the background
    with pytest.raises(CheckpointSaveError) as e:
        ck.wait()
    assert str(e.value).startswith(ENOSPC_MSG.format(d=d))
    assert "(step 2 is the newest checkpoint)" in str(e.value)
    ck.wait()  # reported once
    monkeypatch.undo()
    # The same Checkpointer keeps working: the failed step saves again, keep=2 still holds.
    ck.save(3, _state(3), {})
    ck.close()
    with Checkpointer(str(d), async_save=False) as again:
        assert again.all_steps() == [2, 3]
        step, state, _ = again.restore_latest(_zeros())
    assert step == 3
    _assert_exact(state, 3)


@pytest.mark.parametrize("surface", ["next save", "close"])
def test_disk_full_async_save_surfaces_at_next_save_or_close(tmp_path, monkeypatch, surface):
    d = tmp_path / "ck"
    ck = _save_two(d, async_save=True)
    _enospc_on_write(monkeypatch, d)
    ck.save(3, _state(3), {})
    with pytest.raises(CheckpointSaveError, match=r"step 3 .*No space left on device"):
        if surface == "next save":
            ck.save(4, _state(4), {})  # names the failed step 3; step 4 was not started
        else:
            ck.close()
    monkeypatch.undo()
    ck.close()
    _assert_previous_intact(d)


@pytest.mark.parametrize("async_save", [False, True], ids=["sync", "async"])
def test_array_write_failure_in_tensorstore(tmp_path, async_save):
    """A real failed write(2) inside tensorstore: files over 64 KiB are refused (EFBIG)."""
    d = tmp_path / "ck"
    ck = _save_two(d, async_save)
    noise = np.random.default_rng(0).standard_normal(100_000)  # 400 KB that zstd cannot shrink
    big = {**_state(3), "w": jnp.asarray(noise, jnp.float32)}
    old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    old_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, old_limit[1]))
    try:
        with pytest.raises(CheckpointSaveError) as e:
            ck.save(3, big, {})
            ck.wait()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, old_limit)
        signal.signal(signal.SIGXFSZ, old_handler)
    msg = str(e.value)
    assert msg.startswith(f"could not save checkpoint step 3 to {d}: ") and "File too large" in msg
    assert "\n" not in msg
    ck.close()
    _assert_previous_intact(d)


@pytest.mark.parametrize("async_save", [False, True], ids=["sync", "async"])
def test_directory_replaced_by_a_file(tmp_path, async_save):
    """Root ignores chmod: the directory goes away (unmounted, moved) and a file takes its place."""
    d = tmp_path / "ck"
    ck = _save_two(d, async_save)
    os.rename(d, tmp_path / "moved")
    d.write_text("not a directory")
    with pytest.raises(CheckpointSaveError) as e:
        ck.save(3, _state(3), {})
        ck.wait()
    msg = str(e.value)
    assert msg.startswith(f"could not save checkpoint step 3 to {d}: [Errno 20] Not a directory")
    assert msg.endswith("(no earlier checkpoint)") and "\n" not in msg
    assert ck.restore_latest(_zeros()) is None and ck.all_steps() == []
    # Still gone at the next save: the same clear error, from reopening the directory.
    with pytest.raises(CheckpointSaveError, match=f"step 4 to {d}: .*Not a directory"):
        ck.save(4, _state(4), {})
    ck.close()
    with pytest.raises(CheckpointError, match=f"cannot open checkpoint directory {d}"):
        Checkpointer(str(d))
    os.remove(d)
    os.rename(tmp_path / "moved", d)
    _assert_previous_intact(d)
