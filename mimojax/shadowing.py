"""Top-level folders that install under `mimojax.*` but share a name with other packages.

`kernels/` and `envs/` install as `mimojax.kernels` / `mimojax.envs`; Python run from the repo
root also finds them as top-level `kernels` / `envs`, names that belong to other packages
(transformers imports Hugging Face's `kernels`). Imported under the top-level name, the folder's
`__init__` calls `hand_over` so the import returns the next package of that name on sys.path.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def hand_over(name: str, init_file: str) -> None:
    """Replaces `sys.modules[name]` by the next `name` on sys.path outside this repo's root, or
    raises ModuleNotFoundError as if the folder were not there."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(init_file)))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != root]
    spec = importlib.machinery.PathFinder.find_spec(name, path)
    if spec is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the import statement returns sys.modules[name]
    spec.loader.exec_module(module)
