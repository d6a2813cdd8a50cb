"""Tool of the music world: check_piece(abc) reports each rule for the row's constraints.

The rules are checked by the grader's own code (music21 parsing, in-process: no model code
runs); the last checked piece is the trajectory's artifact `piece.abc`, which the grader reads
when the final answer holds no ABC.
"""

from __future__ import annotations

from mimojax.envs.music.grader import MAX_CHARS, RULES, check_rules
from mimojax.rollout.tools import Tool, ToolEnv, ToolSettings, register_tool_env

PIECE_FILE = "piece.abc"


@register_tool_env("music")
def make(example, settings: ToolSettings) -> ToolEnv:
    """The check_piece tool over the row's constraints (example["extra"])."""
    task = dict(example.get("extra") or {})
    files: dict[str, str] = {}

    def check_piece(abc: str) -> str:
        if len(abc) > MAX_CHARS:
            return f"Error: the piece is over {MAX_CHARS} characters"
        files[PIECE_FILE] = abc
        dims = check_rules(abc, task)
        if not dims["format"]:
            return "format: FAIL (music21 cannot read two voices V:1 and V:2 with notes)"
        lines = [f"{r}: {'ok' if dims[r] else 'FAIL'}" for r in RULES]
        return "\n".join(["format: ok", *lines, f"score: {sum(dims[r] for r in RULES) / 8:g}"])

    tool = Tool(
        "check_piece",
        "Check a two-voice ABC piece against this task's rules; lists each rule as ok or FAIL.",
        {
            "type": "object",
            "properties": {"abc": {"type": "string", "description": "the whole ABC text"}},
            "required": ["abc"],
            "additionalProperties": False,
        },
        check_piece,
    )
    return ToolEnv([tool], artifacts=lambda: dict(files),
                   max_observation_chars=settings.max_observation_chars)  # fmt: skip
