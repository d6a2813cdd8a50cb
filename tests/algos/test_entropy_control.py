"""Adaptive entropy control (algorithm.entropy_control): the coefficient's walk, hand-computed."""

import json

import pytest

from mimojax.algos import EntropyController


def test_the_coefficient_walks_towards_holding_the_target_and_applies_only_below_it():
    ctrl = EntropyController(target=0.3, delta=0.01, max_coeff=0.025)
    assert ctrl.enabled and ctrl.active_coeff == 0.0  # nothing measured yet
    seen = []
    for entropy in (0.5, 0.2, 0.2, 0.2, 0.4, 0.1):
        ctrl = ctrl.update(entropy)
        seen.append((round(ctrl.coeff, 12), round(ctrl.active_coeff, 12)))
    assert seen == [
        (0.0, 0.0),  # above the target: down, floored at 0
        (0.01, 0.01),  # below: up one delta, and on
        (0.02, 0.02),
        (0.025, 0.025),  # capped at max_coeff
        (0.015, 0.0),  # above again: down one delta, and off while above
        (0.025, 0.025),  # below: up (0.015 + 0.01), on
    ]


def test_off_by_default_and_state_round_trips_through_json():
    off = EntropyController()
    assert not off.enabled and off.update(0.0) is off and off.active_coeff == 0.0
    ctrl = EntropyController(target=0.3, delta=0.01).update(0.1).update(0.123456789)
    back = EntropyController(target=0.3, delta=0.01).restored(json.loads(json.dumps(ctrl.state())))
    assert back == ctrl  # exact floats: a resumed run uses the same weight
    assert EntropyController(target=0.3).restored(None) == EntropyController(target=0.3)


def test_bad_settings_are_an_error():
    with pytest.raises(ValueError, match="delta > 0"):
        EntropyController(target=0.3, delta=0.0)
