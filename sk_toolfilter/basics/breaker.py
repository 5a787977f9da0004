"""A circuit breaker's state, shared by every call to a service that may be down: the embedding
service (:class:`~sk_toolfilter.retrieval.faults.EmbeddingCircuit`) and the tool picker's chat model
(:func:`~sk_toolfilter.selection.pipeline.run_second_stage`).

After ``failure_threshold`` consecutive failures the breaker opens: for ``cooldown_seconds`` the
service is not called at all (a dead service must not add its timeout to every request); then one
trial call decides whether it closes again. An *incident* runs from the first failure to the next
success, so the caller can log one line when it starts and one when it ends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Breaker:
    """Consecutive failures, the time the breaker stays open, and the incident (thread- and task-safe)."""

    def __init__(
        self, failure_threshold: int = 3, cooldown_seconds: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.failure_threshold = failure_threshold
        self.cooldown_seconds = cooldown_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self.consecutive_failures = 0
        self._open_until: float | None = None
        self._incident = False

    def open_for(self) -> float | None:
        """Seconds the breaker stays open (no call is made meanwhile), or None while it is closed."""
        with self._lock:
            if self._open_until is None:
                return None
            left = self._open_until - self._clock()
            return left if left > 0 else None

    def succeeded(self) -> bool:
        """Record a success; True when it ends an incident (the service recovered)."""
        with self._lock:
            recovered = self._incident
            self.consecutive_failures = 0
            self._open_until = None
            self._incident = False
        return recovered

    def failed(self) -> bool:
        """Record a failure; True when it starts an incident (the first failure since a success)."""
        with self._lock:
            self.consecutive_failures += 1
            first = not self._incident
            self._incident = True
            if self.consecutive_failures >= self.failure_threshold:
                self._open_until = self._clock() + self.cooldown_seconds
        return first
