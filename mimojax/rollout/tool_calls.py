"""Tool calls in the Hermes / Qwen format: `<tool_call>{"name": .., "arguments": {..}}</tool_call>`.

A malformed call is returned with its error (the agent loop turns it into an error observation
and counts it), never raised: a model learning to call tools writes many broken ones.
"""

from __future__ import annotations

import dataclasses
import json
import re

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_CALL = re.compile(re.escape(OPEN) + r"(.*?)(?:" + re.escape(CLOSE) + r"|$)", re.DOTALL)


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One parsed call; `error` says why it cannot run (then name/arguments may be None)."""

    name: str | None
    arguments: dict | None
    error: str | None = None
    raw: str = ""


def _parse_one(body: str, closed: bool) -> ToolCall:
    raw = body.strip()
    if not closed:
        return ToolCall(None, None, f"unterminated {OPEN} (no {CLOSE})", raw)
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as err:
        return ToolCall(None, None, f"tool call is not valid JSON: {err.msg}", raw)
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return ToolCall(None, None, 'tool call must be {"name": str, "arguments": {...}}', raw)
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):  # OpenAI-style clients send arguments as a JSON string
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as err:
            return ToolCall(obj["name"], None, f"arguments are not valid JSON: {err.msg}", raw)
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return ToolCall(obj["name"], None, "arguments must be a JSON object", raw)
    return ToolCall(obj["name"], args, None, raw)


def parse_tool_calls(text: str) -> list[ToolCall]:
    """Every `<tool_call>` block of a model turn, in order (an unclosed last one is an error)."""
    calls = []
    for m in _CALL.finditer(text):
        closed = m.group(0).endswith(CLOSE)
        calls.append(_parse_one(m.group(1), closed))
    return calls


def format_tool_call(name: str, arguments: dict) -> str:
    """The text of one call as a model should write it (tests and scripted policies use it)."""
    return f"{OPEN}\n{json.dumps({'name': name, 'arguments': arguments})}\n{CLOSE}"
