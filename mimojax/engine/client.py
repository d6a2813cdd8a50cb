"""Async token-in/token-out client: many coroutines (agent loops) share one engine.

A background task runs the scheduler's steps in a worker thread, so the event loop stays free
for tools and graders while the engine decodes; each request resolves its own future.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Sequence

from mimojax.engine.engine import JaxEngine
from mimojax.engine.sampling import SamplingParams, sample_key
from mimojax.engine.scheduler import Completion, Scheduler


def _stable_int(request_id) -> int:
    """A per-request integer for the sampling key that is the same in every process."""
    if isinstance(request_id, int):
        return request_id
    return zlib.crc32(str(request_id).encode())


class AsyncEngineClient:
    """`await client.generate(request_id, prompt_ids, sampling)` -> Completion."""

    def __init__(
        self, engine: JaxEngine, prompt_overflow: str = "error", pipeline: bool | None = None
    ):
        self.engine = engine
        self.scheduler = Scheduler(engine, prompt_overflow, pipeline)
        self._task: asyncio.Task | None = None
        self._wake: asyncio.Event | None = None
        self._futures: dict[object, asyncio.Future] = {}

    async def generate(
        self,
        request_id,
        prompt_ids: Sequence[int],
        sampling: SamplingParams,
        n: int = 1,
        *,
        keys: Sequence | None = None,
        existing_prefix=None,
        retain_kv: bool = False,
    ) -> Completion | list[Completion]:
        """The completion (a list when n > 1); cancelling the awaiting coroutine aborts it.

        `keys` overrides the per-sample keys (default: from sampling.seed and request_id);
        `existing_prefix` / `retain_kv` continue a multi-turn conversation's KV (Scheduler.submit).
        """
        if request_id in self._futures:
            raise ValueError(f"request_id {request_id!r} is already in flight")
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        def on_done(req):
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(req.outputs))

        rid = _stable_int(request_id)
        if keys is None:
            keys = [sample_key(sampling.seed, rid, j) for j in range(n)]
        self._futures[request_id] = fut
        try:
            self.scheduler.submit(
                request_id,
                prompt_ids,
                sampling,
                n,
                keys,
                on_done,
                existing_prefix=existing_prefix,
                retain_kv=retain_kv,
            )
            self._ensure_running()
            outputs = await fut
        except asyncio.CancelledError:
            self.scheduler.abort(request_id)
            raise
        finally:
            self._futures.pop(request_id, None)
        return outputs[0] if n == 1 else outputs

    def abort(self, request_id) -> None:
        """Stops a request; its awaiting coroutine gets finish_reason "abort"."""
        self.scheduler.abort(request_id)
        if self._wake is not None:
            self._wake.set()

    async def aclose(self) -> None:
        """Stops the background task (in-flight requests are aborted first)."""
        for rid in list(self._futures):
            self.abort(rid)
        if self._task is not None:
            while self.scheduler.busy and not self._task.done():
                await asyncio.sleep(0)
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def _ensure_running(self):
        if self._wake is None:
            self._wake = asyncio.Event()
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self):
        while True:
            if not self.scheduler.busy:
                self._wake.clear()
                await self._wake.wait()
                continue
            try:
                await asyncio.to_thread(self.scheduler.step)
            except Exception as err:  # an engine failure fails every waiter, loudly
                for fut in self._futures.values():
                    if not fut.done():
                        fut.set_exception(err)
                raise
