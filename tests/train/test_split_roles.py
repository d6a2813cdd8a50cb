"""Split roles: the actor on 4 fake CPU devices and the rollout engine on the other 4 run the
same 3 GRPO steps as the colocated run over all 8 devices (tests/conftest.py makes 8 devices)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from mimojax.config.loader import ConfigError, load_config
from mimojax.observe.metrics import read_metrics
from mimojax.train.trainer import Trainer

KEYS = (
    "critic/score/mean",
    "response_length/mean",
    "actor/pg_loss",
    "actor/grad_norm",
    "actor/entropy",
    "critic/advantages/max",
)


def _run(workdir, *overrides):
    overrides = ("eval.at_start=False", "eval.at_end=False", "checkpoint.every_steps=0", *overrides)
    trainer = Trainer(
        load_config("configs/grpo_tiny.py", list(overrides)), str(workdir), progress=False
    )
    trainer.train()
    rows = [r for r in read_metrics(str(workdir)) if "critic/score/mean" in r]
    return trainer, rows


def test_actor_on_4_devices_rollout_on_4_matches_colocated(tmp_path):
    assert jax.device_count() == 8
    _, colocated = _run(tmp_path / "colocated")
    split, rows = _run(
        tmp_path / "split",
        "roles.actor.devices=(0,1,2,3)",
        "roles.rollout.devices=(4,5,6,7)",
    )
    actor_devices = {d.id for d in split.actor.mesh.devices.flat}
    engine_devices = {d.id for d in split.roles.rollout.mesh.devices.flat}
    assert actor_devices == {0, 1, 2, 3} and engine_devices == {4, 5, 6, 7}
    leaf = jax.tree.leaves(split.actor.state.params)[0]
    assert {d.id for d in leaf.sharding.device_set} <= actor_devices
    assert split.engine.policy_version == 3  # three syncs across the meshes
    assert [r["step"] for r in rows] == [r["step"] for r in colocated] == [1, 2, 3]
    for want, got in zip(colocated, rows):
        for key in KEYS:
            np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)


@pytest.mark.parametrize(
    "overrides, match",
    [
        (("roles.actor.devices=(0,1,2,3)", "roles.rollout.devices=(3,4)"), "both list devices"),
        (("roles.rollout.devices=(4,9)",), "out of range"),
        (("roles.rollout.devices=(0,1,2,3,4,5,6,7)",), "the actor has none"),
    ],
)
def test_bad_role_placement_is_a_config_error(tmp_path, overrides, match):
    with pytest.raises(ConfigError, match=match):
        Trainer(load_config("configs/grpo_tiny.py", list(overrides)), str(tmp_path), progress=False)
