"""What a database store gives the shared index (``index.store``): the seam a second backend plugs into.

A backend is one module with a class that satisfies :class:`IndexStore` (what
:class:`~sk_toolfilter.store.postgres.PostgresIndexStore` does over SK's ``PostgresCollection``) and one
line in :func:`connect_store`; :class:`~sk_toolfilter.store.shared_index.SharedIndex`, learning from
use and the provider-search answers read the store through this protocol only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from sk_toolfilter.basics.errors import ConfigError

if TYPE_CHECKING:
    from sk_toolfilter.config import IndexConfig
    from sk_toolfilter.store.conversation_state import ConversationState
    from sk_toolfilter.store.learning_table import LearningTable
    from sk_toolfilter.store.outage import StoreOutage
    from sk_toolfilter.store.shared_catalog import SharedCatalog


class IndexStore(Protocol):
    """A connection to one database: the versioned catalogs, the learning tables and the conversation
    state live in its collections. `where` names the server for messages (never with a password);
    `outage` warns once per outage, whichever part meets it first."""

    where: str
    outage: StoreOutage

    def catalog(self, name: str, model_id: str) -> SharedCatalog:
        """The versioned catalog `name` of the embedding model `model_id`."""
        ...

    def learning_table(self, catalog: str, model: str, every_seconds: float) -> LearningTable:
        """Where the replicas of `catalog` share what learning from use learned (synced every `every_seconds`)."""
        ...

    def conversation_state(self, catalog: str) -> ConversationState:
        """What conversations of `catalog` leave on a replica (search answers, stored chains), shared."""
        ...

    async def close(self) -> None:
        """Close the connections."""
        ...


async def connect_store(config: IndexConfig) -> IndexStore:
    """Connect to the store ``config.store`` names (IndexStoreError naming the server if it fails)."""
    if config.store == "postgres":
        from sk_toolfilter.store.postgres import PostgresIndexStore

        return await PostgresIndexStore.connect(config)
    raise ConfigError(f"tool_filtering.index.store: {config.store!r} is not a database store")
