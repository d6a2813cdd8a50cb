"""An OpenAI-compatible HTTP server over one JaxEngine (FastAPI): `/v1/chat/completions`,
`/v1/completions`, `/v1/models`, streaming (SSE), n, temperature, top_p, max_tokens, stop,
seed and the sampled tokens' log-probs.

Every request goes through one AsyncEngineClient, so concurrent requests share the decode
slots by continuous batching. Streaming reads each request's tokens after every engine step
(StreamingScheduler). A prompt that does not fit the context, or a prompt plus max_tokens that
does not, is refused with 400 `context_length_exceeded`, never truncated.

    app = OpenAIServer(engine, tokenizer, "smollm2-135m-instruct").app()
    uvicorn.run(app, port=8000)
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Sequence

from mimojax.engine.client import AsyncEngineClient
from mimojax.engine.engine import EngineError, JaxEngine
from mimojax.engine.openai_protocol import (
    APIError,
    cut_at_stop,
    logprob_entry,
    parse_common,
    parse_messages,
    parse_prompts,
)
from mimojax.engine.openai_protocol import Request as Parsed
from mimojax.engine.sampling import SamplingError, SamplingParams, sample_key
from mimojax.engine.scheduler import Scheduler
from mimojax.extras import require
from mimojax.models.tokenizer import encode_chat

# FastAPI is the [serve] extra; nothing on the training path imports this module.
require("fastapi", "serve", "mimojax serve (mimojax.engine.server)")

from fastapi import FastAPI, Request  # noqa: E402
from fastapi.responses import JSONResponse, StreamingResponse  # noqa: E402
from starlette.exceptions import HTTPException as StarletteHTTPException  # noqa: E402


class StreamingScheduler(Scheduler):
    """A Scheduler that, after each step, hands watched requests their samples so far."""

    def __init__(self, engine: JaxEngine, prompt_overflow: str = "error", pipeline=None):
        super().__init__(engine, prompt_overflow, pipeline)
        self.watchers: dict = {}  # request_id -> fn(snapshot); set before submit
        self._watched: dict = {}

    def submit(self, request_id, *args, **kwargs):
        req = super().submit(request_id, *args, **kwargs)
        if request_id in self.watchers:
            self._watched[request_id] = req
        return req

    def step(self):
        done = super().step()
        if self._watched:
            live = {(id(x.request), x.sample): x for x in self._live.values()}
            for rid, req in list(self._watched.items()):
                snap = []
                for j, out in enumerate(req.outputs):
                    x = live.get((id(req), j))
                    if out is not None:
                        snap.append((list(out.token_ids), list(out.logprobs), out.finish_reason))
                    elif x is not None:
                        snap.append((list(x.tokens), list(x.logprobs), None))
                    else:
                        snap.append(([], [], None))
                fn = self.watchers.get(rid)
                if fn is not None:
                    fn(snap)
                if req.remaining == 0:
                    self._watched.pop(rid, None)
        return done


class _Choice:
    """One sample's text and tokens as released so far (stop strings cut, held back)."""

    def __init__(self, server: OpenAIServer, req: Parsed):
        self.server, self.req = server, req
        self.sent_chars = self.sent_tokens = 0
        self.text = ""
        self.tokens: list[tuple[str, float]] = []
        self.n_tokens = 0  # generated tokens billed (content + a stop token)
        self.done = False
        self.finish: str | None = None

    def _within(self, ids: list[int], limit: str) -> int:
        """The most tokens (from those already released on) whose text fits in `limit`."""
        k = self.sent_tokens
        while k < len(ids) and limit.startswith(self.server.decode(ids[: k + 1])):
            k += 1
        return k

    def update(self, ids, logprobs, finish) -> tuple[str, list, str | None] | None:
        """(new text, new (token, logprob) pairs, finish reason or None); None once done."""
        if self.done:
            return None
        ids, logprobs = list(ids), list(logprobs)
        extra = 0
        if finish == "stop" and ids and ids[-1] in self.server.stop_ids(self.req):
            ids, logprobs, extra = ids[:-1], logprobs[:-1], 1  # eos is not content
        text = full = self.server.decode(ids)
        cut = cut_at_stop(text, self.req.stop)
        if cut is not None:
            text, finish, extra = text[:cut], "stop", 0
        if finish is not None and cut is None:
            limit, k = text, len(ids)
        else:
            hold = max(map(len, self.req.stop)) - 1 if self.req.stop and finish is None else 0
            limit = text[: len(text) - hold] if hold else text
            limit = limit.rstrip("\ufffd") if finish is None else limit
            k = len(ids) if limit == full else self._within(ids, limit)
        new_text = limit[self.sent_chars :]
        new_tokens = [
            (self.server.token_text(i, self.req), float(lp))
            for i, lp in zip(ids[self.sent_tokens : k], logprobs[self.sent_tokens : k])
        ]
        self.sent_chars, self.sent_tokens = len(limit), max(k, self.sent_tokens)
        self.text += new_text
        self.tokens += new_tokens
        self.n_tokens = self.sent_tokens + extra
        if finish is not None:
            self.done = True
            self.finish = "length" if finish == "length" else "stop"
        return new_text, new_tokens, self.finish


class OpenAIServer:
    """The request handlers and the FastAPI app over one engine and tokenizer."""

    def __init__(self, engine: JaxEngine, tokenizer, model_id: str, aliases: Sequence[str] = ()):
        self.engine, self.tokenizer, self.model_id = engine, tokenizer, model_id
        self.names = {model_id, *aliases}
        self.client = AsyncEngineClient(engine)
        self.scheduler = StreamingScheduler(engine)
        self.client.scheduler = self.scheduler
        self._ids = itertools.count(1)
        self.created = int(time.time())
        self._stop_cache: dict[str, list[int] | None] = {}

    # ------------------------------------------------------------ text helpers
    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def token_text(self, token_id: int, req: Parsed) -> str:
        if req.echo_token_ids:
            return f"token_id:{token_id}"
        return self.tokenizer.decode([token_id], skip_special_tokens=False)

    def stop_ids(self, req: Parsed) -> frozenset[int]:
        return frozenset(self.engine.eos_token_ids)

    def _stop_tokens(self, stop: str) -> list[int] | None:
        """Token ids that spell `stop` exactly (an early stop for the engine), if any."""
        if stop not in self._stop_cache:
            ids = list(self.tokenizer.encode(stop, add_special_tokens=False))
            self._stop_cache[stop] = ids if ids and self.decode(ids) == stop else None
        return self._stop_cache[stop]

    # ------------------------------------------------------------ request -> engine
    def _check_model(self, body: dict) -> None:
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise APIError("'model' is required", param="model")
        if model not in self.names:
            raise APIError(
                f"The model '{model}' does not exist (this server serves '{self.model_id}')",
                status=404,
                param="model",
                code="model_not_found",
            )

    def _sampling(self, prompt_len: int, req: Parsed, what: str) -> SamplingParams:
        context, prompt_limit = self.engine.max_cache_length, self.engine.max_prefill_length
        if prompt_len > prompt_limit:
            raise APIError(
                f"This model's maximum prompt length is {prompt_limit} tokens (context "
                f"{context}). However, your {what} resulted in {prompt_len} tokens. "
                f"Please reduce the length of the {what}.",
                param=what,
                code="context_length_exceeded",
            )
        max_tokens = req.max_tokens if req.max_tokens is not None else context - prompt_len
        if prompt_len + max_tokens > context:
            raise APIError(
                f"This model's maximum context length is {context} tokens. However, you "
                f"requested {prompt_len + max_tokens} tokens ({prompt_len} in the {what}, "
                f"{max_tokens} in the completion). Please reduce the length of the {what} "
                "or completion.",
                param="max_tokens",
                code="context_length_exceeded",
            )
        stops = [self._stop_tokens(s) for s in req.stop]
        try:
            return SamplingParams(
                temperature=req.temperature,
                top_p=req.top_p,
                seed=req.seed or 0,
                max_new_tokens=max_tokens,
                stop_sequences=[s for s in stops if s] or None,
            )
        except SamplingError as e:
            raise APIError(str(e)) from None

    async def _events(self, prompts: list[list[int]], sps: list[SamplingParams], req: Parsed,
                      choices: list[list[_Choice]]):  # fmt: skip
        """Yields (choice index, new text, new tokens, finish or None) as samples progress;
        `choices[p][j]` accumulates sample j of prompt p."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        n = req.n
        rids = [next(self._ids) for _ in prompts]

        def watcher(p):
            return lambda snap: loop.call_soon_threadsafe(queue.put_nowait, (p, snap, False))

        async def run(p):
            keys = None
            if req.seed is not None:  # same seed, same samples, whatever else is running
                keys = [sample_key(req.seed, p, j) for j in range(n)]
            try:
                out = await self.client.generate(rids[p], prompts[p], sps[p], n, keys=keys)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - reported to the client below
                queue.put_nowait((p, e, True))
                return
            outs = out if isinstance(out, list) else [out]
            snap = [(c.token_ids, c.logprobs, c.finish_reason) for c in outs]
            queue.put_nowait((p, snap, True))

        if req.stream:
            for p, rid in enumerate(rids):
                self.scheduler.watchers[rid] = watcher(p)
        tasks = [asyncio.create_task(run(p)) for p in range(len(prompts))]
        pending = set(range(len(prompts)))
        try:
            while pending:
                p, snap, final = await queue.get()
                if p not in pending:
                    continue
                if isinstance(snap, Exception):
                    if isinstance(snap, EngineError):
                        raise APIError(str(snap)) from snap
                    raise snap
                for j, (ids, logprobs, finish) in enumerate(snap):
                    event = choices[p][j].update(ids, logprobs, finish)
                    if event is not None and (event[0] or event[1] or event[2]):
                        yield (p * n + j, *event)
                if all(c.done for c in choices[p]):
                    pending.discard(p)
                    if not final:  # every sample hit a stop string: free the slots
                        self.client.abort(rids[p])
        finally:
            for rid in rids:
                self.scheduler.watchers.pop(rid, None)
            for t in tasks:
                if not t.done():
                    t.cancel()

    def _usage(self, prompts, choices) -> dict:
        prompt = sum(map(len, prompts))
        completion = sum(c.n_tokens for row in choices for c in row)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    # ------------------------------------------------------------ endpoints
    async def chat(self, body: dict):
        self._check_model(body)
        req = parse_common(body, chat=True)
        messages = parse_messages(body)
        try:
            prompt = encode_chat(self.tokenizer, messages)
        except Exception as e:  # noqa: BLE001 - a template that rejects these messages
            raise APIError(f"cannot apply the chat template: {e}", param="messages") from None
        sps = [self._sampling(len(prompt), req, "messages")]
        return await self._respond([prompt], sps, req, chat=True)

    async def completions(self, body: dict):
        self._check_model(body)
        req = parse_common(body, chat=False)
        prompts = [
            p if isinstance(p, list) else list(self.tokenizer.encode(p))
            for p in parse_prompts(body)
        ]
        if any(not p for p in prompts):
            raise APIError("'prompt' must not be empty", param="prompt")
        sps = [self._sampling(len(p), req, "prompt") for p in prompts]
        return await self._respond(prompts, sps, req, chat=False)

    async def _respond(self, prompts, sps, req: Parsed, *, chat: bool):
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
        head = {
            "id": rid,
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": self.model_id,
        }
        rows = [[_Choice(self, req) for _ in range(req.n)] for _ in prompts]
        events = self._events(prompts, sps, req, rows)
        if req.stream:
            return StreamingResponse(
                self._sse(events, head, prompts, req, chat, rows), media_type="text/event-stream"
            )
        async for _ in events:
            pass
        choices = [c for row in rows for c in row]
        out = []
        for i, c in enumerate(choices):
            if chat:
                lp = {"content": [logprob_entry(t, v) for t, v in c.tokens]}
                item = {"index": i, "message": {"role": "assistant", "content": c.text}}
            else:
                lp = _completion_logprobs(c.tokens, 0)
                item = {"index": i, "text": c.text}
            item["logprobs"] = lp if req.logprobs else None
            item["finish_reason"] = c.finish
            out.append(item)
        head["object"] = "chat.completion" if chat else "text_completion"
        return JSONResponse({**head, "choices": out, "usage": self._usage(prompts, rows)})

    async def _sse(
        self, events, head, prompts, req: Parsed, chat: bool, rows
    ) -> AsyncIterator[str]:
        def chunk(choices, **extra):
            return "data: " + json.dumps({**head, "choices": choices, **extra}) + "\n\n"

        offsets: dict[int, int] = {}
        if chat:
            n_choices = len(prompts) * req.n
            yield chunk(
                [
                    {"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None}
                    | {"finish_reason": None}
                    for i in range(n_choices)
                ]
            )
        try:
            async for index, text, tokens, finish in events:
                if chat:
                    choice = {"index": index, "delta": {"content": text} if text else {}}
                    lp = {"content": [logprob_entry(t, v) for t, v in tokens]}
                else:
                    choice = {"index": index, "text": text}
                    lp = _completion_logprobs(tokens, offsets.get(index, 0))
                    offsets[index] = offsets.get(index, 0) + len(text)
                choice["logprobs"] = lp if req.logprobs else None
                choice["finish_reason"] = finish
                yield chunk([choice])
        except APIError as e:
            yield "data: " + json.dumps(e.body()) + "\n\n"
            return
        except Exception as e:  # noqa: BLE001 - the engine failed mid-stream
            yield "data: " + json.dumps(APIError(str(e), 500, kind="server_error").body()) + "\n\n"
            return
        if req.include_usage:
            yield chunk([], usage=self._usage(prompts, rows))
        yield "data: [DONE]\n\n"

    def models(self) -> dict:
        return {
            "object": "list",
            "data": [
                {
                    "id": self.model_id,
                    "object": "model",
                    "created": self.created,
                    "owned_by": "mimojax",
                    "max_model_len": self.engine.max_cache_length,
                }
            ],
        }

    # ------------------------------------------------------------ the app
    def app(self) -> FastAPI:
        """The FastAPI application (errors in OpenAI's {"error": {...}} shape)."""
        app = FastAPI(title="mimojax", docs_url=None, redoc_url=None)

        @app.exception_handler(APIError)
        async def _api_error(request, e: APIError):
            return JSONResponse(e.body(), status_code=e.status)

        @app.exception_handler(StarletteHTTPException)
        async def _http_error(request, e):
            kind = "not_found_error" if e.status_code == 404 else "invalid_request_error"
            body = APIError(str(e.detail), e.status_code, kind=kind).body()
            return JSONResponse(body, status_code=e.status_code)

        async def body_of(request: Request) -> dict:
            try:
                body = json.loads(await request.body())
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise APIError(f"the body is not valid JSON: {e}") from None
            if not isinstance(body, dict):
                raise APIError("the body must be a JSON object")
            return body

        @app.get("/v1/models")
        async def _models():
            return self.models()

        @app.post("/v1/chat/completions")
        async def _chat(request: Request):
            return await self.chat(await body_of(request))

        @app.post("/v1/completions")
        async def _completions(request: Request):
            return await self.completions(await body_of(request))

        @app.get("/health")
        async def _health():
            return {"status": "ok"}

        @app.on_event("shutdown")
        async def _close():
            await self.client.aclose()

        return app


def _completion_logprobs(tokens, offset: int) -> dict:
    text_offset = []
    for t, _ in tokens:
        text_offset.append(offset)
        offset += len(t)
    return {
        "tokens": [t for t, _ in tokens],
        "token_logprobs": [v for _, v in tokens],
        "top_logprobs": None,
        "text_offset": text_offset,
    }
