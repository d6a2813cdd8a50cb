"""The terminal progress: a rich bar with the running phase on a terminal, plain lines elsewhere."""

import io
import sys

from mimojax.observe.metrics import MetricsLogger, Timer
from mimojax.observe.progress import current_phase


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_rich_bar_on_a_terminal_shows_step_numbers_and_phase(tmp_path, monkeypatch):
    term = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for the whole line
    timer = Timer()
    log = MetricsLogger(str(tmp_path), total_steps=10, wandb_mode="disabled", progress=True)
    try:
        assert log._bar is not None
        with timer("gen"):
            assert current_phase() == "gen"
            with timer("reward"):
                assert current_phase() == "reward"
            log._bar._progress.refresh()
        assert current_phase() == ""
        log.log(4, {"critic/score/mean": 0.5, "val-core/math/acc/greedy": 0.25, **timer.pop()})
        log._bar._progress.refresh()
    finally:
        log.close()
    out = term.getvalue()
    assert "4/10" in out and "reward 0.500" in out and "math/acc/greedy 0.250" in out
    assert "ETA" in out and "gen" in out
    assert "step 4/10 |" not in out  # the plain line is not printed as well


def test_plain_lines_when_not_a_terminal(tmp_path, capsys):
    with MetricsLogger(str(tmp_path), total_steps=3, wandb_mode="disabled", progress=True) as log:
        assert log._bar is None
        log.log(1, {"critic/score/mean": 0.5})
    assert "step 1/3 | reward 0.500" in capsys.readouterr().err
