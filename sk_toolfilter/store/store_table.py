"""One catalog's rows of one table in the shared store: where it is, how it is created once by replicas
starting together, and the outage it reports into (shared with the catalog's version checks).

Subclasses: :class:`~sk_toolfilter.store.synced_table.SyncedTable` (state kept in step with a process's
memory) and :class:`~sk_toolfilter.store.conversation_state.ConversationState` (what conversations leave).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sk_toolfilter.store.outage import StoreOutage

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool


class StoreTable:
    """A table of the shared store, for one catalog (see the module docstring)."""

    def __init__(
        self,
        pool: AsyncConnectionPool,
        schema: str,
        table: str,
        catalog: str,
        *,
        timeout: float,
        where: str = "an unnamed server",
        outage: StoreOutage | None = None,
    ) -> None:
        self._pool, self._schema, self._table, self.catalog = pool, schema, table, catalog
        self.timeout, self.where = timeout, where
        self._outage = outage or StoreOutage()  # shared with the catalog's version checks: one warning
        self._created = False

    @property
    def qualified_name(self) -> str:
        """``schema.table`` at the store (for messages)."""
        return f"{self._schema}.{self._table}"

    async def _ensure_table(self, connection: AsyncConnection[Any], table: Any) -> None:
        """Create the table once (see :meth:`_create_statements`), under a transaction-scoped advisory lock:
        replicas starting together take turns (``IF NOT EXISTS`` alone races in PostgreSQL's catalog)."""
        if self._created:
            return
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self._schema}.{self._table}",))
            for statement in self._create_statements(table):
                await connection.execute(statement)
        self._created = True

    def _create_statements(self, table: Any) -> list[Any]:
        """The statements that create the table (idempotent: ``IF NOT EXISTS``)."""
        raise NotImplementedError
