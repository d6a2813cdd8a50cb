"""scripts/tool_agent_table.py on a hand-made run directory."""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "scripts"))
import tool_agent_table  # noqa: E402


def _run(tmp_path, name="w"):
    w = tmp_path / name
    (w / "warmup").mkdir(parents=True)
    done = {"warmup_s": 300.0, "held_out_before": {"val-core/math/acc/greedy": 0.1}}
    (w / "warmup" / "done.json").write_text(json.dumps(done))
    rows = [
        {"step": 0, "perf/wall_s": 0.0, "val-core/math/acc/greedy": 0.45},
        {"step": 1, "perf/wall_s": 60.0, "critic/score/mean": 0.5},
        {"step": 8, "perf/wall_s": 540.0, "val-core/math/acc/greedy": 0.6,
         "val-aux/math/tool_call_rate": 1.0, "val-aux/math/valid_call_rate": 0.9,
         "val-aux/math/correct_with_tool": 0.95},
    ]  # fmt: skip
    (w / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(w)


def test_the_table_splits_the_lift_into_warmup_and_rl(tmp_path, capsys):
    assert tool_agent_table.main(["--workdir", f"s0={_run(tmp_path)}"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line == (
        "| s0 | 0.10 | 0.45 | **0.60** | +35 | +15 | +50 | 300 | 540 (8) | 100% | 90% | 95% |"
    )


def test_a_run_without_a_finished_warmup_is_one_error(tmp_path, capsys):
    w = _run(tmp_path)
    os.remove(os.path.join(w, "warmup", "done.json"))
    assert tool_agent_table.main(["--workdir", f"s0={w}"]) == 1
    assert "no finished warm-up" in capsys.readouterr().err
