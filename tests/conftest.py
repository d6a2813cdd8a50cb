"""Test-wide setup: 8 fake CPU devices for mesh tests (must precede the first jax import)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")


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
