"""Orbax checkpoints of a run: array state (params, optimizer, rng) plus a JSON meta record.

One orbax step holds two items: `state` (a pytree of arrays, saved with StandardSave) and `meta`
(JSON: data-iterator state, policy_version, model fingerprint, config summary, step). Orbax writes
a step into `<step>.orbax-checkpoint-tmp*` and renames it at commit, so a process killed mid-save
leaves only a tmp directory: `latest_step` lists committed steps only, and the manager deletes
leftover tmp directories when it opens the directory again.

Files that rot after the commit (a truncated or deleted array file, garbled metadata, a lost
commit marker) do not change what orbax lists, so `restore_latest` / `latest_meta` verify a step by
reading it and fall back to the newest step that reads, warning about each one skipped. A save that
fails (disk full, directory gone) raises one CheckpointSaveError, from `save` itself or, for an
async save, from the next `wait` / `save` / `close`; the earlier checkpoints stay untouched.
"""

from __future__ import annotations

import errno
import json
import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

# The error classes are part of this module's API (callers import them from here).
from mimojax.checkpoint.faults import (  # noqa: F401
    CheckpointError,
    CheckpointMismatchError,
    CheckpointSaveError,
    CheckpointUnreadableError,
    OpenFailed,
    Unreadable,
    check_step_files,
    one_line,
    remove_failed_save,
    warn,
)

_MAX_LISTED = 8  # leaf differences named in one error; the rest are counted


def to_pure(tree: Any) -> Any:
    """`tree` with nnx.State turned into pure dicts and typed PRNG keys into their uint32 data."""

    def leaf(x):
        if isinstance(x, nnx.State):
            return to_pure(nnx.to_pure_dict(x))
        if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return jax.random.key_data(x)
        return x

    return jax.tree.map(leaf, tree, is_leaf=lambda x: isinstance(x, nnx.State))


def abstract_like(tree: Any) -> Any:
    """A pytree of jax.ShapeDtypeStruct (keeping each jax array's sharding) to restore into."""

    def leaf(x):
        if isinstance(x, jax.ShapeDtypeStruct):
            return x
        if isinstance(x, jax.Array):
            return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
        if isinstance(x, (np.ndarray, np.generic)):
            return jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype)
        raise CheckpointError(f"cannot restore into a {type(x).__name__} leaf (want arrays)")

    return jax.tree.map(leaf, tree)


def _path_str(path) -> str:
    """A key path as `a.b.0.c`, the same for a NamedTuple field and the dict orbax stores it as."""
    parts = []
    for k in path:
        if isinstance(k, jax.tree_util.DictKey):
            parts.append(str(k.key))
        elif isinstance(k, jax.tree_util.GetAttrKey):
            parts.append(k.name)
        elif isinstance(k, jax.tree_util.SequenceKey):
            parts.append(str(k.idx))
        else:
            parts.append(str(k))
    return ".".join(parts)


def _shapes(tree) -> dict[str, tuple]:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {_path_str(p): (tuple(x.shape), np.dtype(x.dtype)) for p, x in leaves}


def _with_default_sharding(abstract: Any) -> Any:
    """Leaves without a sharding restore onto the first local device (orbax needs one)."""
    device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])

    def leaf(x):
        if getattr(x, "sharding", None) is None:
            return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=device)
        return x

    return jax.tree.map(leaf, abstract)


class Checkpointer:
    """An orbax CheckpointManager over WORKDIR/checkpoints keeping the last `keep` steps."""

    def __init__(self, directory: str, *, keep: int = 3, async_save: bool = True):
        if keep < 1:
            raise CheckpointError(f"checkpoint keep must be >= 1, got {keep}")
        self.directory = os.path.abspath(directory)
        self._keep = keep
        self._async = async_save
        self._pending: int | None = None  # the async save not yet seen to commit
        self._mgr: ocp.CheckpointManager | None = None
        try:
            self._manager()
        except OpenFailed as e:
            raise CheckpointError(f"cannot open checkpoint directory {self.directory}: {e}") from e

    def _manager(self) -> ocp.CheckpointManager:
        """The orbax manager, opened again after a failed save (which drops the broken one)."""
        if self._mgr is not None:
            return self._mgr
        if os.path.exists(self.directory) and not os.path.isdir(self.directory):
            # orbax would open it, log an error, and fail each save in its own way
            raise OpenFailed(
                NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), self.directory)
            )
        options = ocp.CheckpointManagerOptions(
            max_to_keep=self._keep,
            enable_async_checkpointing=self._async,
            create=True,
            # A kill mid-save, or a failed save, leaves `<step>.orbax-checkpoint-tmp*`; saving
            # that step again would trip over it. Opening the manager deletes them.
            cleanup_tmp_directories=True,
            # The step directory is made on the calling thread: made in the background, a failed
            # mkdir leaves orbax's writer threads waiting 20 minutes for it (and the process
            # waiting for them at exit).
            async_options=ocp.AsyncOptions(create_directories_asynchronously=False),
        )
        # Registering the handlers up front lets a fresh manager read item metadata and meta
        # before it has saved or restored anything.
        registry = ocp.handlers.DefaultCheckpointHandlerRegistry()
        state_handler, meta_handler = ocp.StandardCheckpointHandler(), ocp.JsonCheckpointHandler()
        registry.add("state", ocp.args.StandardSave, state_handler)
        registry.add("state", ocp.args.StandardRestore, state_handler)
        registry.add("meta", ocp.args.JsonSave, meta_handler)
        registry.add("meta", ocp.args.JsonRestore, meta_handler)
        try:
            self._mgr = ocp.CheckpointManager(
                self.directory, options=options, handler_registry=registry
            )
        except Exception as e:  # no permission, disk full, ...
            raise OpenFailed(one_line(e)) from e
        return self._mgr

    # ---- saving ----

    def save(self, step: int, state: Any, meta: dict) -> None:
        """Saves `state` (pytree of arrays) and JSON `meta` as checkpoint `step` (async if set).

        Raises CheckpointSaveError when this save fails, or when the previous async save did
        (that step is named; this one was then not started).
        """
        meta = {**meta, "step": int(step)}
        try:
            json.dumps(meta, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise CheckpointError(
                f"{self.directory} step {step}: meta is not JSON-serializable ({e})"
            ) from None
        self.wait()  # a failed earlier async save surfaces here, naming its own step
        try:
            mgr = self._manager()
        except OpenFailed as e:
            raise self._save_error(step, e) from e
        if step in mgr.all_steps():
            raise CheckpointError(f"{self.directory} already holds a checkpoint at step {step}")
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(to_pure(state)), meta=ocp.args.JsonSave(meta)
        )
        try:
            saved = mgr.save(int(step), args=args)
        except Exception as e:
            self._drop_manager()
            raise self._save_error(step, e) from e
        if not saved:
            raise CheckpointError(f"{self.directory}: orbax declined to save step {step}")
        if self._async:
            self._pending = int(step)

    def _drop_manager(self) -> None:
        """Closes a manager that failed a save, swallowing the errors its threads still hold."""
        mgr, self._mgr, self._pending = self._mgr, None, None
        # Each background thread of the failed save raises once, and a save has several
        # (array writes, shardings, metadata); on a loaded box more than three can still be
        # running, and leaving any behind lets it write into the tmp dir after reopening.
        for _ in range(16):
            try:
                if mgr is not None:
                    mgr.close()
                break
            except Exception:
                continue
        remove_failed_save(self.directory, primary=jax.process_index() == 0)

    def _save_error(self, step: int | None, e: BaseException) -> CheckpointSaveError:
        reason = str(e) if isinstance(e, OpenFailed) else one_line(e)
        what = f"checkpoint step {step}" if step is not None else "a checkpoint"
        try:
            steps = self.all_steps()
        except Exception:
            steps = []
        kept = f"step {steps[-1]} is the newest checkpoint" if steps else "no earlier checkpoint"
        return CheckpointSaveError(f"could not save {what} to {self.directory}: {reason} ({kept})")

    def wait(self) -> None:
        """Blocks until every async save has committed; raises CheckpointSaveError if one failed."""
        if self._mgr is None:
            return
        try:
            self._mgr.wait_until_finished()
            self._mgr.check_for_errors()
        except Exception as e:
            step = self._pending
            self._drop_manager()
            raise self._save_error(step, e) from e
        self._pending = None

    def close(self) -> None:
        """Waits for pending saves and releases the manager (CheckpointSaveError if one failed)."""
        if self._mgr is None:
            return
        self.wait()  # on a failure the manager is already dropped
        mgr, self._mgr = self._mgr, None
        if mgr is not None:
            try:
                mgr.close()
            except Exception as e:
                raise self._save_error(None, e) from e

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- listing ----

    def all_steps(self) -> list[int]:
        """The committed steps on disk, ascending (in-flight async saves are not listed)."""
        if not os.path.isdir(self.directory):
            return []
        return sorted(ocp.step.checkpoint_steps(self.directory))

    def latest_step(self) -> int | None:
        """The newest committed step on disk, or None when there is none (it may not read)."""
        steps = self.all_steps()
        return steps[-1] if steps else None

    def _resolve(self, step: int | None) -> int:
        steps = self.all_steps()
        if step is None:
            if not steps:
                raise CheckpointError(f"no committed checkpoint in {self.directory}")
            return steps[-1]
        if step not in steps:
            raise CheckpointError(
                f"no committed checkpoint at step {step} in {self.directory}; "
                f"committed steps: {steps or 'none'}"
            )
        return int(step)

    # ---- verified reads (raise Unreadable with a one-line reason) ----

    def _check_meta(self, step: int, meta: Any) -> dict:
        if not isinstance(meta, dict):
            raise Unreadable(f"meta/metadata: a {type(meta).__name__}, not a JSON object")
        if meta.get("step", step) != step:
            raise Unreadable(f"meta/metadata: says step {meta.get('step')}")
        return meta

    def _read_meta_checked(self, step: int) -> dict:
        check_step_files(self.directory, step)
        try:
            out = self._manager().restore(
                step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())
            )
        except CheckpointError:
            raise
        except Exception as e:
            raise Unreadable(f"meta/metadata: {one_line(e)}") from e
        return self._check_meta(step, out["meta"])

    def _check_tree(self, step: int, abstract: Any) -> None:
        """Compares the requested tree with the saved one, naming every differing leaf."""
        try:
            saved_meta = self._manager().item_metadata(step)["state"]
            saved = _shapes(saved_meta.tree) if saved_meta is not None else None
        except CheckpointError:
            raise
        except Exception as e:
            raise Unreadable(f"state/_METADATA: {one_line(e)}") from e
        if not saved:
            raise Unreadable("state/_METADATA: missing or empty")
        wanted = _shapes(abstract)
        problems = []
        for path in sorted(saved.keys() | wanted.keys()):
            if path not in wanted:
                problems.append(f"{path}: in the checkpoint, not in the restore target")
            elif path not in saved:
                problems.append(f"{path}: in the restore target, not in the checkpoint")
            elif saved[path][0] != wanted[path][0]:
                problems.append(
                    f"{path}: shape {saved[path][0]} in the checkpoint vs {wanted[path][0]} wanted"
                )
        if problems:
            more = len(problems) - _MAX_LISTED
            listed = "; ".join(problems[:_MAX_LISTED]) + (f"; ... {more} more" if more > 0 else "")
            raise CheckpointMismatchError(
                f"{self.directory} step {step}: checkpoint state does not match the model/"
                f"optimizer being restored: {listed}"
            )

    def _restore_checked(self, step: int, abstract: Any) -> tuple[Any, dict]:
        meta = self._read_meta_checked(step)  # checks the step's files too
        self._check_tree(step, abstract)
        args = ocp.args.Composite(state=ocp.args.StandardRestore(abstract))
        try:
            out = self._manager().restore(step, args=args)
        except CheckpointError:
            raise
        except Exception as e:
            raise Unreadable(f"state arrays: {one_line(e)}") from e
        return out["state"], meta

    def _unreadable(self, tried: list[tuple[int, str]]) -> CheckpointUnreadableError:
        steps = ", ".join(str(s) for s, _ in tried)
        reasons = "; ".join(f"step {s}: {r}" for s, r in tried)
        return CheckpointUnreadableError(
            f"no readable checkpoint in {self.directory} (tried steps {steps}: {reasons}); "
            f"start over with `--no-resume --workdir NEW_DIR`, or delete {self.directory} "
            "to restart this workdir from step 0"
        )

    def _newest_readable(self, read) -> tuple[int, Any] | None:
        steps = self.all_steps()
        tried: list[tuple[int, str]] = []
        for step in reversed(steps):
            try:
                return step, read(step)
            except Unreadable as e:
                tried.append((step, str(e)))
                older = [s for s in steps if s < step]
                then = f"trying step {older[-1]}" if older else "no older checkpoint"
                warn(f"checkpoint step {step} in {self.directory} is unreadable, {then}: {e}")
        if tried:
            raise self._unreadable(tried)
        return None

    # ---- reading ----

    def restore_latest(self, abstract_state: Any) -> tuple[int, Any, dict] | None:
        """(step, state, meta) of the newest committed step that reads back whole, or None.

        A step whose files are truncated, missing or garbled is skipped with a warning naming it
        and the reason. Raises CheckpointUnreadableError when steps exist but none reads, and
        CheckpointMismatchError (without trying older steps) when the saved tree differs from
        `abstract_state`: the caller checks the model fingerprint first, so what differs is the
        optimizer or role layout, a config change that older steps of the same run share.
        """
        abstract = _with_default_sharding(abstract_like(abstract_state))
        found = self._newest_readable(lambda step: self._restore_checked(step, abstract))
        if found is None:
            return None
        step, (state, meta) = found
        for newer in [s for s in self.all_steps() if s > step]:
            self._set_aside(newer)
        return step, state, meta

    def _set_aside(self, step: int) -> None:
        """Renames an unreadable step's directory out of orbax's listing, kept for inspection:
        the resumed run saves that step again."""
        src = os.path.join(self.directory, str(step))
        dst, n = f"{src}.unreadable", 1
        while os.path.exists(dst):
            dst, n = f"{src}.unreadable-{n}", n + 1
        os.rename(src, dst)
        self._drop_manager()  # its cached step list still names the moved step
        warn(f"moved unreadable checkpoint step {step} aside to {dst}")

    def latest_meta(self) -> tuple[int, dict] | None:
        """(step, meta) of the newest committed step whose meta reads, or None; no arrays read.

        Skips and raises like `restore_latest`; a step found here may still fail there when
        only its arrays are damaged.
        """
        return self._newest_readable(self._read_meta_checked)

    def restore(self, step: int | None, abstract_state: Any) -> tuple[Any, dict]:
        """(state, meta) of `step` (None: latest), placed on `abstract_state`'s shardings/dtypes.

        No fallback: an unreadable step raises CheckpointUnreadableError naming the reason.
        """
        step = self._resolve(step)
        abstract = _with_default_sharding(abstract_like(abstract_state))
        try:
            return self._restore_checked(step, abstract)
        except Unreadable as e:
            raise CheckpointUnreadableError(
                f"{self.directory} step {step}: checkpoint is unreadable: {e}"
            ) from e

    def read_meta(self, step: int | None = None) -> dict:
        """The JSON meta of `step` (None: latest) without reading any arrays (no fallback)."""
        step = self._resolve(step)
        try:
            return self._read_meta_checked(step)
        except Unreadable as e:
            raise CheckpointUnreadableError(
                f"{self.directory} step {step}: checkpoint is unreadable: {e}"
            ) from e
