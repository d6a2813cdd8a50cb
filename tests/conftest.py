"""Test-wide setup: 8 fake CPU devices for mesh tests (must precede the first jax import)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
