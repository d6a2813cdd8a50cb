"""Orbax checkpoints of a run: array state (params, optimizer, rng) plus a JSON meta record.

One orbax step holds two items: `state` (a pytree of arrays, saved with StandardSave) and `meta`
(JSON: data-iterator state, policy_version, model fingerprint, config summary, step). Orbax writes
a step into `<step>.orbax-checkpoint-tmp*` and renames it at commit, so a process killed mid-save
leaves only a tmp directory: `latest_step` lists committed steps only, and the manager deletes
leftover tmp directories when it opens the directory again.
"""

from __future__ import annotations

import json
import os
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

FINGERPRINT_FIELDS = (
    "model_type",
    "vocab_size",
    "hidden_size",
    "num_layers",
    "num_heads",
    "num_kv_heads",
    "head_dim",
    "intermediate_size",
    "tie_word_embeddings",
)
_MAX_LISTED = 8  # leaf differences named in one error; the rest are counted


class CheckpointError(ValueError):
    """A checkpoint that cannot be saved or restored as asked (names the dir, step and field)."""


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
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            enable_async_checkpointing=async_save,
            create=True,
            # A kill mid-save leaves `<step>.orbax-checkpoint-tmp*`; saving that step again
            # after the resume would trip over it.
            cleanup_tmp_directories=True,
        )
        # Registering the handlers up front lets a fresh manager read item metadata and meta
        # before it has saved or restored anything.
        registry = ocp.handlers.DefaultCheckpointHandlerRegistry()
        state_handler, meta_handler = ocp.StandardCheckpointHandler(), ocp.JsonCheckpointHandler()
        registry.add("state", ocp.args.StandardSave, state_handler)
        registry.add("state", ocp.args.StandardRestore, state_handler)
        registry.add("meta", ocp.args.JsonSave, meta_handler)
        registry.add("meta", ocp.args.JsonRestore, meta_handler)
        self._mgr = ocp.CheckpointManager(
            self.directory, options=options, handler_registry=registry
        )

    def save(self, step: int, state: Any, meta: dict) -> None:
        """Saves `state` (pytree of arrays) and JSON `meta` as checkpoint `step` (async if set)."""
        meta = {**meta, "step": int(step)}
        try:
            json.dumps(meta, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise CheckpointError(
                f"{self.directory} step {step}: meta is not JSON-serializable ({e})"
            ) from None
        if step in self._mgr.all_steps():
            raise CheckpointError(f"{self.directory} already holds a checkpoint at step {step}")
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(to_pure(state)), meta=ocp.args.JsonSave(meta)
        )
        if not self._mgr.save(int(step), args=args):
            raise CheckpointError(f"{self.directory}: orbax declined to save step {step}")

    def all_steps(self) -> list[int]:
        """The committed steps on disk, ascending (in-flight async saves are not listed)."""
        return sorted(ocp.step.checkpoint_steps(self.directory))

    def latest_step(self) -> int | None:
        """The newest committed step on disk, or None when there is none."""
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

    def _check_tree(self, step: int, abstract: Any) -> None:
        """Compares the requested tree with the saved one, naming every differing leaf."""
        saved = _shapes(self._mgr.item_metadata(step)["state"].tree)
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
            raise CheckpointError(
                f"{self.directory} step {step}: checkpoint state does not match the model/"
                f"optimizer being restored: {listed}"
            )

    def restore(self, step: int | None, abstract_state: Any) -> tuple[Any, dict]:
        """(state, meta) of `step` (None: latest), placed on `abstract_state`'s shardings/dtypes."""
        step = self._resolve(step)
        abstract = _with_default_sharding(abstract_like(abstract_state))
        self._check_tree(step, abstract)
        args = ocp.args.Composite(
            state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()
        )
        try:
            out = self._mgr.restore(step, args=args)
        except (ValueError, TypeError, KeyError, FileNotFoundError) as e:
            raise CheckpointError(f"{self.directory} step {step}: restore failed: {e}") from e
        return out["state"], out["meta"]

    def read_meta(self, step: int | None = None) -> dict:
        """The JSON meta of `step` (None: latest) without reading any arrays."""
        step = self._resolve(step)
        out = self._mgr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return out["meta"]

    def wait(self) -> None:
        """Blocks until every async save has committed."""
        self._mgr.wait_until_finished()

    def close(self) -> None:
        """Waits for pending saves and releases the manager."""
        self._mgr.wait_until_finished()
        self._mgr.close()

    def __enter__(self) -> Checkpointer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def model_fingerprint(model_config) -> dict:
    """The ModelConfig fields that identify which model a checkpoint's params belong to."""
    return {name: getattr(model_config, name) for name in FINGERPRINT_FIELDS}


def check_fingerprint(saved: dict, current: dict, workdir: str) -> None:
    """Raises CheckpointError listing every field where the checkpoint's model differs."""
    diffs = [
        f"{k} {saved.get(k, 'missing')} vs {current.get(k, 'missing')}"
        for k in sorted(saved.keys() | current.keys())
        if saved.get(k) != current.get(k)
    ]
    if diffs:
        raise CheckpointError(
            f"workdir {workdir} holds a checkpoint of a different model (checkpoint vs config): "
            + ", ".join(diffs)
            + "; use a fresh workdir or the matching model config"
        )
