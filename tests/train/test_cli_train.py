"""`mimojax train / eval / export / report` end to end on the tiny config."""

from __future__ import annotations

import json
import os

import numpy as np
import torch
from transformers import AutoModelForCausalLM

from mimojax.cli import main as cli
from mimojax.models.loader import load_model

TINY = "configs/grpo_tiny.py"


def test_train_eval_export_report(tmp_path, capsys):
    wd = str(tmp_path / "run")
    common = ["--config", TINY, "--workdir", wd]
    steps = ["--config.trainer.total_steps=2", "--config.checkpoint.every_steps=2"]
    assert cli.main(["train", *common, *steps]) == 0
    out = capsys.readouterr().out
    assert "held-out before (step 0): val-core/math/acc/greedy = " in out
    assert "held-out after  (step 2, " in out
    assert f"report: {os.path.join(wd, 'report.html')}" in out
    assert os.path.getsize(os.path.join(wd, "report.png")) > 10_000

    # refuses to silently continue when asked not to
    assert cli.main(["train", *common, *steps, "--no-resume"]) == 1
    assert "has a checkpoint at step 2" in capsys.readouterr().err

    assert cli.main(["eval", *common]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["step"] == 2 and 0.0 <= metrics["val-core/math/acc/greedy"] <= 1.0

    hf_dir = str(tmp_path / "hf")
    assert cli.main(["export", *common, "--out", hf_dir]) == 0
    assert capsys.readouterr().out.strip() == f"step 2 -> {hf_dir}"
    exported, _ = load_model(hf_dir)
    initial, _ = load_model("tiny-random-llama")
    trained = np.asarray(exported.embed[...])
    assert not np.array_equal(trained, np.asarray(initial.embed[...])), "export is untrained"
    # transformers loads the export and computes the same logits as we do
    ids = np.array([[1, 5, 9, 200, 31, 7]])
    ours = np.asarray(exported(ids, attention_mask=np.ones_like(ids)))
    with torch.no_grad():
        theirs = AutoModelForCausalLM.from_pretrained(hf_dir)(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-4)

    assert cli.main(["report", wd]) == 0
    assert capsys.readouterr().out.strip() == os.path.join(wd, "report.html")
