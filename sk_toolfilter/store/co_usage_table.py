"""Co-usage kept in the shared PostgreSQL store, so a fleet of replicas learns together.

With ``index.store: postgres`` every replica of a catalog writes the turns it learned to one table
(``<table_prefix>_co_usage``: catalog, turn fingerprint, tool names — never conversation text) and
reads the turns the others wrote. A turn already in the table (the same conversation seen by two
replicas) is stored once. The table keeps the newest ``max_turns`` turns per catalog.

Syncing happens at start (before the first selection), then at most every ``every_seconds`` in the
background (a selection never waits on the database), and on ``aclose``. A failing store gives one
warning; learning goes on in memory, the next sync is tried after ``retry_seconds``, and one info
line says when the store answers again. Nothing learned is lost meanwhile: a later sync writes it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sk_toolfilter.basics.errors import first_line
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.store.outage import StoreOutage

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

logger = library_logger(__name__)

REREAD_ROWS = 1_000
"""Each read starts this many sequence numbers before the last one seen: a row another replica's
insert numbered earlier but committed later is still picked up (fingerprints already known are
skipped)."""


class CoUsage(Protocol):
    """What the table reads and fills (``sk_toolfilter.selection.co_usage.CoUsage``)."""

    max_turns: int

    def __len__(self) -> int: ...

    def turns(self) -> list[tuple[str, tuple[str, ...]]]: ...

    def restore(self, turns: Iterable[tuple[str, Sequence[str]]]) -> None: ...


class CoUsageTable:
    """One catalog's co-usage in the shared store (see the module docstring)."""

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
        self._pool, self._schema, self._table, self.catalog = pool, schema, table, catalog
        self.timeout, self.every_seconds, self.retry_seconds, self.where = timeout, every_seconds, retry_seconds, where
        self._written: set[str] = set()  # fingerprints known to be in the table
        self._last_seq = 0
        self._next_sync = 0.0
        self._outage = outage or StoreOutage()  # shared with the catalog's version checks: one warning
        self._created = False
        self._task: tuple[asyncio.AbstractEventLoop, asyncio.Task[None]] | None = None
        self._lock: asyncio.Lock | None = None

    async def load_into(self, co_usage: CoUsage) -> int:
        """Read the fleet's turns into `co_usage` (creating the table if needed); how many were read.
        A failing store: one warning and 0 (the agent starts with nothing learned)."""
        before = len(co_usage)
        await self.sync(co_usage)
        return len(co_usage) - before

    def tick(self, co_usage: CoUsage) -> None:
        """Called on each selection: start a background sync when one is due (never waits on it)."""
        if time.monotonic() < self._next_sync:
            return
        loop = asyncio.get_running_loop()
        if self._task is not None and self._task[0] is loop and not self._task[1].done():
            return
        self._next_sync = time.monotonic() + self.every_seconds
        self._task = (loop, loop.create_task(self.sync(co_usage)))

    async def sync(self, co_usage: CoUsage) -> None:
        """Write the turns the table lacks, then read the ones other replicas wrote (now)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            try:
                await asyncio.wait_for(self._sync(co_usage), self.timeout * 3)
            except Exception as exc:  # the driver's and the pool's errors, a timeout: served from memory
                self._report(exc)
                return
        if self._outage.end():
            logger.info("sk-toolfilter: the index store %s answers again; co-usage is shared again", self.where)
        self._next_sync = time.monotonic() + self.every_seconds

    async def _sync(self, co_usage: CoUsage) -> None:
        from psycopg import sql

        table = sql.Identifier(self._schema, self._table)
        async with self._pool.connection(timeout=self.timeout) as connection:
            if not self._created:
                await self._create(connection, table)
            new = [(key, calls) for key, calls in co_usage.turns() if key not in self._written]
            if new:
                async with connection.cursor() as cursor:
                    await cursor.executemany(
                        sql.SQL(
                            "INSERT INTO {} (catalog, fingerprint, calls) VALUES (%s, %s, %s) "
                            "ON CONFLICT (catalog, fingerprint) DO NOTHING"
                        ).format(table),
                        [(self.catalog, key, json.dumps(list(calls))) for key, calls in new],
                    )
                self._written.update(key for key, _ in new)
                await connection.execute(
                    sql.SQL(
                        "DELETE FROM {t} WHERE catalog = %s AND seq <= "
                        "(SELECT seq FROM {t} WHERE catalog = %s ORDER BY seq DESC OFFSET %s LIMIT 1)"
                    ).format(t=table),
                    (self.catalog, self.catalog, co_usage.max_turns),
                )
            cursor = await connection.execute(
                sql.SQL(
                    "SELECT seq, fingerprint, calls FROM {} WHERE catalog = %s AND seq > %s ORDER BY seq DESC LIMIT %s"
                ).format(table),
                (self.catalog, self._last_seq - REREAD_ROWS, co_usage.max_turns),
            )
            rows = list(reversed(await cursor.fetchall()))
        theirs = []
        for seq, key, calls in rows:
            self._last_seq = max(self._last_seq, int(seq))
            if key in self._written:
                continue
            self._written.add(key)
            if names := _calls(calls):
                theirs.append((str(key), names))
        co_usage.restore(theirs)

    async def _create(self, connection: AsyncConnection[Any], table: Any) -> None:
        """Create the table once; replicas starting together take turns (``IF NOT EXISTS`` alone races
        in PostgreSQL's catalog: "duplicate key value violates unique constraint pg_class_relname_nsp_index")."""
        from psycopg import sql

        async with connection.transaction():
            # A transaction-scoped lock keyed by the table's name: released at commit, never left behind.
            await connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self._schema}.{self._table}",))
            await connection.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (catalog text NOT NULL, fingerprint text NOT NULL, "
                    "calls text NOT NULL, seq bigserial, PRIMARY KEY (catalog, fingerprint))"
                ).format(table)
            )
            await connection.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (catalog, seq)").format(
                    sql.Identifier(f"{self._table}_seq"), table
                )
            )
        self._created = True

    def _report(self, exc: BaseException) -> None:
        self._next_sync = time.monotonic() + self.retry_seconds
        if self._outage.begin():
            retry = f"retrying every {self.retry_seconds:g}s" if self.retry_seconds else "retrying at the next sync"
            logger.warning(
                "sk-toolfilter: cannot share co-usage through table %s.%s (index store at %s): %s; learning goes on "
                "in memory, %s",
                self._schema,
                self._table,
                self.where,
                first_line(exc),
                retry,
            )

    async def aclose(self, co_usage: CoUsage) -> None:
        """Write what is left (a last sync) and wait for a background sync still running."""
        if self._task is not None and not self._task[1].done() and self._task[0] is asyncio.get_running_loop():
            await self._task[1]
        await self.sync(co_usage)


def _calls(value: Any) -> list[str]:
    """The tool names of a row (a JSON list of strings); anything else counts as no calls."""
    try:
        calls = json.loads(value if isinstance(value, str) else bytes(value).decode("utf-8"))
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
        return []
    return [str(c) for c in calls] if isinstance(calls, list) else []
