"""The rubric judge: any OpenAI-compatible /v1/chat/completions endpoint (by default a local
`mimojax serve`), with a fixed prompt, robust score parsing, retries, a per-process rate limit
and a timeout. A judge that cannot be reached or never gives a readable score raises
JudgeError: the reward pool turns that into an infra failure, never a zero.

Settings: the row's extra["judge"] over DEFAULTS, then the environment (MIMOJAX_JUDGE_URL,
MIMOJAX_JUDGE_MODEL, MIMOJAX_JUDGE_TIMEOUT_S; spawned grader workers inherit it). A url of
"none" turns the judge off: judge items are dropped from the rubric (rule-only scoring).
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
import urllib.error
import urllib.request

DEFAULTS = {
    "url": "http://127.0.0.1:8000/v1",
    "model": "smollm2-135m-instruct",
    "timeout_s": 30.0,  # per HTTP call
    "retries": 2,  # further attempts after a failed call or an unreadable reply
    "rate_per_s": 4.0,  # calls per second per grader process (0 = unlimited)
    "max_tokens": 24,
    "api_key": "none",
}
_ENV = {
    "url": "MIMOJAX_JUDGE_URL",
    "model": "MIMOJAX_JUDGE_MODEL",
    "timeout_s": "MIMOJAX_JUDGE_TIMEOUT_S",
}

PROMPT = """You are a strict grader. Read the task, the answer and one criterion.

Task:
{task}

Answer:
{answer}

Criterion: {criterion}

Rate how well the answer meets the criterion on a scale from 0 (not at all) to 10 (fully).
Reply with exactly one line: "SCORE: <0-10>"."""


class JudgeError(RuntimeError):
    """The judge could not score (unreachable, timed out, errors, unreadable replies)."""


def settings(extra_judge: dict | None = None) -> dict:
    """DEFAULTS, overridden by the row's judge settings, then by MIMOJAX_JUDGE_* variables."""
    out = dict(DEFAULTS)
    out.update(extra_judge or {})
    for key, var in _ENV.items():
        if os.environ.get(var):
            out[key] = os.environ[var] if key != "timeout_s" else float(os.environ[var])
    return out


_SCORE = re.compile(r"score\s*(?:is|[:=])?\s*\**\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+))?", re.I)
_FRACTION = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:/|out of)\s*(\d+)", re.I)
_NUMBER = re.compile(r"(?<![\w.])(-?\d+(?:\.\d+)?)(?![\w.])")
_YES_NO = re.compile(r"\b(yes|no)\b", re.I)
_NEGATIVE = re.compile(r"\b(does not|doesn't|do not|is not|isn't|fails?|incorrect|wrong)\b", re.I)


def parse_score(text: str, scale: float = 10.0) -> float | None:
    """A reply's score in [0, 1]: "SCORE: 7", "7/10", "8 out of 10", a lone number on the
    0-10 scale, a yes/no, or a plain negative verdict ("does not ...") as 0; None if the
    reply holds no readable score (small judges often ignore the format)."""
    text = str(text)
    for pattern in (_SCORE, _FRACTION):
        m = pattern.search(text)
        if m:
            value = float(m.group(1))
            den = float(m.group(2)) if m.group(2) else scale
            return value / den if den > 0 and 0 <= value <= den else None
    numbers = [float(x) for x in _NUMBER.findall(text)]
    if len(numbers) >= 1 and 0 <= numbers[0] <= scale:
        return numbers[0] / scale
    m = _YES_NO.search(text)
    if m:
        return 1.0 if m.group(1).lower() == "yes" else 0.0
    if _NEGATIVE.search(text):
        return 0.0
    return None


_lock = threading.Lock()
_last_call = [0.0]


def _wait_for_rate(rate_per_s: float) -> None:
    if rate_per_s <= 0:
        return
    with _lock:
        now = time.monotonic()
        wait = _last_call[0] + 1.0 / rate_per_s - now
        if wait > 0:
            time.sleep(wait)
        _last_call[0] = time.monotonic()


def _post(cfg: dict, body: dict) -> dict:
    req = urllib.request.Request(
        cfg["url"].rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {cfg['api_key']}"},
    )
    with urllib.request.urlopen(req, timeout=float(cfg["timeout_s"])) as r:
        return json.loads(r.read())


def judge(task: str, answer: str, criterion: str, cfg: dict) -> dict:
    """{"score" in [0, 1], "tokens", "seconds", "calls"}; raises JudgeError after retries."""
    body = {
        "model": cfg["model"],
        "messages": [
            {
                "role": "user",
                "content": PROMPT.format(task=task, answer=answer, criterion=criterion),
            }
        ],
        "temperature": 0,
        "max_tokens": int(cfg["max_tokens"]),
    }
    tokens, started, problems = 0, time.perf_counter(), []
    attempts = 1 + int(cfg["retries"])
    for attempt in range(attempts):
        if attempt and problems[-1].startswith("unreadable"):
            # the same greedy prompt gives the same reply: a retry samples another one
            body = {**body, "temperature": 0.7, "seed": attempt}
        _wait_for_rate(float(cfg["rate_per_s"]))
        try:
            reply = _post(cfg, body)
        except urllib.error.HTTPError as e:
            problems.append(f"HTTP {e.code}")
            if 400 <= e.code < 500 and e.code not in (408, 429):
                break  # our request is wrong: retrying will not help
        except (OSError, ValueError) as e:  # refused, timed out, not JSON
            problems.append(f"{type(e).__name__}: {e}")
        else:
            usage = reply.get("usage") or {}
            tokens += int(usage.get("total_tokens", 0) or 0)
            try:
                text = reply["choices"][0]["message"]["content"] or ""
            except (KeyError, IndexError, TypeError):
                text = None
            score = None if text is None else parse_score(text)
            if score is not None:
                return {
                    "score": score,
                    "tokens": tokens,
                    "seconds": time.perf_counter() - started,
                    "calls": attempt + 1,
                }
            problems.append(f"unreadable reply {str(text)[:60]!r}")
        if attempt + 1 < attempts:
            time.sleep(min(0.2 * 2**attempt, 2.0))
    raise JudgeError(
        f"judge {cfg['url']} ({cfg['model']}) gave no score after {len(problems)} calls "
        f"[{tokens} tokens, {time.perf_counter() - started:.2f} s]: " + "; ".join(problems[-3:])
    )
