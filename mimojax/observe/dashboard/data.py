"""One followed run: new metrics lines since the last poll, and the summary the page shows.

`RunFeed.poll(cursor)` reads only what was appended since its last read (a half-written last
line waits for the next poll). When the file is rewritten (a resume keeps only checkpointed
steps) the feed starts over under a new generation, and the page drops what it had.
"""

from __future__ import annotations

import os
import threading

from mimojax.observe.metrics import METRICS_FILE, read_metrics_from, rows_by_step
from mimojax.observe.run_costs import cost_summary, eval_cost_points, restart_summary
from mimojax.observe.summary import eval_points, read_run_info, summarize_run


class RunFeed:
    """Follows WORKDIR/metrics.jsonl; thread-safe (the server polls from several threads)."""

    def __init__(self, workdir: str, name: str | None = None):
        self.workdir = workdir
        self.name = name or os.path.basename(os.path.normpath(workdir)) or workdir
        self.path = os.path.join(workdir, METRICS_FILE)
        self._lock = threading.Lock()
        self._offset, self._inode = 0, None
        self.generation = 0
        self.lines: list[dict] = []
        self.error: str | None = None
        self._summary_key, self._summary = None, None  # polls without new lines reuse it

    def _refresh(self) -> None:
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            inode = None
        if inode != self._inode and self._inode is not None:
            self._restart()
        self._inode = inode
        try:
            new, self._offset = read_metrics_from(self.path, self._offset)
        except EOFError:
            self._restart()
            new, self._offset = read_metrics_from(self.path, 0)
        except (ValueError, UnicodeDecodeError) as e:
            self.error = str(e)
            return
        self.error = None
        self.lines.extend(new)

    def _restart(self) -> None:
        self.generation += 1
        self._offset, self.lines = 0, []

    def poll(self, generation: int, seen: int, target: float | None) -> dict:
        """Lines after the first `seen` of `generation` (all lines if the file was rewritten)."""
        with self._lock:
            self._refresh()
            start = seen if generation == self.generation else 0
            start = min(max(start, 0), len(self.lines))
            info, info_error = None, None
            try:
                info = read_run_info(os.path.join(self.workdir, "run_info.json"))
            except (ValueError, OSError) as e:
                info_error = str(e)
            return {
                "name": self.name,
                "workdir": os.path.abspath(self.workdir),
                "generation": self.generation,
                "start": start,
                "lines": self.lines[start:],
                "total": len(self.lines),
                "error": self.error or info_error,
                "summary": self._cached_summary(info, target),
            }

    def _cached_summary(self, info: dict | None, target: float | None) -> dict:
        key = (self.generation, len(self.lines), target, repr(info))
        if key != self._summary_key:
            self._summary_key, self._summary = key, summary(self.lines, info, target)
        return self._summary


def summary(lines: list[dict], info: dict | None, target: float | None) -> dict:
    """What the page shows besides raw series: headline numbers, costs, restarts, eval points."""
    rows = rows_by_step(lines)
    if not rows:
        return {"steps": 0, "last_step": None}
    head = summarize_run(rows)
    points = eval_points(rows)  # once: it is most of a summary's time on a long run
    head.pop("time_to_points", None)  # int keys; the page has its own target
    return {
        "steps": head["steps"],
        "last_step": head.get("last_step"),
        "headline": head,
        "costs": cost_summary(rows, info, target, points),
        "restarts": restart_summary(lines, info),
        "evals": eval_cost_points(rows, info, points),
        "info": {k: info[k] for k in ("model", "algorithm", "batch", "roles") if k in info}
        if info
        else {},
    }
