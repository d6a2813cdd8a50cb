"""The controller refactor changes no numbers: 3 tiny-config scenarios vs metrics recorded
before it (`tests/train/pinned_scenarios.py` says how they were recorded).

Slow-ish (three 3-step runs, ~30 s): the pinned numbers are the refactor's safety net.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest
from pinned_scenarios import PINNED_PATH, SCENARIOS, train_rows

from mimojax.config.loader import load_config
from mimojax.train.trainer import Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _train(overrides, workdir):
    Trainer(load_config("configs/grpo_tiny.py", overrides), workdir, progress=False).train()


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_metrics_equal_the_pinned_ones(tmp_path, monkeypatch, scenario):
    # The grader "tests.reward_fixtures:length_mod" is imported in this process (num_workers=0);
    # the repo root goes last on sys.path so it shadows nothing installed.
    monkeypatch.setattr(sys, "path", [*sys.path, ROOT])
    with open(PINNED_PATH) as f:
        pinned = json.load(f)[scenario]
    # recorded on one device (the pytest session has 8 fake ones): the actor mesh is device 0
    got = train_rows(str(tmp_path), scenario, _train, extra=("roles.actor.devices=(0,)",))
    assert len(got) == len(pinned) == 3
    for step, (want_row, got_row) in enumerate(zip(pinned, got), start=1):
        assert set(got_row) == set(want_row), (step, set(got_row) ^ set(want_row))
        for key, want in want_row.items():
            np.testing.assert_allclose(
                got_row[key], want, rtol=2e-5, atol=1e-6, err_msg=f"step {step} {key}"
            )
