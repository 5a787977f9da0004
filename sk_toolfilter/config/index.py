"""``tool_filtering.index``: where the tool index lives (memory, or a shared PostgreSQL store)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    ConfigDict,
    Field,
    model_validator,
)

from sk_toolfilter.config.base import RememberedConnection, StrictConfig


class IndexConfig(StrictConfig):
    """Where the tool index lives: in this process (``memory``) or shared in a database.

    ``store: postgres`` keeps one record per tool (metadata, content hash, model id, vector) and a
    version row per catalog in PostgreSQL with pgvector, through Semantic Kernel's Postgres
    connector: replicas that start against a warm store read the vectors instead of embedding.
    Without ``connection_string`` the standard libpq variables (``PGHOST``, ``PGPORT``,
    ``PGDATABASE``, ``PGUSER``, ``PGPASSWORD``) or ``POSTGRES_CONNECTION_STRING`` apply.
    """

    store: Literal["memory", "postgres"] = Field(
        default="memory", description="memory: this process only; postgres: shared by every replica (pgvector)."
    )
    catalog: str = Field(
        default="default",
        min_length=1,
        max_length=200,
        description="Name of this catalog in the store (agents that share tools share a name).",
    )
    connection_string: RememberedConnection | None = Field(
        default=None, description="libpq connection string or postgresql:// URL; use ${VAR}, never a literal."
    )
    db_schema: str = Field(
        default="public",
        alias="schema",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$",
        description="PostgreSQL schema of the tables.",
    )
    table_prefix: str = Field(
        default="sk_toolfilter",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,39}$",
        description="Prefix of the table names (tools, versions, co-usage).",
    )
    publish: bool = Field(
        default=True,
        description="A replica whose tools are not all in the store embeds the new or changed ones and "
        "publishes its catalog as the new version (false: it embeds them for itself only).",
    )
    check_interval_seconds: float = Field(
        default=0.0, ge=0.0, le=3600.0, description="How often a selection checks the catalog version (0: each one)."
    )
    timeout_seconds: float = Field(default=5.0, gt=0.0, le=300.0, description="Bound on each database call.")
    retry_seconds: float = Field(
        default=10.0, ge=0.0, le=3600.0, description="After the store failed, how long to serve from memory first."
    )

    model_config = ConfigDict(populate_by_name=True)

    @model_validator(mode="after")
    def _database_keys_need_a_database(self) -> IndexConfig:
        if self.store == "memory":
            given = [k for k in ("connection_string",) if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{given[0]} applies to a database store (store: postgres), not store: memory")
        return self
