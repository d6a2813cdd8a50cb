"""Rule items of a rubric, checked in code: length, must-mention, forbidden content, format.

An item is a dict {"kind", "weight", ...}; `check(item, response)` gives its score in [0, 1].
Items of kind "judge" are not rules: grader.py sends them to the judge endpoint.
"""

from __future__ import annotations

import json
import re

RULE_KINDS = ("max_words", "min_words", "must_mention", "forbidden", "format")
FORMATS = ("bullets", "numbered", "one_line", "json")
_BULLET = re.compile(r"^\s*[-*\u2022]\s+\S")
_NUMBERED = re.compile(r"^\s*\d+[.)]\s+\S")


def words(text: str) -> int:
    return len(re.findall(r"\b[\w'-]+\b", text))


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower())


def mentions(text: str, phrase: str) -> bool:
    """`phrase` occurs in `text` as whole words, case- and whitespace-insensitively."""
    return re.search(r"(?<!\w)" + re.escape(_norm(phrase)) + r"(?!\w)", _norm(text)) is not None


def _json_object(text: str):
    body = text.strip()
    fence = re.search(r"```(?:json)?\s*\n(.*?)```", body, re.DOTALL)
    if fence:
        body = fence.group(1)
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def check(item: dict, response: str) -> float:
    """The score in [0, 1] of one rule item on `response`."""
    kind = item["kind"]
    if kind == "max_words":
        return float(0 < words(response) <= int(item["value"]))
    if kind == "min_words":
        return float(words(response) >= int(item["value"]))
    if kind == "must_mention":
        facts = item["facts"]  # each fact: a phrase or a list of accepted alternatives
        hit = [
            any(mentions(response, a) for a in ([f] if isinstance(f, str) else f)) for f in facts
        ]
        return sum(hit) / len(hit)
    if kind == "forbidden":
        return float(not any(mentions(response, p) for p in item["phrases"]))
    if kind == "format":
        lines = [ln for ln in response.strip().splitlines() if ln.strip()]
        fmt = item["value"]
        if fmt in ("bullets", "numbered"):
            pattern = _BULLET if fmt == "bullets" else _NUMBERED
            ok = [ln for ln in lines if pattern.match(ln)]
            want = item.get("count")
            return float(bool(ok) and len(ok) == len(lines) and (want is None or len(ok) == want))
        if fmt == "one_line":
            return float(len(lines) == 1)
        if fmt == "json":
            obj = _json_object(response)
            return float(obj is not None and all(k in obj for k in item.get("keys", ())))
        raise ValueError(f"unknown format {fmt!r}; choose from {FORMATS}")
    raise ValueError(f"unknown rubric item kind {kind!r}; rules: {RULE_KINDS} (or 'judge')")
