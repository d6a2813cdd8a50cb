"""`mimojax eval --env`: worlds are discovered from the envs packages; scores, pass@k,
dimensions, infra failures and grader cost land in eval.json and eval.html."""

import glob
import json
import os

from mimojax.cli import main as cli
from mimojax.eval.worlds import discover_worlds


def test_discovers_every_world_with_a_held_out_file():
    worlds = discover_worlds()
    on_disk = {p.split(os.sep)[-3] for p in glob.glob("envs/*/data/*_test.jsonl")}
    assert set(worlds) == on_disk
    assert {"math", "code", "cyber", "general"} <= set(worlds)


def test_eval_env_on_a_tiny_model(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MIMOJAX_JUDGE_URL", "none")  # restored after the test
    out = tmp_path / "eval"
    status = cli.main([
        "eval", "--env", "math,general", "--model", "tiny-random-llama", "--limit", "2",
        "--pass-k", "2", "--max-new-tokens", "8", "--out", str(out), "--judge-url", "none",
        "--reward-workers", "1",
    ])  # fmt: skip
    assert status == 0
    report = json.loads((out / "eval.json").read_text())
    assert report["model"] == "tiny-random-llama" and report["pass_k"] == 2
    assert sorted(report["worlds"]) == ["general", "math"]
    for name, w in report["worlds"].items():
        assert w["examples"] == 2 and w["graded"] == 2 + 2 * 2, name
        assert w["infra_failures"] == 0 and w["infra_errors"] == []
        assert 0.0 <= w["mean_score"] <= 1.0 and 0.0 <= w["pass@2"] <= 1.0
        assert w["grader_s"] >= 0.0 and w["judge_calls"] == 0.0
    assert "rule_max_words" in report["worlds"]["general"]["dims"]
    assert "correct" in report["worlds"]["math"]["dims"]
    page = (out / "eval.html").read_text()
    assert page.count("<tr>") == 3 and "pass@2" in page
    printed = capsys.readouterr().out
    assert "general" in printed and "mean score" in printed
    assert cli.main(["eval", "--env", "nope", "--model", "tiny-random-llama"]) == 2
