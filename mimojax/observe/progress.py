"""The terminal progress bar (rich): step bar, the step's numbers and ETA, the phase running now.

`MetricsLogger` uses it when stderr is a terminal and prints plain lines otherwise (logs, CI,
pipes). The phase comes from `current_phase()`, which `metrics.Timer` keeps up to date, so the
bar shows "gen", "update_actor", "eval", ... while a step runs, with no hook in the trainer.
"""

from __future__ import annotations

import sys

_PHASES: list[str] = []  # the phases open now, innermost last


def enter_phase(name: str) -> None:
    """Mark `name` as running (timers nest: the innermost shows)."""
    _PHASES.append(name)


def exit_phase(name: str) -> None:
    """Mark `name` as done."""
    if name in _PHASES:
        _PHASES.reverse()
        _PHASES.remove(name)
        _PHASES.reverse()


def current_phase() -> str:
    """The innermost phase running now, or "" between phases."""
    return _PHASES[-1] if _PHASES else ""


def use_rich(stream=None) -> bool:
    """A rich bar only on a terminal."""
    stream = sys.stderr if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


class RichBar:
    """`step N/M ━━━━ gen reward ... | ETA ...`, redrawn in place on stderr."""

    def __init__(self, total_steps: int, start_step: int = 0, stream=None):
        from rich.console import Console
        from rich.progress import Progress, ProgressColumn
        from rich.table import Column
        from rich.text import Text

        class _Line(ProgressColumn):
            """One column, so a narrow terminal cuts the numbers at the end, not the step."""

            def render(self, task):
                width = 20
                done = int(width * min(task.completed / task.total, 1.0))
                text = Text(f"step {task.completed:.0f}/{task.total:.0f} ")
                text.append("━" * done, "green" if done == width else "magenta")
                text.append("━" * (width - done), "grey37")
                if current_phase():
                    text.append(f" {current_phase()}", "cyan")
                text.append(f" {task.fields['stats']}")
                return text

        console = Console(file=sys.stderr if stream is None else stream)
        self._progress = Progress(
            _Line(table_column=Column(no_wrap=True, overflow="ellipsis")),
            console=console,
            refresh_per_second=4,
        )
        self._task = self._progress.add_task(
            "train", total=max(int(total_steps), 1), completed=int(start_step), stats=""
        )
        self._progress.start()

    def update(self, step: int, stats: str) -> None:
        """Move the bar to `step` with the step's numbers (reward, held-out, s/step, ETA)."""
        self._progress.update(self._task, completed=int(step), stats=stats)

    def close(self) -> None:
        """Stop redrawing; the last state stays on the terminal."""
        self._progress.stop()
