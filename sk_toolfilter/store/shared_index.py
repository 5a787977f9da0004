"""SharedIndex: the manager's side of a shared catalog — build indexes from it, follow its versions,
and keep serving from memory while the store is away.

Rules (see the README, "One index for a fleet"):

* **Reading.** A tool of the kernel whose name is in the current version takes the stored record
  (metadata and vector): a replica against a warm store makes no embedding call, and a catalog
  pushed with better descriptions changes every replica's ranking. Tools the version lacks are
  embedded in this process.
* **Publishing** (``publish: true``, at start and when the kernel's tools change): when the
  kernel's tools differ from the version's (a new, changed or removed tool), only the new or
  changed ones are embedded, their records written, and the kernel's catalog becomes the new
  version in one switch.
* **Following.** Before a selection (at most every ``check_interval_seconds``) one small row says
  whether a new version is current; if so, the next index is built from it.
* **Outages.** A failing store gives one warning; selections keep the index in memory and the
  store is tried again every ``retry_seconds``; one info line when it answers again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from sk_toolfilter.basics.errors import EmbeddingServiceError, IndexStoreError
from sk_toolfilter.basics.progress import ProgressCallback
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.config import BM25Config, IndexConfig
from sk_toolfilter.retrieval.bm25 import BM25Index
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.embeddings import embedding_model_id, runs_here
from sk_toolfilter.retrieval.encoders import embed_texts
from sk_toolfilter.retrieval.faults import EmbeddingCircuit
from sk_toolfilter.retrieval.index import ToolIndex, embed_catalog, embedding_texts, known_vectors
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.numerics import AGREEMENT, worst_agreement
from sk_toolfilter.retrieval.scoring import Precision
from sk_toolfilter.store.index_store import IndexStore, connect_store
from sk_toolfilter.store.outage import StoreOutage
from sk_toolfilter.store.records import StoredCatalog, content_hash, pack_image, record_key, to_record
from sk_toolfilter.store.shared_catalog import CatalogVersion, SharedCatalog

if TYPE_CHECKING:
    from sk_toolfilter.retrieval.encoders import EmbeddingService
    from sk_toolfilter.store.conversation_state import ConversationState
    from sk_toolfilter.store.learning_table import LearningTable

logger = library_logger(__name__)

PROBE_TOOLS = 4
"""Stored tools embedded here once per version to check that this CPU computes the store's vectors."""


@dataclass
class StoreStats:
    """What this process did with the shared store (for ``sk-toolfilter index status`` and tests)."""

    version: str = ""
    """The catalog version the current index was built from ('' before the first)."""
    loaded: int = 0
    """Tools of the current index whose record came from the store."""
    embedded: int = 0
    """Tool texts this process sent to the embedding service, in total (0 on a warm store)."""
    published: int = 0
    """Versions this process published."""
    reloads: int = 0
    """New versions picked up after the start."""
    changed: int = 0
    """Tools of this agent that are new or differ from the store's current version in anything
    ranking reads (description, parameters, tools_overrides keywords…), at the last build."""
    removed: int = 0
    """Tools of the store's current version this agent no longer has, at the last build."""


class SharedIndex:
    """A shared catalog bound to one embedding model, as a :class:`ToolFilterManager` uses it."""

    def __init__(self, catalog: SharedCatalog, config: IndexConfig, owner: IndexStore | None = None) -> None:
        self.catalog, self.config = catalog, config
        self.stats = StoreStats()
        self._owner = owner
        self._conversations: ConversationState | None = None
        self._next_check = 0.0
        self.outage = owner.outage if owner is not None else StoreOutage()  # one warning per outage
        self._check: tuple[asyncio.AbstractEventLoop, asyncio.Task[bool]] | None = None
        self._warned_local: set[str] = set()
        self._agreement: dict[str, bool] = {}  # version -> whether this CPU computes its vectors

    @classmethod
    async def open(cls, config: IndexConfig, embedding_service: EmbeddingService) -> SharedIndex:
        """Connect to the store ``config.store`` names; IndexStoreError (naming the server) if it fails."""
        store = await connect_store(config)
        return cls(store.catalog(config.catalog, embedding_model_id(embedding_service)), config, store)

    @property
    def where(self) -> str:
        """The store, as a user would name it (never with a password)."""
        return self._owner.where if self._owner is not None else "the store"

    def learning_table(self, every_seconds: float) -> LearningTable | None:
        """Where this catalog's replicas share what learning from use learned (None without a database)."""
        if self._owner is None:
            return None
        return self._owner.learning_table(self.catalog.name, self.catalog.model_id, every_seconds)

    def conversation_state(self) -> ConversationState | None:
        """Where this catalog's replicas share what conversations leave on them (None without a database)."""
        if self._owner is None:
            return None
        if self._conversations is None:
            self._conversations = self._owner.conversation_state(self.catalog.name)
        return self._conversations

    async def aclose(self) -> None:
        """Close the connections (the index in memory stays usable)."""
        if self._owner is not None:
            await self._owner.close()

    # --- building -----------------------------------------------------------------------------
    async def build(
        self,
        tools: Sequence[ToolMetadata],
        embedding_service: EmbeddingService,
        *,
        bm25_config: BM25Config | None = None,
        batch_size: int = 64,
        progress: ProgressCallback | None = None,
        cache: EmbeddingCache | None = None,
        circuit: EmbeddingCircuit | None = None,
        precision: Precision = "float32",
        previous: ToolIndex | None = None,
        publish: bool = False,
        embed_new: bool = True,
    ) -> ToolIndex:
        """The index of `tools` from the current version (see the module rules); with `publish`, the
        kernel's catalog becomes the current version if it differs. IndexStoreError if the store fails."""
        current, stored = await self._read_current()
        bm25_config = bm25_config or BM25Config()
        hashes = [content_hash(t) for t in tools]
        in_order, rows, unchanged = self._match(tools, hashes, stored)
        service = embedding_service
        if (
            stored is not None
            and embed_new
            and not await self._computes_alike(current, stored, tools, rows, unchanged, service)
        ):
            # Another CPU's arithmetic: this replica embeds the catalog itself and never publishes over it.
            stored, in_order, publish = None, False, False
            rows, unchanged = [None] * len(tools), [False] * len(tools)
        writing = publish and embed_new and not (in_order and all(unchanged))
        rows, chosen = self._chosen(tools, rows, unchanged, stored, writing)
        vectors, fresh, missing = await self._vectors(
            chosen, rows, stored, in_order, embedding_service, cache, batch_size, progress, circuit, embed_new
        )
        bm25 = self._stored_bm25(stored, in_order and not fresh, len(chosen), bm25_config)
        reuse_tokens = previous is not None and previous.bm25_config == bm25_config
        index = ToolIndex(
            chosen,
            embeddings=vectors,
            embedding_service=embedding_service,
            bm25_config=bm25_config,
            circuit=circuit or (previous.circuit if previous is not None else None),
            token_cache=previous.bm25.token_cache if reuse_tokens and previous is not None else None,
            missing=missing,
            precision=precision,
            bm25=bm25,
        )
        index.adopt_small_talk(previous)
        await index.load_small_talk(self)  # a replica reads the small talk one process embedded
        version = current
        if writing and vectors is not None:
            version = await self._publish(index, hashes, vectors, fresh)
        elif fresh and embed_new and (current is None or self._agreement.get(current.version, True)):
            # embedded here and not shared (a look without embedding warns of nothing)
            self._warn_local(current, [chosen[i].full_name for i in fresh])
        self.stats.version = version.version if version is not None else ""
        self.stats.loaded = len(chosen) - len(fresh)
        return index

    # --- small talk (sk_toolfilter.retrieval.small_talk.SmallTalkStore) ---------------------------
    async def load_small_talk(self, model_id: str, key: str, rows: int, dims: int) -> np.ndarray | None:
        """The small-talk vectors one process embedded with this store's model, or None (none kept, or the
        store failed: then the index embeds them itself, as without a store)."""
        if model_id != self.catalog.model_id:
            return None
        try:
            return await self.catalog.load_small_talk(key, rows, dims)
        except IndexStoreError as exc:
            logger.debug("sk-toolfilter: small-talk vectors not read from %s (%s)", self.where, exc)
            return None

    async def save_small_talk(self, model_id: str, key: str, vectors: np.ndarray) -> None:
        """Keep the small-talk vectors this process embedded for the replicas that start later."""
        if model_id != self.catalog.model_id:
            return
        try:
            await self.catalog.save_small_talk(key, vectors)
        except IndexStoreError as exc:
            logger.debug("sk-toolfilter: small-talk vectors not kept in %s (%s)", self.where, exc)

    def _match(
        self, tools: Sequence[ToolMetadata], hashes: list[str], stored: StoredCatalog | None
    ) -> tuple[bool, list[int | None], list[bool]]:
        """(the stored tools in the stored order, each tool's stored row or None, whether it is unchanged);
        counts what changed and what was removed in :attr:`stats`."""
        names = [t.full_name for t in tools]
        in_order = stored is not None and stored.names == names
        if in_order:
            rows: list[int | None] = list(range(len(names)))
        else:
            position = {name: row for row, name in enumerate(stored.names if stored is not None else [])}
            rows = [position.get(name) for name in names]
        unchanged = stored.unchanged(hashes, None if in_order else rows) if stored is not None else [False] * len(tools)
        self.stats.changed = sum(1 for same in unchanged if not same)
        self.stats.removed = (len(stored.names) if stored is not None else 0) - sum(r is not None for r in rows)
        return in_order, rows, unchanged

    def _chosen(
        self,
        tools: Sequence[ToolMetadata],
        rows: list[int | None],
        unchanged: list[bool],
        stored: StoredCatalog | None,
        writing: bool,
    ) -> tuple[list[int | None], list[ToolMetadata]]:
        """The rows to reuse and the tools to index: the kernel's catalog with every unchanged tool's stored
        vector when publishing, else the stored catalog for the tools this kernel has."""
        try:
            if writing:
                return [r if same else None for r, same in zip(rows, unchanged, strict=True)], list(tools)
            chosen = [
                t if r is None or same or stored is None else stored.tool(r)
                for t, r, same in zip(tools, rows, unchanged, strict=True)
            ]
        except ValueError as exc:
            raise IndexStoreError(f"index store: catalog {self.catalog.name!r}: {exc}") from None
        return rows, chosen

    def _stored_bm25(
        self, stored: StoredCatalog | None, same_catalog: bool, size: int, bm25_config: BM25Config
    ) -> BM25Index | None:
        """The version's BM25 statistics when every row is the stored one, in the stored order, with the
        same settings (else None: the tools are tokenized)."""
        if not same_catalog or stored is None or stored.bm25 is None or stored.bm25_config != bm25_config.model_dump():
            return None
        try:
            return BM25Index.from_arrays(size, stored.bm25, bm25_config)
        except ValueError as exc:
            logger.warning("sk-toolfilter: catalog %r: %s; tokenizing the tools instead", self.catalog.name, exc)
            return None

    async def _computes_alike(
        self,
        current: CatalogVersion | None,
        stored: StoredCatalog,
        tools: Sequence[ToolMetadata],
        rows: list[int | None],
        unchanged: list[bool],
        service: EmbeddingService,
    ) -> bool:
        """Whether this process's encoder gives the stored vectors (checked once per version, on up to
        :data:`PROBE_TOOLS` unchanged tools, only for an encoder that runs on this CPU: a local int8
        model's vectors differ by CPU, see :mod:`~sk_toolfilter.retrieval.numerics`). One warning when not."""
        version = current.version if current is not None else ""
        if not runs_here(service) or version in self._agreement:
            return self._agreement.get(version, True)
        pairs = [(i, r) for i, (r, same) in enumerate(zip(rows, unchanged, strict=True)) if r is not None and same]
        pairs = pairs[:: max(1, len(pairs) // PROBE_TOOLS)][:PROBE_TOOLS]
        sample, stored_rows = [i for i, _ in pairs], [r for _, r in pairs]
        if not sample:
            return True
        try:
            here = await embed_texts(service, embedding_texts(tools[i] for i in sample))
        except EmbeddingServiceError:
            return True  # the build's own embedding calls report the service
        there = stored.vectors[stored_rows].astype(np.float32)
        there /= np.maximum(np.linalg.norm(there, axis=1, keepdims=True), 1e-12)
        worst = worst_agreement(there, here)
        self._agreement[version] = alike = worst >= AGREEMENT
        if not alike:
            logger.warning(
                "sk-toolfilter: catalog %r in %s holds vectors of %s that this CPU computes differently (worst "
                "cosine %.3f of %d tools checked, %.3f needed: another CPU's int8 arithmetic): this replica "
                "embeds the catalog itself and never publishes over it",
                self.catalog.name,
                self.where,
                self.catalog.model_id,
                worst,
                len(sample),
                AGREEMENT,
            )
        return alike

    async def _read_current(self) -> tuple[CatalogVersion | None, StoredCatalog | None]:
        """The current version and its tools; read again once if a publish replaced it meanwhile."""
        for attempt in range(2):
            current = await self.catalog.current()
            if current is None:
                return None, None
            try:
                return current, await self.catalog.load(current)
            except IndexStoreError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def _vectors(
        self,
        tools: list[ToolMetadata],
        rows: list[int | None],
        stored: StoredCatalog | None,
        in_order: bool,
        service: EmbeddingService,
        cache: EmbeddingCache | None,
        batch_size: int,
        progress: ProgressCallback | None,
        circuit: EmbeddingCircuit | None,
        embed_new: bool,
    ) -> tuple[np.ndarray | None, list[int], np.ndarray | None]:
        """One float32 row per tool: the stored row, else embedded here. Returns the rows, the
        positions embedded here, and (``embed_new=False``) the mask of rows left without a vector."""
        fresh = [i for i, r in enumerate(rows) if r is None]
        if stored is not None and in_order and not fresh:
            return stored.vectors, [], None  # the stored catalog as it is: no copy
        texts = embedding_texts(tools[i] for i in fresh)
        embedded: np.ndarray | None = None
        missing = None
        if texts and embed_new:
            timeout = circuit.timeout_seconds if circuit is not None else None
            embedded, count = await embed_catalog(
                service, texts, cache=cache, batch_size=batch_size, progress=progress, timeout=timeout
            )
            self.stats.embedded += count
        elif texts:
            embedded, missing_rows = known_vectors(texts, {}, cache, service)
            if embedded is not None and missing_rows is not None:
                missing = np.zeros(len(tools), dtype=bool)
                missing[fresh] = missing_rows
        dims = ({stored.vectors.shape[1]} if stored is not None and len(fresh) < len(tools) else set()) | (
            {embedded.shape[1]} if embedded is not None else set()
        )
        if len(dims) > 1:
            raise IndexStoreError(
                f"index store: catalog {self.catalog.name!r} holds {sorted(dims)[0]}-dimensional vectors of "
                f"{self.catalog.model_id}, the service returns {sorted(dims)[-1]}: publish the catalog again"
            )
        if not dims:
            return None, fresh, None
        (size,) = dims
        matrix = np.zeros((len(tools), size), dtype=np.float32)
        reused = [i for i, r in enumerate(rows) if r is not None]
        if stored is not None and reused:
            matrix[reused] = stored.vectors[[r for r in rows if r is not None]]
        if embedded is not None:
            matrix[fresh] = embedded
        elif fresh:
            missing = np.zeros(len(tools), dtype=bool)
            missing[fresh] = True
        return matrix, fresh, missing

    async def _publish(
        self, index: ToolIndex, hashes: list[str], vectors: np.ndarray, fresh: list[int]
    ) -> CatalogVersion:
        model_id, dims = self.catalog.model_id, int(vectors.shape[1])
        tools = list(index.tools)
        keys = [record_key(h, model_id, dims) for h in hashes]
        records = [to_record(tools[i], vectors[i], model_id) for i in fresh]
        image = StoredCatalog(
            [t.full_name for t in tools],
            hashes,
            keys,
            vectors,
            tools=tools,
            bm25=index.bm25.arrays(),
            bm25_config=index.bm25_config.model_dump(),
        )
        version = await self.catalog.publish(keys, records, dims, image=lambda: pack_image(image))
        self.stats.published += 1
        logger.info(
            "sk-toolfilter: published version %s of catalog %r (%d tools, %d new or changed) to %s",
            version.version,
            self.catalog.name,
            len(tools),
            len(fresh),
            self.where,
        )
        return version

    def _warn_local(self, current: CatalogVersion | None, names: list[str]) -> None:
        key = current.version if current is not None else ""
        if key in self._warned_local:
            return
        self._warned_local.add(key)
        where = f"version {current.version} of catalog" if current is not None else "the store's catalog"
        logger.warning(
            "sk-toolfilter: %d tool(s) are not in %s %r (e.g. %s): embedded in this process only; "
            "run 'sk-toolfilter index push' (or set index.publish: true) to share them",
            len(names),
            where,
            self.catalog.name,
            ", ".join(names[:3]),
        )

    # --- following ----------------------------------------------------------------------------
    async def new_version_available(self) -> bool:
        """True when the store's current version is not the one the index was built from.

        At most one check per ``check_interval_seconds`` (concurrent selections share it). While
        the store fails, selections never wait on it: False (the index in memory keeps serving),
        and every ``retry_seconds`` a check runs in the background; once it succeeds the next
        selection checks again.
        """
        if time.monotonic() < self._next_check:
            return False
        loop = asyncio.get_running_loop()
        if self._check is None or self._check[0] is not loop or self._check[1].done():
            self._check = (loop, loop.create_task(self._check_version()))
        if self.outage.active:
            return False
        return await asyncio.shield(self._check[1])

    async def _check_version(self) -> bool:
        try:
            current = await self.catalog.current()
        except IndexStoreError as exc:
            self.report_failure(exc)
            return False
        if self.outage.end():
            self._next_check = 0.0  # the next selection looks for a version published meanwhile
            logger.info("sk-toolfilter: the index store %s answers again", self.where)
            return False
        self._next_check = time.monotonic() + self.config.check_interval_seconds
        return current is not None and current.version != self.stats.version

    def report_failure(self, exc: IndexStoreError) -> None:
        """Note a failed store call: one warning per outage, next try after ``retry_seconds``."""
        self._next_check = time.monotonic() + self.config.retry_seconds
        if self.outage.begin():
            version = self.stats.version or "(none)"
            seconds = self.config.retry_seconds
            logger.warning(
                "sk-toolfilter: %s; serving catalog %r version %s from memory, %s",
                exc,
                self.catalog.name,
                version,
                f"retrying every {seconds:g}s" if seconds else "retrying at the next selection",
            )

    def picked_up(self) -> None:
        """Count a new version taken in after the start."""
        self.stats.reloads += 1
