"""configs/agent_arith_tools_smollm2.py through `mimojax train`: the warm-up, then GRPO with the
tool agent, in one command; a warm-up killed part-way is redone bitwise; a finished one is kept.
A tiny random model stands in for SmolLM2 (the plumbing, not the lift: docs/benchmarks.md)."""

import argparse
import hashlib
import json
import os

import pytest

from mimojax.cli import train as cli_train
from mimojax.cli import warmup as cli_warmup
from mimojax.observe.metrics import read_metrics

CONFIG = "configs/agent_arith_tools_smollm2.py:runlocal,model=tiny-random-llama"


def _args(workdir, *overrides):
    return argparse.Namespace(
        config=CONFIG, overrides=list(overrides), workdir=str(workdir), no_resume=False
    )


def _digest(directory) -> dict:
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


def _learning_rows(workdir):
    keep = ("actor/pg_loss", "critic/score/mean", "response_length/mean", "prompt_length/mean")
    rows = read_metrics(str(workdir))
    return [{k: r[k] for k in keep if k in r} for r in rows if "critic/score/mean" in r]


class Killed(BaseException):
    """Stands in for SIGKILL: nothing after the raise runs, no handler cleans up."""


def test_one_command_warms_up_then_trains_and_a_killed_warmup_is_redone_bitwise(
    tmp_path, monkeypatch, capsys
):
    ref = tmp_path / "ref"
    learn = "algorithm.filter_groups=False"  # all-wrong groups still update (a real update)
    assert cli_train.cmd_train(_args(ref, learn)) == 0
    out = capsys.readouterr().out
    wdir = ref / "warmup"
    done = json.loads((wdir / "done.json").read_text())
    assert done["traces"] == 8 and done["warmup_s"] > 0
    assert sum(1 for _ in open(wdir / "expert_data.jsonl")) == 8
    assert (wdir / "hf" / "config.json").exists()
    assert "warm-up: 8 math expert traces" in out
    assert "tool-use warm-up" in (ref / "report.html").read_text()  # the headline names it
    rows = read_metrics(str(ref))
    steps = [r for r in rows if "critic/score/mean" in r]
    assert len(steps) == 2
    # Every rollout ran the tool agent, and its tool metrics were logged.
    for r in steps:
        assert "agent_loop/tool_call_rate" in r and "agent_loop/valid_call_rate" in r
        assert "agent_loop/correct_with_tool" in r and "timing_s/tools" in r
        assert r["num_turns/mean"] >= 1
    info = (
        json.loads((ref / "run_info.json").read_text()) if (ref / "run_info.json").exists() else {}
    )
    if info:  # the RL phase started from the warm-up's model
        assert str(wdir / "hf") in json.dumps(info)

    # The same run, killed during its warm-up (mid-SFT, or after SFT but before the marker),
    # then rerun: the same traces, the same model bit for bit, the same RL.
    real_train, real_done = cli_warmup.train_chats, cli_warmup.write_done

    def killed_train(model, tok, settings, workdir, **kw):
        os.makedirs(os.path.join(workdir, "hf"), exist_ok=True)
        with open(os.path.join(workdir, "hf", "config.json"), "w") as f:
            f.write("{")  # a half-written model directory
        raise Killed

    def killed_done(*a, **kw):
        raise Killed

    for kill_at, patch in (("mid_sft", ("train_chats", killed_train)),
                           ("before_done", ("write_done", killed_done))):  # fmt: skip
        run = tmp_path / kill_at
        monkeypatch.setattr(cli_warmup, *patch)
        with pytest.raises(Killed):
            cli_train.cmd_train(_args(run, learn))
        assert not (run / "warmup" / "done.json").exists()
        monkeypatch.setattr(cli_warmup, "train_chats", real_train)
        monkeypatch.setattr(cli_warmup, "write_done", real_done)
        assert cli_train.cmd_train(_args(run, learn)) == 0
        assert _digest(run / "warmup" / "hf") == _digest(wdir / "hf"), kill_at
        assert (run / "warmup" / "expert_data.jsonl").read_bytes() == (
            wdir / "expert_data.jsonl"
        ).read_bytes()
        assert _learning_rows(run) == _learning_rows(ref), kill_at
    assert all("actor/pg_loss" in r for r in _learning_rows(ref))


def test_a_finished_warmup_is_kept(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    assert cli_train.cmd_train(_args(run)) == 0
    before = _digest(run / "warmup" / "hf")
    capsys.readouterr()

    def no_second_warmup(*a, **kw):
        raise AssertionError("the warm-up ran again")

    monkeypatch.setattr(cli_warmup, "train_chats", no_second_warmup)
    # More RL steps from the same workdir: the warm-up is found, RL resumes from its checkpoint.
    assert cli_train.cmd_train(_args(run, "trainer.total_steps=3")) == 0
    assert "warm-up: done in" in capsys.readouterr().out
    assert _digest(run / "warmup" / "hf") == before
    assert len([r for r in read_metrics(str(run)) if "critic/score/mean" in r]) == 3


def test_bad_warmup_config_is_one_clear_error(tmp_path, capsys):
    assert cli_train.cmd_train(_args(tmp_path / "r", "warmup.expert=cyber")) == 1
    assert "warmup.expert='cyber'" in capsys.readouterr().err


def test_sft_from_expert_runs_the_warmup_alone(tmp_path, capsys):
    def sft(config, workdir):
        return cli_train.cmd_sft(
            argparse.Namespace(
                config=config, overrides=[], workdir=str(workdir), from_rollouts=False,
                then_train=False, from_expert=True,
            )
        )  # fmt: skip

    assert sft(CONFIG, tmp_path / "w") == 0
    assert (tmp_path / "w" / "warmup" / "hf" / "config.json").exists()
    assert not (tmp_path / "w" / "metrics.jsonl").exists()  # no RL ran
    assert "(8 traces)" in capsys.readouterr().out
    assert sft("configs/grpo_tiny.py", tmp_path / "x") == 1
    assert "--from-expert needs warmup.expert" in capsys.readouterr().err
