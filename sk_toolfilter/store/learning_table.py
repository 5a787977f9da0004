"""Learning from use kept in the shared PostgreSQL store, so a fleet of replicas learns together.

With ``index.store: postgres`` and ``learning.enabled``, every replica of a catalog writes the
requests it learned to one pgvector table (``<table_prefix>_learned``: catalog, embedding model,
request fingerprint, the request's vector, tool names, time — never text) and reads what the others
wrote. A request already in the table is one row (the newest tools win). The table keeps the newest
``max_requests`` rows per catalog and model.

Syncing follows the co-usage table (:mod:`~sk_toolfilter.store.co_usage_table`): at start, then at
most every ``learning.sync_seconds`` in the background (a selection never waits on the database),
and on ``aclose``; a failing store gives one warning and learning goes on in memory.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from sk_toolfilter.basics.errors import first_line
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.retrieval.usage import UsageMemory
from sk_toolfilter.store.outage import StoreOutage

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

logger = library_logger(__name__)

REREAD_ROWS = 1_000  # as the co-usage table: rows numbered earlier but committed later are still read
MAX_NAME_CHARS = 512


class LearningTable:
    """One catalog's learning from use in the shared store (see the module docstring)."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        schema: str,
        table: str,
        catalog: str,
        model: str,
        *,
        timeout: float,
        every_seconds: float = 30.0,
        retry_seconds: float = 30.0,
        where: str = "an unnamed server",
        outage: StoreOutage | None = None,
    ) -> None:
        self._pool, self._schema, self._table = pool, schema, table
        self.catalog, self.model = catalog, model
        self.timeout, self.every_seconds, self.retry_seconds, self.where = timeout, every_seconds, retry_seconds, where
        self._written: dict[str, float] = {}  # fingerprint -> the time of the row the table holds
        self._last_seq = 0
        self._next_sync = 0.0
        self._outage = outage or StoreOutage()
        self._created = False
        self._task: tuple[asyncio.AbstractEventLoop, asyncio.Task[None]] | None = None
        self._lock: asyncio.Lock | None = None

    def tick(self, memory: UsageMemory) -> None:
        """Called on each selection: start a background sync when one is due (never waits on it)."""
        if time.monotonic() < self._next_sync:
            return
        loop = asyncio.get_running_loop()
        if self._task is not None and self._task[0] is loop and not self._task[1].done():
            return
        self._next_sync = time.monotonic() + self.every_seconds
        self._task = (loop, loop.create_task(self.sync(memory)))

    async def sync(self, memory: UsageMemory) -> None:
        """Write the rows the table lacks (or holds older), then read the ones other replicas wrote."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            try:
                await asyncio.wait_for(self._sync(memory), self.timeout * 3)
            except Exception as exc:  # the driver's and the pool's errors, a timeout: served from memory
                self._report(exc)
                return
        if self._outage.end():
            logger.info("sk-toolfilter: the index store %s answers again; learning is shared again", self.where)
        self._next_sync = time.monotonic() + self.every_seconds

    async def _sync(self, memory: UsageMemory) -> None:
        from psycopg import sql

        table = sql.Identifier(self._schema, self._table)
        async with self._pool.connection(timeout=self.timeout) as connection:
            if not self._created:
                await self._create(connection, table)
            new = [row for row in memory.rows() if self._written.get(row[0], -1.0) < row[3]]
            if new:
                await self._write(connection, table, new, memory.max_requests)
            cursor = await connection.execute(
                sql.SQL(
                    "SELECT seq, fingerprint, embedding, tools, at FROM {} WHERE catalog = %s AND model = %s "
                    "AND seq > %s ORDER BY seq DESC LIMIT %s"
                ).format(table),
                (self.catalog, self.model, self._last_seq - REREAD_ROWS, memory.max_requests),
            )
            rows = list(reversed(await cursor.fetchall()))
        theirs = []
        for seq, key, vector, tools, at in rows:
            self._last_seq = max(self._last_seq, int(seq))
            if self._written.get(str(key), -1.0) >= float(at):
                continue
            self._written[str(key)] = float(at)
            if names := _tools(tools):
                values = vector.to_numpy() if hasattr(vector, "to_numpy") else vector  # pgvector's Vector, binary
                theirs.append((str(key), np.asarray(values, dtype=np.float32), names, float(at)))
        memory.restore(theirs)

    async def _write(self, connection: AsyncConnection[Any], table: Any, rows: list[Any], keep: int) -> None:
        from psycopg import sql

        async with connection.cursor() as cursor:
            await cursor.executemany(
                sql.SQL(
                    "INSERT INTO {t} (catalog, model, fingerprint, embedding, tools, at) "
                    "VALUES (%s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (catalog, model, fingerprint) DO UPDATE SET embedding = EXCLUDED.embedding, "
                    "tools = EXCLUDED.tools, at = EXCLUDED.at, seq = DEFAULT WHERE {t}.at < EXCLUDED.at"
                ).format(t=table),
                [
                    (self.catalog, self.model, key, vector, json.dumps(list(tools)), at)
                    for key, vector, tools, at in rows
                ],
            )
        self._written.update((key, at) for key, _, _, at in rows)
        await connection.execute(
            sql.SQL(
                "DELETE FROM {t} WHERE catalog = %s AND model = %s AND seq <= (SELECT seq FROM {t} WHERE catalog = %s "
                "AND model = %s ORDER BY seq DESC OFFSET %s LIMIT 1)"
            ).format(t=table),
            (self.catalog, self.model, self.catalog, self.model, keep),
        )

    async def _create(self, connection: AsyncConnection[Any], table: Any) -> None:
        """Create the table once, under a transaction-scoped advisory lock (replicas starting together)."""
        from psycopg import sql

        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self._schema}.{self._table}",))
            await connection.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (catalog text NOT NULL, model text NOT NULL, "
                    "fingerprint text NOT NULL, embedding vector NOT NULL, tools text NOT NULL, "
                    "at double precision NOT NULL, seq bigserial, PRIMARY KEY (catalog, model, fingerprint))"
                ).format(table)
            )
            await connection.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (catalog, model, seq)").format(
                    sql.Identifier(f"{self._table}_seq"), table
                )
            )
        self._created = True

    async def forget(self) -> int:
        """Delete this catalog's rows (``sk-toolfilter forget``); how many went."""
        from psycopg import sql

        table = sql.Identifier(self._schema, self._table)
        async with self._pool.connection(timeout=self.timeout) as connection:
            if not self._created:
                await self._create(connection, table)
            cursor = await connection.execute(
                sql.SQL("DELETE FROM {} WHERE catalog = %s AND model = %s").format(table), (self.catalog, self.model)
            )
            self._written.clear()
            return int(cursor.rowcount or 0)

    def _report(self, exc: BaseException) -> None:
        self._next_sync = time.monotonic() + self.retry_seconds
        if self._outage.begin():
            logger.warning(
                "sk-toolfilter: cannot share learning through table %s.%s (index store at %s): %s; learning goes on "
                "in memory",
                self._schema,
                self._table,
                self.where,
                first_line(exc),
            )

    async def aclose(self, memory: UsageMemory) -> None:
        """Write what is left (a last sync) and wait for a background sync still running."""
        if self._task is not None and not self._task[1].done() and self._task[0] is asyncio.get_running_loop():
            await self._task[1]
        await self.sync(memory)


def _tools(value: Any) -> list[str]:
    """The tool names of a row (a JSON list of strings of sane length); anything else: none."""
    try:
        tools = json.loads(value if isinstance(value, str) else bytes(value).decode("utf-8"))
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
        return []
    if not isinstance(tools, list):
        return []
    return [t for t in tools if isinstance(t, str) and len(t) <= MAX_NAME_CHARS]
