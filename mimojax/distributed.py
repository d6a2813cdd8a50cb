"""Multi-host runs on JAX's own multi-controller runtime (`jax.distributed`), no cluster layer.

Every process runs the same controller program (multi-controller SPMD, as in JAX's own
multi-host recipe): the same config, the same data order, the same jitted calls in the same
order. The actor and rollout meshes span every process's devices (`jax.devices()` is global
once initialised); host-side values that the controller reads back (sampled tokens, metrics)
come out of jit fully replicated, so each process reads its own local copy. Only process 0
writes the run's files (metrics.jsonl, run_info.json, the report) and prints progress;
orbax checkpoints are saved and restored by every process, each writing its own shards.

Launch one process per host with the standard variables set:

    JAX_COORDINATOR_ADDRESS=host0:1234 JAX_NUM_PROCESSES=2 JAX_PROCESS_ID=0 mimojax train ...
"""

from __future__ import annotations

import logging
import os

import jax

log = logging.getLogger(__name__)

ENV_VARS = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


class DistributedError(ValueError):
    """The multi-host variables are set inconsistently; names the variable."""


def env_settings(environ=None) -> tuple[str, int, int] | None:
    """(coordinator address, process count, process id) from the standard variables, or None
    when JAX_COORDINATOR_ADDRESS is unset (a single-process run)."""
    env = os.environ if environ is None else environ
    address = env.get("JAX_COORDINATOR_ADDRESS", "").strip()
    if not address:
        return None
    values = {}
    for name in ENV_VARS[1:]:
        raw = env.get(name, "").strip()
        try:
            values[name] = int(raw)
        except ValueError:
            raise DistributedError(
                f"{name}={raw!r}: must be an integer when JAX_COORDINATOR_ADDRESS is set"
            ) from None
    count, pid = values["JAX_NUM_PROCESSES"], values["JAX_PROCESS_ID"]
    if count < 1:
        raise DistributedError(f"JAX_NUM_PROCESSES={count}: must be >= 1")
    if not 0 <= pid < count:
        raise DistributedError(f"JAX_PROCESS_ID={pid}: must be in [0, JAX_NUM_PROCESSES={count})")
    if ":" not in address:
        raise DistributedError(f"JAX_COORDINATOR_ADDRESS={address!r}: want HOST:PORT")
    return address, count, pid


def initialize_from_env(environ=None) -> bool:
    """Calls `jax.distributed.initialize` from the standard variables when they are set (once;
    before any device is touched). True when this is a multi-process run."""
    settings = env_settings(environ)
    if settings is None:
        return False
    if jax.distributed.is_initialized():
        return True
    address, count, pid = settings
    # Collectives between CPU devices of different processes need gloo (the default has
    # none); the setting only concerns the CPU backend, so GPU/TPU runs are unaffected.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(address, num_processes=count, process_id=pid)
    log.info("jax.distributed: process %d of %d, %d devices", pid, count, jax.device_count())
    return True


def is_main_process() -> bool:
    """True on process 0: the one that writes the run's files and prints progress."""
    return jax.process_index() == 0


def replicated(x, mesh) -> jax.Array:
    """`x` replicated over `mesh`: a global array every process can save and read."""
    return jax.device_put(x, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))
