"""Learning from use kept in the shared PostgreSQL store, so a fleet of replicas learns together.

With ``index.store: postgres`` and ``learning.enabled``, every replica of a catalog writes the
requests it learned to one pgvector table (``<table_prefix>_learned``: catalog, embedding model,
request fingerprint, the request's vector, tool names, conversation and scope fingerprints, time —
never text) and reads what the others wrote. A request already in the table is one row (the newest
tools win). The table keeps the newest ``max_requests`` rows per catalog and model.

**Forget** is a time (``<table_prefix>_learned_wipes``: one row per catalog and model, its generation
and the time of its last wipe): a wipe raises the generation, records when and deletes the rows in
one transaction; every sync reads it first, under a shared lock held while it writes, and drops every
row learned before that time — from this replica's memory, from its machine's file, from a replica
that slept through the wipe — so none is written back, while rows learned after it stay everywhere;
a wipe waits for a write under way (then deletes it too).

Syncing and failures: :mod:`~sk_toolfilter.store.synced_table` (at start, then at most every
``learning.sync_seconds`` in the background, and on ``aclose``; one warning for a failing store).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.retrieval.memory import LearningMemory, MemoryRow
from sk_toolfilter.store.synced_table import SyncedTable

logger = library_logger(__name__)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

REREAD_ROWS = 1_000  # as the co-usage table: rows numbered earlier but committed later are still read
MAX_NAME_CHARS = 512


class LearningTable(SyncedTable[LearningMemory]):
    """One catalog's learning from use in the shared store (see the module docstring)."""

    what = "learning"

    def __init__(self, *args: Any, model: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model = model
        self._written: dict[str, float] = {}  # fingerprint -> the time of the row the table holds
        self.generation: int | None = None
        """The wipe generation this replica last read (None: not read yet)."""
        self._warned_future = False

    async def _sync(self, memory: LearningMemory) -> None:
        from psycopg import sql

        table = sql.Identifier(self._schema, self._table)
        async with self._pool.connection(timeout=self.timeout) as connection:
            if self.read_only and not await self._exists(connection):
                return  # nothing shared yet, and a reader creates nothing
            if not self.read_only:
                await self._ensure_table(connection, table)
            async with connection.transaction():
                # a wipe waits for this write
                generation, wiped_at = await self._generation(connection, share=not self.read_only)
                if self.generation is not None and generation > self.generation:
                    self._written.clear()
                    self._last_seq = 0
                    logger.info("sk-toolfilter: learning of catalog %r was wiped (forget): dropped here", self.catalog)
                # Forget is a time: rows learned before the last wipe never come back (from this replica's
                # memory, its machine's file or a replica that slept through it); rows learned after stay.
                memory.forget_before(wiped_at)
                self.generation = generation
                new = [row for row in memory.rows() if self._written.get(row.key, -1.0) < row.at]
                if new and not self.read_only:
                    await self._write(connection, table, new, memory.max_requests)
            cursor = await connection.execute(
                sql.SQL(
                    "SELECT seq, fingerprint, embedding, tools, at, conversation, scope FROM {} WHERE catalog = %s "
                    "AND model = %s AND seq > %s ORDER BY seq DESC LIMIT %s"
                ).format(table),
                (self.catalog, self.model, self._last_seq - REREAD_ROWS, memory.max_requests),
            )
            rows = list(reversed(await cursor.fetchall()))
        theirs = []
        for seq, key, vector, tools, at, conversation, scope in rows:
            self._last_seq = max(self._last_seq, int(seq))
            if self._written.get(str(key), -1.0) >= float(at):
                continue
            self._written[str(key)] = float(at)
            if names := _tools(tools):
                values = vector.to_numpy() if hasattr(vector, "to_numpy") else vector  # pgvector's Vector, binary
                vector_array = np.asarray(values, dtype=np.float32)
                theirs.append(
                    MemoryRow(str(key), vector_array, tuple(names), float(at), str(conversation or key), str(scope))
                )
        clamped = memory.clamped
        memory.restore(theirs)
        if memory.clamped > clamped and not self._warned_future:
            self._warned_future = True
            logger.warning(
                "sk-toolfilter: %d learned rows of table %s.%s are dated in the future (a replica's clock runs "
                "ahead?): dated now",
                memory.clamped - clamped,
                self._schema,
                self._table,
            )

    async def _exists(self, connection: AsyncConnection[Any]) -> bool:
        """Whether the table and its wipes table exist (a read-only reader creates neither)."""
        cursor = await connection.execute(
            "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
            (f'"{self._schema}"."{self._table}"', f'"{self._schema}"."{self._table}_wipes"'),
        )
        row = await cursor.fetchone()
        return bool(row and row[0])

    async def _generation(self, connection: AsyncConnection[Any], *, share: bool) -> tuple[int, float]:
        """This catalog's wipe generation and the time of its last wipe (its row is made at 0 when missing,
        except by a read-only reader); `share`: held until commit (else, unless read-only: for update)."""
        from psycopg import sql

        wipes = sql.Identifier(self._schema, f"{self._table}_wipes")
        if not self.read_only:
            await connection.execute(
                sql.SQL("INSERT INTO {} (catalog, model, generation) VALUES (%s, %s, 0) ON CONFLICT DO NOTHING").format(
                    wipes
                ),
                (self.catalog, self.model),
            )
        lock = sql.SQL("" if self.read_only else " FOR SHARE" if share else " FOR UPDATE")
        cursor = await connection.execute(
            sql.SQL("SELECT generation, wiped_at FROM {} WHERE catalog = %s AND model = %s").format(wipes) + lock,
            (self.catalog, self.model),
        )
        row = await cursor.fetchone()
        return (int(row[0]), float(row[1])) if row else (0, 0.0)

    async def _write(self, connection: AsyncConnection[Any], table: Any, rows: list[MemoryRow], keep: int) -> None:
        from psycopg import sql

        async with connection.cursor() as cursor:
            await cursor.executemany(
                sql.SQL(
                    "INSERT INTO {t} (catalog, model, fingerprint, embedding, tools, at, conversation, scope) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (catalog, model, fingerprint) DO UPDATE SET embedding = EXCLUDED.embedding, "
                    "tools = EXCLUDED.tools, at = EXCLUDED.at, conversation = EXCLUDED.conversation, "
                    "scope = EXCLUDED.scope, seq = DEFAULT WHERE {t}.at < EXCLUDED.at"
                ).format(t=table),
                [
                    (
                        self.catalog,
                        self.model,
                        r.key,
                        r.vector,
                        json.dumps(list(r.tools)),
                        r.at,
                        r.conversation,
                        r.scope,
                    )
                    for r in rows
                ],
            )
        self._written.update((row.key, row.at) for row in rows)
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
            # 0.x tables gain the conversation and scope of each row (a row of before: its own conversation)
            sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS conversation text NOT NULL DEFAULT ''").format(table),
            sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS scope text NOT NULL DEFAULT ''").format(table),
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (catalog text NOT NULL, model text NOT NULL, "
                "generation bigint NOT NULL, PRIMARY KEY (catalog, model))"
            ).format(sql.Identifier(self._schema, f"{self._table}_wipes")),
            # the time of the last wipe: rows learned before it never come back, rows learned after stay
            sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS wiped_at double precision NOT NULL DEFAULT 0").format(
                sql.Identifier(self._schema, f"{self._table}_wipes")
            ),
        ]

    async def forget(self) -> int:
        """Raise this catalog's wipe generation and delete its rows, in one transaction (``sk-toolfilter
        forget``): a replica's write under way finishes first and is deleted too; every replica drops
        what it learned before at its next sync. Returns how many rows went."""
        from psycopg import sql

        table = sql.Identifier(self._schema, self._table)
        wipes = sql.Identifier(self._schema, f"{self._table}_wipes")
        async with self._pool.connection(timeout=self.timeout) as connection:
            await self._ensure_table(connection, table)
            async with connection.transaction():
                await self._generation(connection, share=False)
                cursor = await connection.execute(
                    sql.SQL(
                        "UPDATE {} SET generation = generation + 1, wiped_at = GREATEST(wiped_at, %s) "
                        "WHERE catalog = %s AND model = %s RETURNING generation"
                    ).format(wipes),
                    (time.time(), self.catalog, self.model),
                )
                row = await cursor.fetchone()
                cursor = await connection.execute(
                    sql.SQL("DELETE FROM {} WHERE catalog = %s AND model = %s").format(table),
                    (self.catalog, self.model),
                )
                gone = int(cursor.rowcount or 0)
            self.generation = int(row[0]) if row else None
            self._written.clear()
            return gone


def _tools(value: Any) -> list[str]:
    """The tool names of a row (a JSON list of strings of sane length); anything else: none."""
    try:
        tools = json.loads(value if isinstance(value, str) else bytes(value).decode("utf-8"))
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
        return []
    if not isinstance(tools, list):
        return []
    return [t for t in tools if isinstance(t, str) and len(t) <= MAX_NAME_CHARS]
