"""Shape checks that read the expected shape from the array's name (`logp_BxT` -> (B, T))."""

from __future__ import annotations

import re

import jax
import numpy as np

_SUFFIX = re.compile(r"_([A-Z](?:x[A-Z])*)$")
AGG_MODES = (
    "token-mean",
    "token-sum",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)


def dims_of(name: str) -> tuple[str, ...]:
    """Dimension letters encoded in an array name: `adv_BxT` -> ('B', 'T')."""
    m = _SUFFIX.search(name)
    if m is None:
        raise ValueError(f"array name {name!r} has no shape suffix like _BxT")
    return tuple(m.group(1).split("x"))


def check_shapes(**arrays) -> dict[str, int]:
    """Check that arrays agree with the shapes in their names; return the bound sizes.

    `None` entries are skipped. Raises ValueError naming the arrays that disagree.
    """
    sizes: dict[str, int] = {}
    origin: dict[str, str] = {}
    for name, x in arrays.items():
        if x is None:
            continue
        dims = dims_of(name)
        shape = tuple(np.shape(x))
        if len(shape) != len(dims):
            raise ValueError(
                f"{name} must have {len(dims)} dims ({'x'.join(dims)}), got shape {shape}"
            )
        for d, n in zip(dims, shape, strict=True):
            if d in sizes and sizes[d] != n:
                raise ValueError(
                    f"shape mismatch: {name} has shape {shape} ({d}={n}) but "
                    f"{origin[d]} has {d}={sizes[d]}"
                )
            sizes.setdefault(d, n)
            origin.setdefault(d, name)
    return sizes


def check_group_ids(group_ids_B, num_groups: int) -> None:
    """Check ids lie in [0, num_groups) when they are concrete (skipped under jit/vmap)."""
    if group_ids_B is None or isinstance(group_ids_B, jax.core.Tracer):
        return
    ids = np.asarray(group_ids_B)
    if not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"group_ids_B must be integers, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= num_groups):
        raise ValueError(
            f"group_ids_B must lie in [0, num_groups={num_groups}); got range "
            f"[{ids.min()}, {ids.max()}]. Remap ids (e.g. np.unique(..., return_inverse=True))."
        )


def check_agg_mode(mode: str) -> None:
    """Raise ValueError for an unknown loss aggregation mode, listing the known ones."""
    if mode not in AGG_MODES:
        raise ValueError(f"unknown loss aggregation mode {mode!r}; known: {', '.join(AGG_MODES)}")
