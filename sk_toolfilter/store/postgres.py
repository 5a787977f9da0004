"""PostgreSQL with pgvector as the shared index store, through Semantic Kernel's Postgres connector.

Connection settings come from ``index.connection_string`` or, without it, from the variables SK's
:class:`~semantic_kernel.connectors.postgres.PostgresSettings` reads (``PGHOST``, ``PGPORT``,
``PGDATABASE``, ``PGUSER``, ``PGPASSWORD``, ``POSTGRES_CONNECTION_STRING``). Vectors travel in
pgvector's binary format (the text format made reading 50,000 vectors take ~7 s instead of ~1 s).
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from sk_toolfilter.basics.errors import ConfigError, IndexStoreError, first_line, install_line
from sk_toolfilter.basics.redaction import library_logger, remember_secret
from sk_toolfilter.config import IndexConfig
from sk_toolfilter.store.conversation_state import ConversationState
from sk_toolfilter.store.learning_table import LearningTable
from sk_toolfilter.store.outage import StoreOutage
from sk_toolfilter.store.shared_catalog import Collection, SharedCatalog

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool
    from semantic_kernel.data.vector import VectorStoreCollectionDefinition, VectorStoreField

logger = library_logger(__name__)

POOL_NAME = "sk-toolfilter-index"


class _QuietOwnPool(logging.Filter):
    """psycopg_pool logs a warning per failed reconnection; SharedIndex reports an outage once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.WARNING or POOL_NAME not in record.getMessage()


_POOL_FILTER = _QuietOwnPool()


class PostgresIndexStore:
    """A connection pool to one database and the collections the shared catalogs live in."""

    def __init__(self, pool: AsyncConnectionPool, config: IndexConfig, where: str) -> None:
        self._pool, self._config, self.where = pool, config, where
        self._collections: dict[str, Collection] = {}
        self.outage = StoreOutage()

    @classmethod
    async def connect(cls, config: IndexConfig) -> PostgresIndexStore:
        """Open a small pool (pgvector enabled, binary vectors); IndexStoreError naming the server."""
        try:
            from psycopg import AsyncConnection
            from psycopg_pool import AsyncConnectionPool
        except ImportError as exc:
            raise ConfigError(
                f"store: postgres needs the [postgres] extra: {install_line('postgres')} ({exc})"
            ) from None
        args = _connection_args(config)
        if "password" in args:
            remember_secret(str(args["password"]))
        where = _describe(args)
        await _ensure_pgvector(AsyncConnection, args, where, config.timeout_seconds)
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
            kwargs=args,
            min_size=1,
            max_size=4,
            timeout=config.timeout_seconds,
            configure=_configure_connection,
            check=AsyncConnectionPool.check_connection,
            open=False,
            name=POOL_NAME,
        )
        logging.getLogger("psycopg.pool").addFilter(_POOL_FILTER)  # the same object: added once
        try:
            await pool.open(wait=True, timeout=config.timeout_seconds)
        except Exception as exc:
            await pool.close()
            raise IndexStoreError(f"index store: cannot connect to PostgreSQL at {where}: {first_line(exc)}") from None
        return cls(pool, config, where)

    def catalog(self, name: str, model_id: str) -> SharedCatalog:
        """The shared catalog `name` of tools embedded by `model_id`."""
        return SharedCatalog(
            self._collection,
            name,
            model_id,
            table_prefix=self._config.table_prefix,
            timeout=self._config.timeout_seconds,
        )

    def learning_table(self, catalog: str, model: str, every_seconds: float) -> LearningTable:
        """What learning from use learned for catalog `catalog` and model `model`, shared by every replica
        (``<table_prefix>_learned``)."""
        return LearningTable(
            self._pool,
            self._config.db_schema,
            f"{self._config.table_prefix}_learned",
            catalog,
            model=model,
            timeout=self._config.timeout_seconds,
            every_seconds=every_seconds,
            retry_seconds=self._config.retry_seconds,
            where=self.where,
            outage=self.outage,
        )

    def conversation_state(self, catalog: str) -> ConversationState:
        """What conversations of catalog `catalog` leave on a replica (tool-search answers, stored chains),
        shared by every replica (``<table_prefix>_conversation_state``)."""
        return ConversationState(
            self._pool,
            self._config.db_schema,
            f"{self._config.table_prefix}_conversation_state",
            catalog,
            timeout=self._config.timeout_seconds,
            where=self.where,
            outage=self.outage,
        )

    async def _collection(self, table: str, definition: VectorStoreCollectionDefinition) -> Collection:
        if table not in self._collections:
            collection = _postgres_collection(table, definition, self._pool, self._config.db_schema)
            if not await collection.collection_exists():
                try:
                    await collection.ensure_collection_exists()
                except Exception:
                    if not await collection.collection_exists():  # not another replica creating it too
                        raise
            self._collections[table] = collection
        return self._collections[table]

    async def close(self) -> None:
        await self._pool.close()


def _postgres_collection(
    table: str, definition: VectorStoreCollectionDefinition, pool: AsyncConnectionPool, schema: str
) -> Collection:
    from semantic_kernel.connectors.postgres import PostgresCollection
    from semantic_kernel.data.vector import IndexKind

    class ExactSearchCollection(PostgresCollection):
        """SK's Postgres collection; ``IndexKind.FLAT`` creates no vector index (pgvector then searches
        exactly), where SK 1.x only knows HNSW and IVF_FLAT."""

        async def _create_index(self, table_name: str, vector_field: VectorStoreField) -> None:
            if vector_field.index_kind != IndexKind.FLAT:
                await super()._create_index(table_name, vector_field)

    return ExactSearchCollection(
        record_type=dict, definition=definition, collection_name=table, connection_pool=pool, db_schema=schema
    )


def _connection_args(config: IndexConfig) -> dict[str, Any]:
    """The driver's connection arguments from ``connection_string`` (else SK's PostgreSQL settings).
    Parsed inside this boundary: a driver's parse error may quote the password, so its text is never
    passed on, only what kind of string was expected."""
    from psycopg.conninfo import conninfo_to_dict
    from semantic_kernel.connectors.postgres import PostgresSettings

    try:
        settings = (
            PostgresSettings(connection_string=config.connection_string)
            if config.connection_string is not None
            else PostgresSettings()
        )
        args: dict[str, Any] = {
            "connect_timeout": max(1, round(config.timeout_seconds)),
            **settings.get_connection_args(),
        }
        if config.connection_string is not None:
            # SK's settings put their default port (5432) over the one the connection string names.
            args.update(conninfo_to_dict(config.connection_string.get_secret_value()))
    except Exception as exc:
        raise ConfigError(
            "tool_filtering.index.connection_string: not a PostgreSQL connection string the driver can read "
            f"({type(exc).__name__}); use postgresql://user:password@host:port/dbname (a '%' in the password "
            "written as %25) or 'host=... port=... dbname=... user=... password=...'"
        ) from None
    return args


async def _configure_connection(connection: Any) -> None:
    """Each pooled connection: pgvector's types, results in binary, autocommit."""
    from pgvector.psycopg import register_vector_async

    await register_vector_async(connection)
    connection.cursor_factory = _binary_results()
    await connection.set_autocommit(True)


@functools.cache
def _binary_results() -> type:
    """The cursor class whose results come in binary: vectors arrive as float32 bytes, not text to parse
    (made once: psycopg is imported only when a store is used)."""
    from psycopg import AsyncCursor
    from psycopg.pq import Format

    class BinaryResults(AsyncCursor[Any]):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.format = Format.BINARY

    return BinaryResults


async def _ensure_pgvector(connection_class: Any, args: dict[str, Any], where: str, timeout: float) -> None:
    """Create the ``vector`` extension if it is missing (needs the right to); a clear error if not."""
    try:
        connection = await connection_class.connect(**args, autocommit=True)
    except Exception as exc:
        raise IndexStoreError(f"index store: cannot connect to PostgreSQL at {where}: {first_line(exc)}") from None
    async with connection:
        try:
            cursor = await connection.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
            if await cursor.fetchone() is None:
                await connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception as exc:
            raise IndexStoreError(
                f"index store: PostgreSQL at {where} has no pgvector extension and it could not be created "
                f"({first_line(exc)}); install pgvector and run CREATE EXTENSION vector as its owner"
            ) from None


def _describe(args: dict[str, Any]) -> str:
    """host:port/dbname as user — never the password."""
    host = args.get("host") or args.get("hostaddr") or "the default socket"
    place = f"{host}:{args.get('port', 5432)}/{args.get('dbname', '')}".rstrip("/")
    return f"{place} as {args['user']}" if args.get("user") else place
