"""Coalescing concurrent query embeddings into one call to the embedding service.

While one call is in flight, queries from other requests wait in a queue; when it returns, all of
them go out as the next batch. An idle service sees no added latency (a lone request makes its
call itself); a busy one sees far fewer, larger calls (one ONNX run or one HTTP request instead of
dozens).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import numpy as np

EmbedFunction = Callable[[list[str]], Awaitable[np.ndarray]]


@dataclass
class _Queue:
    pending: list[tuple[list[str], asyncio.Future[np.ndarray]]] = field(default_factory=list)
    draining: bool = False
    task: asyncio.Task[None] | None = None


class QueryBatcher:
    """Batches concurrent ``embed(texts)`` calls made on the same event loop (one queue per loop)."""

    def __init__(self, embed: EmbedFunction, max_texts: int = 128) -> None:
        self._embed = embed
        self.max_texts = max_texts
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Queue] = weakref.WeakKeyDictionary()

    async def embed(self, texts: list[str]) -> np.ndarray:
        loop = asyncio.get_running_loop()
        queue = self._queues.get(loop)
        if queue is None:
            queue = self._queues[loop] = _Queue()
        if not queue.draining:
            # Nothing in flight: this request calls the service itself (no task hop when idle); the
            # requests that arrive meanwhile queue up and go out together when it returns.
            queue.draining = True
            try:
                return await self._embed(texts)
            finally:
                if queue.pending:
                    queue.task = loop.create_task(self._drain(queue))
                else:
                    queue.draining = False
        # A call is in flight: wait for the next batch (started by whoever finishes that call).
        future: asyncio.Future[np.ndarray] = loop.create_future()
        queue.pending.append((texts, future))
        return await future

    async def _drain(self, queue: _Queue) -> None:
        try:
            while queue.pending:
                batch: list[tuple[list[str], asyncio.Future[np.ndarray]]] = []
                size = 0
                while queue.pending and (not batch or size + len(queue.pending[0][0]) <= self.max_texts):
                    texts, future = queue.pending.pop(0)
                    if not future.cancelled():
                        batch.append((texts, future))
                        size += len(texts)
                if not batch:
                    continue
                try:
                    vectors = await self._embed([t for texts, _ in batch for t in texts])
                except Exception as exc:  # every waiting request sees the failure (and falls back)
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                start = 0
                for texts, future in batch:
                    if not future.done():
                        future.set_result(vectors[start : start + len(texts)])
                    start += len(texts)
                # Let the requests just answered finish their ranking before the next call starts:
                # its timeout then measures the service, not the event loop busy with them.
                await asyncio.sleep(0)
        finally:
            queue.draining = False
