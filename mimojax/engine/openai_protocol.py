"""The OpenAI request/response shapes the server speaks: request checking, OpenAI-shaped errors,
stop strings and log-prob entries. Pure functions; the HTTP layer is engine/server.py."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class APIError(Exception):
    """A request the server refuses; becomes {"error": {...}} with this HTTP status."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
    ):
        super().__init__(message)
        self.message, self.status, self.param, self.code, self.kind = (
            message,
            status,
            param,
            code,
            kind,
        )

    def body(self) -> dict:
        """The JSON body OpenAI returns for an error."""
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }


@dataclass
class Request:
    """A checked request: what to sample, and how to answer."""

    n: int
    temperature: float
    top_p: float
    max_tokens: int | None
    stop: list[str]
    seed: int | None
    stream: bool
    include_usage: bool
    logprobs: bool
    echo_token_ids: bool  # vLLM's return_tokens_as_token_ids: "token_id:123" as the token


def _number(body, key, default, lo, hi, *, integer=False, lo_open=False):
    value = body.get(key, default)
    if value is None:
        return default
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or (not integer and not math.isfinite(value)):
        kind = "an integer" if integer else "a number"
        raise APIError(f"'{key}' must be {kind}, got {value!r}", param=key)
    if (value <= lo if lo_open else value < lo) or (hi is not None and value > hi):
        bound = f"({lo}, {hi}]" if lo_open else f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise APIError(f"'{key}' must be in {bound}, got {value!r}", param=key)
    return value


def parse_common(body: Mapping, *, chat: bool) -> Request:
    """The sampling fields shared by /v1/chat/completions and /v1/completions."""
    n = _number(body, "n", 1, 1, 128, integer=True)
    temperature = float(_number(body, "temperature", 1.0, 0.0, 2.0))
    top_p = float(_number(body, "top_p", 1.0, 0.0, 1.0, lo_open=True))
    key = "max_completion_tokens" if chat and "max_completion_tokens" in body else "max_tokens"
    max_tokens = _number(body, key, None, 1, None, integer=True)
    if max_tokens is None and not chat:
        max_tokens = 16  # OpenAI's legacy completions default
    stop = body.get("stop")
    if stop is None:
        stop = []
    elif isinstance(stop, str):
        stop = [stop]
    if not (isinstance(stop, list) and all(isinstance(s, str) and s for s in stop)):
        raise APIError("'stop' must be a non-empty string or a list of them", param="stop")
    if len(stop) > 4:
        raise APIError(f"'stop' takes at most 4 sequences, got {len(stop)}", param="stop")
    seed = _number(body, "seed", None, -(2**31), 2**31 - 1, integer=True)
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise APIError("'stream' must be a boolean", param="stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, Mapping):
        raise APIError("'stream_options' must be an object", param="stream_options")
    if chat:
        logprobs = body.get("logprobs", False)
        if not isinstance(logprobs, bool) and logprobs is not None:
            raise APIError("'logprobs' must be a boolean", param="logprobs")
        top = _number(body, "top_logprobs", 0, 0, 20, integer=True)
    else:
        top = _number(body, "logprobs", None, 0, 5, integer=True)
        logprobs = top is not None
        top = top or 0
    if top:
        # The engine returns the sampled token's log-prob only (DESIGN: logprobs travel).
        raise APIError(
            "top log-probs are not supported; only the sampled tokens' log-probs "
            + ("(top_logprobs=0)" if chat else "(logprobs=0)"),
            param="top_logprobs" if chat else "logprobs",
            code="unsupported_parameter",
        )
    if body.get("echo"):
        raise APIError("'echo' is not supported", param="echo", code="unsupported_parameter")
    return Request(
        n=n,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        stop=stop,
        seed=seed,
        stream=stream,
        include_usage=bool(options.get("include_usage", False)),
        logprobs=bool(logprobs),
        echo_token_ids=bool(body.get("return_tokens_as_token_ids", False)),
    )


def parse_messages(body: Mapping) -> list[dict]:
    """Chat messages as [{"role", "content": str}] (text parts of a content list joined)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise APIError("'messages' must be a non-empty list", param="messages")
    out = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, Mapping):
            raise APIError(f"{where} must be an object", param=where)
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise APIError(f"{where}.role {role!r} is not a chat role", param=f"{where}.role")
        content = m.get("content")
        if isinstance(content, list):
            texts = []
            for part in content:
                if not (isinstance(part, Mapping) and part.get("type") == "text"):
                    raise APIError(
                        f"{where}.content: only text parts are supported",
                        param=f"{where}.content",
                    )
                texts.append(str(part.get("text", "")))
            content = "".join(texts)
        if content is None and role == "assistant":
            content = ""
        if not isinstance(content, str):
            raise APIError(f"{where}.content must be a string", param=f"{where}.content")
        out.append({"role": "system" if role == "developer" else role, "content": content})
    return out


def parse_prompts(body: Mapping) -> list[str | list[int]]:
    """/v1/completions prompts: a string, a list of strings, token ids, or lists of ids."""
    prompt = body.get("prompt")

    def ids(x):
        return isinstance(x, list) and x and all(isinstance(t, int) and t >= 0 for t in x)

    if isinstance(prompt, str):
        return [prompt]
    if ids(prompt):
        return [list(prompt)]
    if isinstance(prompt, list) and prompt and all(isinstance(p, str) or ids(p) for p in prompt):
        return list(prompt)
    raise APIError(
        "'prompt' must be a string, a list of strings, or (lists of) token ids", param="prompt"
    )


def cut_at_stop(text: str, stop: Sequence[str]) -> int | None:
    """Index of the earliest stop string in `text` (None if there is none)."""
    hits = [i for i in (text.find(s) for s in stop) if i >= 0]
    return min(hits) if hits else None


def logprob_entry(token: str, logprob: float) -> dict:
    """One token's entry of a chat `logprobs.content` list."""
    return {
        "token": token,
        "logprob": logprob,
        "bytes": list(token.encode("utf-8")),
        "top_logprobs": [],
    }
