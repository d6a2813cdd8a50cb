"""Test-wide setup: 8 fake CPU devices for mesh tests (must precede the first jax import), and
one persistent JAX compilation cache per pytest session.

The cache: most of a tiny-config trainer test is XLA compiling the same rollout and update
programs again (a fresh `Trainer` builds fresh jitted functions; a `mimojax train` subprocess
starts with nothing), e.g. 63 s to build and 84 s to train 4 steps cold vs 8 s and 24 s with the
programs cached (2 shared cores). The directory is made by the first process (the xdist
controller) before any worker starts, so workers and every subprocess they spawn inherit it
through the environment; it is removed at the end. A set JAX_COMPILATION_CACHE_DIR is used as
is (and kept). Cached executables are the same compiled code, so what the tests compare
(bitwise resume, 1 vs 2 processes) is unchanged; an unreadable entry (a process killed while
writing it) is a JAX warning and a recompile.
"""

import os
import shutil
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

_OWN_CACHE = None
if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _OWN_CACHE = tempfile.mkdtemp(prefix="mimojax-test-jax-cache-")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _OWN_CACHE
# Cache every program, not only those that took a second to compile (the default).
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def pytest_unconfigure(config):
    if _OWN_CACHE is not None:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """`gpu` tests skip (not fail) without a GPU, e.g. when `-m` replaces the default filter.

    On a GPU box run them with `JAX_PLATFORMS=cuda pytest -m gpu` (this file defaults JAX to
    the CPU so the fake-device mesh tests work).
    """
    import jax
    import pytest

    if jax.default_backend() == "gpu":
        return
    skip = pytest.mark.skip(reason="needs a GPU (run with JAX_PLATFORMS=cuda pytest -m gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
