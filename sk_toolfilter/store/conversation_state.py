"""What a conversation leaves on the replica that served it, shared through the store so the next request
of that conversation may reach any replica (``index.store: postgres``): the filter's answers to the
model's tool searches (by conversation and ``call_id``), answers owed to a stored response (by its id),
and the messages of a stored chain (by the response or server conversation its next call continues).

One table, ``<table_prefix>_conversation_state`` (catalog, kind, key, a JSON value, time): values hold
tool names, the model's search queries and, for chains, the conversation's messages — the same text a
stored response already keeps at the provider. Rows older than :data:`MAX_AGE_SECONDS` are deleted as
new ones arrive. A failing store is one warning (shared with the catalog's version checks): each replica
then keeps what it served in its own memory, as without a store.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sk_toolfilter.basics.errors import first_line
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.store.store_table import StoreTable

logger = library_logger(__name__)

MAX_AGE_SECONDS = 7 * 86_400
"""A conversation's state is kept a week (a stored response is kept 30 days by OpenAI; a conversation
idle for a week starts its searches afresh)."""
PRUNE_EVERY = 256
"""Writes between two deletions of rows past :data:`MAX_AGE_SECONDS`."""
MAX_VALUE_CHARS = 4 * 2**20
"""A value larger than this (a very long chain) is kept in this replica only."""


class ConversationState(StoreTable):
    """One catalog's conversation state in the shared store (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._writes = 0

    async def get(self, kind: str, key: str) -> Any | None:
        """The value kept for (`kind`, `key`), or None (none, or the store does not answer)."""
        from psycopg import sql

        try:
            table = sql.Identifier(self._schema, self._table)
            async with self._pool.connection(timeout=self.timeout) as connection:
                await self._ensure_table(connection, table)
                cursor = await connection.execute(
                    sql.SQL("SELECT value FROM {} WHERE catalog = %s AND kind = %s AND key = %s").format(table),
                    (self.catalog, kind, key),
                )
                row = await cursor.fetchone()
        except Exception as exc:  # the driver's and the pool's errors: served from this replica's memory
            self._report(exc)
            return None
        self._answered()
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except (ValueError, RecursionError):
            return None

    async def put(self, kind: str, key: str, value: Any) -> None:
        """Keep `value` (JSON) for (`kind`, `key`), replacing what was there."""
        from psycopg import sql

        text = json.dumps(value, separators=(",", ":"))
        if len(text) > MAX_VALUE_CHARS:
            return
        table = sql.Identifier(self._schema, self._table)
        try:
            async with self._pool.connection(timeout=self.timeout) as connection:
                await self._ensure_table(connection, table)
                await connection.execute(
                    sql.SQL(
                        "INSERT INTO {} (catalog, kind, key, value, at) VALUES (%s, %s, %s, %s, %s) "
                        "ON CONFLICT (catalog, kind, key) DO UPDATE SET value = EXCLUDED.value, at = EXCLUDED.at"
                    ).format(table),
                    (self.catalog, kind, key, text, time.time()),
                )
                self._writes += 1
                if self._writes % PRUNE_EVERY == 0:
                    await connection.execute(
                        sql.SQL("DELETE FROM {} WHERE catalog = %s AND at < %s").format(table),
                        (self.catalog, time.time() - MAX_AGE_SECONDS),
                    )
        except Exception as exc:
            self._report(exc)
            return
        self._answered()

    def _create_statements(self, table: Any) -> list[Any]:
        from psycopg import sql

        return [
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (catalog text NOT NULL, kind text NOT NULL, key text NOT NULL, "
                "value text NOT NULL, at double precision NOT NULL, PRIMARY KEY (catalog, kind, key))"
            ).format(table)
        ]

    def _report(self, exc: BaseException) -> None:
        if self._outage.begin():
            logger.warning(
                "sk-toolfilter: cannot share conversation state (tool-search answers, stored chains) through "
                "table %s.%s (index store at %s): %s; each replica keeps what it served",
                self._schema,
                self._table,
                self.where,
                first_line(exc),
            )

    def _answered(self) -> None:
        if self._outage.end():
            logger.info(
                "sk-toolfilter: the index store %s answers again; conversation state is shared again", self.where
            )
