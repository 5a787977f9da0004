"""What every table a fleet of replicas shares through the store does alike: sync at start, then in
the background at most every ``every_seconds`` (a selection never waits on the database), and on
``aclose``; a failing store gives one warning (shared with the catalog's version checks), the next
sync is tried after ``retry_seconds``, and one info line says when the store answers again. Nothing
learned meanwhile is lost: a later sync writes it.

Subclass: :class:`~sk_toolfilter.store.learning_table.LearningTable` writes and reads its rows in ``_sync``.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Generic, TypeVar

from sk_toolfilter.basics.errors import first_line
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.store.outage import StoreOutage
from sk_toolfilter.store.store_table import StoreTable

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

logger = library_logger(__name__)

State = TypeVar("State")


class SyncedTable(StoreTable, Generic[State]):
    """One catalog's rows of one shared table, kept in step with a process's `State` (see the module docstring)."""

    what = "state"
    """What the table shares, as the warning and info lines name it."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        schema: str,
        table: str,
        catalog: str,
        *,
        timeout: float,
        every_seconds: float = 30.0,
        retry_seconds: float = 30.0,
        where: str = "an unnamed server",
        outage: StoreOutage | None = None,
    ) -> None:
        super().__init__(pool, schema, table, catalog, timeout=timeout, where=where, outage=outage)
        self.every_seconds, self.retry_seconds = every_seconds, retry_seconds
        self._last_seq = 0
        self._next_sync = 0.0
        self._task: tuple[asyncio.AbstractEventLoop, asyncio.Task[None]] | None = None
        self._lock: asyncio.Lock | None = None
        self.read_only = False
        """True: the table is read, never created or written (the CLI's inspecting commands)."""

    def tick(self, state: State) -> None:
        """Called on each selection: start a background sync when one is due (never waits on it)."""
        if time.monotonic() < self._next_sync:
            return
        loop = asyncio.get_running_loop()
        if self._task is not None and self._task[0] is loop and not self._task[1].done():
            return
        self._next_sync = time.monotonic() + self.every_seconds
        self._task = (loop, loop.create_task(self.sync(state)))

    async def sync(self, state: State) -> None:
        """Write what the table lacks, then read what the other replicas wrote (now)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            try:
                await asyncio.wait_for(self._sync(state), self.timeout * 3)
            except Exception as exc:  # the driver's and the pool's errors, a timeout: served from memory
                self._report(exc)
                return
        if self._outage.end():
            logger.info("sk-toolfilter: the index store %s answers again; %s is shared again", self.where, self.what)
        self._next_sync = time.monotonic() + self.every_seconds

    async def _sync(self, state: State) -> None:
        raise NotImplementedError

    def _report(self, exc: BaseException) -> None:
        self._next_sync = time.monotonic() + self.retry_seconds
        if self._outage.begin():
            retry = f"retrying every {self.retry_seconds:g}s" if self.retry_seconds else "retrying at the next sync"
            logger.warning(
                "sk-toolfilter: cannot share %s through table %s.%s (index store at %s): %s; learning goes on "
                "in memory, %s",
                self.what,
                self._schema,
                self._table,
                self.where,
                first_line(exc),
                retry,
            )

    async def aclose(self, state: State) -> None:
        """Write what is left (a last sync) and wait for a background sync still running."""
        if self._task is not None and not self._task[1].done() and self._task[0] is asyncio.get_running_loop():
            await self._task[1]
        await self.sync(state)
