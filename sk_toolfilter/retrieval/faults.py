"""Surviving a failing embedding service at query time: timeout, circuit breaker, one warning per incident.

A request whose query embedding fails (exception, timeout, wrong shape, NaN, rate limit) is ranked
with BM25 instead. After ``failure_threshold`` consecutive failures the circuit opens: for
``cooldown_seconds`` no embedding call is made at all (a dead service must not add its timeout to
every request); then one trial call decides whether it closes again. A warning is logged when an
incident starts, and an info line when the service recovers — not one per request.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import numpy as np

from sk_toolfilter.basics.breaker import Breaker
from sk_toolfilter.basics.errors import EmbeddingServiceError
from sk_toolfilter.basics.redaction import library_logger

logger = library_logger(__name__)


class CircuitOpenError(EmbeddingServiceError):
    """The embedding service failed repeatedly; it is not called until the cooldown ends."""


class EmbeddingCircuit:
    """Timeout + circuit breaker around query-embedding calls (thread- and task-safe)."""

    def __init__(
        self,
        timeout_seconds: float = 5.0,
        failure_threshold: int = 3,
        cooldown_seconds: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout_seconds = timeout_seconds
        self.breaker = Breaker(failure_threshold, cooldown_seconds, clock)
        self.on_incident: Callable[[bool], None] | None = None
        """Called with True when an incident starts (first failure) and False when it ends (telemetry)."""

    @property
    def failure_threshold(self) -> int:
        return self.breaker.failure_threshold

    @property
    def cooldown_seconds(self) -> float:
        return self.breaker.cooldown_seconds

    @property
    def is_open(self) -> bool:
        return self.breaker.open_for() is not None

    def check(self) -> None:
        """Raise :class:`CircuitOpenError` while the circuit is open (a request then uses BM25 at once)."""
        left = self.breaker.open_for()
        if left is not None:
            raise CircuitOpenError(
                f"embedding service failed {self.breaker.consecutive_failures} times in a row; "
                f"not calling it for {left:.0f}s more"
            )

    async def call(self, embed: Callable[[float], Awaitable[np.ndarray]]) -> np.ndarray:
        """Run `embed(timeout_seconds)` unless the circuit is open; `embed` bounds each of its
        service requests by that timeout (``embed_texts(..., timeout=...)``).

        One call is one success or one failure, however many requests wait on its result (their
        time in a queue before the call is not part of any timeout). Raises EmbeddingServiceError.
        """
        self.check()
        try:
            vectors = await embed(self.timeout_seconds)
        except EmbeddingServiceError as exc:
            self._failed(str(exc))
            raise
        self.succeeded()
        return vectors

    def succeeded(self) -> None:
        if self.breaker.succeeded():
            logger.info("sk-toolfilter: embedding service recovered; semantic search is back")
            if self.on_incident is not None:
                self.on_incident(False)

    def _failed(self, reason: str) -> None:
        if self.breaker.failed():
            logger.warning("sk-toolfilter: embedding service failing (%s); ranking with BM25 until it recovers", reason)
            if self.on_incident is not None:
                self.on_incident(True)
