"""Shared trainer-test fixture: prompt rows graded by `tests.reward_fixtures:length_mod`."""

from __future__ import annotations

import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _write_length_mod_rows(path):
    with open(path, "w") as f:
        for n in range(16):
            row = {
                "prompt": f"Count to {n}.",
                "ground_truth": "",
                "env": "tests.reward_fixtures:length_mod",
            }
            f.write(json.dumps(row) + "\n")
    return path


@pytest.fixture
def length_mod_rows(tmp_path, monkeypatch):
    """A JSONL file of 16 prompts whose grader scores (response length mod 5) / 4, so groups
    have reward variance; the repo root goes last on sys.path (the grader imports in-process,
    and last it shadows nothing installed)."""
    monkeypatch.setattr(sys, "path", [*sys.path, ROOT])
    return _write_length_mod_rows(tmp_path / "length_mod_rows.jsonl")


@pytest.fixture(scope="module")
def module_length_mod_rows(tmp_path_factory):
    """`length_mod_rows` for a module-scoped fixture (one reference run shared by its tests)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sys, "path", [*sys.path, ROOT])
        yield _write_length_mod_rows(tmp_path_factory.mktemp("rows") / "length_mod_rows.jsonl")
