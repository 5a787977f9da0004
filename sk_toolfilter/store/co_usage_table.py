"""Co-usage kept in the shared PostgreSQL store, so a fleet of replicas learns together.

With ``index.store: postgres`` every replica of a catalog writes the turns it learned to one table
(``<table_prefix>_co_usage``: catalog, turn fingerprint, tool names — never conversation text) and
reads the turns the others wrote. A turn already in the table (the same conversation seen by two
replicas) is stored once. The table keeps the newest ``max_turns`` turns per catalog.

Syncing and failures: :mod:`~sk_toolfilter.store.synced_table` (at start, in the background, on
``aclose``; one warning for a failing store, nothing learned lost).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from sk_toolfilter.store.synced_table import SyncedTable

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


class CoUsageTable(SyncedTable["CoUsage"]):
    """One catalog's co-usage in the shared store (see the module docstring)."""

    what = "co-usage"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._written: set[str] = set()  # fingerprints known to be in the table

    async def load_into(self, co_usage: CoUsage) -> int:
        """Read the fleet's turns into `co_usage` (creating the table if needed); how many were read.
        A failing store: one warning and 0 (the agent starts with nothing learned)."""
        before = len(co_usage)
        await self.sync(co_usage)
        return len(co_usage) - before

    async def _sync(self, co_usage: CoUsage) -> None:
        from psycopg import sql

        table = sql.Identifier(self._schema, self._table)
        async with self._pool.connection(timeout=self.timeout) as connection:
            await self._ensure_table(connection, table)
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

    def _create_statements(self, table: Any) -> list[Any]:
        from psycopg import sql

        return [
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (catalog text NOT NULL, fingerprint text NOT NULL, "
                "calls text NOT NULL, seq bigserial, PRIMARY KEY (catalog, fingerprint))"
            ).format(table),
            sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (catalog, seq)").format(
                sql.Identifier(f"{self._table}_seq"), table
            ),
        ]


def _calls(value: Any) -> list[str]:
    """The tool names of a row (a JSON list of strings); anything else counts as no calls."""
    try:
        calls = json.loads(value if isinstance(value, str) else bytes(value).decode("utf-8"))
    except (ValueError, TypeError, UnicodeDecodeError, RecursionError):
        return []
    return [str(c) for c in calls] if isinstance(calls, list) else []
