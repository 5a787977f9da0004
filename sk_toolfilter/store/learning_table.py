"""Learning from use kept in the shared PostgreSQL store, so a fleet of replicas learns together.

With ``index.store: postgres`` and ``learning.enabled``, every replica of a catalog writes the
requests it learned to one pgvector table (``<table_prefix>_learned``: catalog, embedding model,
request fingerprint, the request's vector, tool names, time — never text) and reads what the others
wrote. A request already in the table is one row (the newest tools win). The table keeps the newest
``max_requests`` rows per catalog and model.

Syncing and failures: :mod:`~sk_toolfilter.store.synced_table` (at start, then at most every
``learning.sync_seconds`` in the background, and on ``aclose``; one warning for a failing store).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from sk_toolfilter.retrieval.usage import UsageMemory
from sk_toolfilter.store.synced_table import SyncedTable

if TYPE_CHECKING:
    from psycopg import AsyncConnection

REREAD_ROWS = 1_000  # as the co-usage table: rows numbered earlier but committed later are still read
MAX_NAME_CHARS = 512


class LearningTable(SyncedTable[UsageMemory]):
    """One catalog's learning from use in the shared store (see the module docstring)."""

    what = "learning"

    def __init__(self, *args: Any, model: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model = model
        self._written: dict[str, float] = {}  # fingerprint -> the time of the row the table holds

    async def _sync(self, memory: UsageMemory) -> None:
        from psycopg import sql

        table = sql.Identifier(self._schema, self._table)
        async with self._pool.connection(timeout=self.timeout) as connection:
            await self._ensure_table(connection, table)
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

    def _create_statements(self, table: Any) -> list[Any]:
        from psycopg import sql

        return [
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (catalog text NOT NULL, model text NOT NULL, "
                "fingerprint text NOT NULL, embedding vector NOT NULL, tools text NOT NULL, "
                "at double precision NOT NULL, seq bigserial, PRIMARY KEY (catalog, model, fingerprint))"
            ).format(table),
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (catalog, model, seq)").format(
                sql.Identifier(f"{self._table}_seq"), table
            ),
        ]

    async def forget(self) -> int:
        """Delete this catalog's rows (``sk-toolfilter forget``); how many went."""
        from psycopg import sql

        table = sql.Identifier(self._schema, self._table)
        async with self._pool.connection(timeout=self.timeout) as connection:
            await self._ensure_table(connection, table)
            cursor = await connection.execute(
                sql.SQL("DELETE FROM {} WHERE catalog = %s AND model = %s").format(table), (self.catalog, self.model)
            )
            self._written.clear()
            return int(cursor.rowcount or 0)


def _tools(value: Any) -> list[str]:
    """The tool names of a row (a JSON list of strings of sane length); anything else: none."""
    try:
        tools = json.loads(value if isinstance(value, str) else bytes(value).decode("utf-8"))
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
        return []
    if not isinstance(tools, list):
        return []
    return [t for t in tools if isinstance(t, str) and len(t) <= MAX_NAME_CHARS]
