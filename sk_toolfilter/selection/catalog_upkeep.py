"""Keeping a manager's catalog current: the first index, the background build, re-indexing.

Selection (:mod:`sk_toolfilter.selection.manager`) reads :attr:`CatalogUpkeep.catalog`, one whole
snapshot; everything here builds a new index aside and swaps it in at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sk_toolfilter.basics.errors import ConfigError, EmbeddingServiceError, IndexStoreError
from sk_toolfilter.basics.progress import ProgressCallback
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.bulk import collector_paused
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.encoders import EmbeddingService
from sk_toolfilter.retrieval.faults import EmbeddingCircuit
from sk_toolfilter.retrieval.index import ToolIndex, embedding_texts, known_vectors
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.selection.tool_source import DEEP_CHECK_SECONDS, ToolSource
from sk_toolfilter.selection.visibility import ToolPolicy, resolve_bare_names
from sk_toolfilter.store.shared_index import SharedIndex

logger = library_logger(__name__)


@dataclass(frozen=True)
class Catalog:
    """Everything derived from one index, swapped as a whole when the tools change."""

    index: ToolIndex
    searchable_mask: np.ndarray
    searchable_count: int  # True entries of the mask, counted once
    searchable: set[str]
    visible: set[str]
    discovery_names: list[str]


def describe_catalog(index: ToolIndex, config: ToolFilterConfig, policy: ToolPolicy) -> Catalog:
    """What selection needs of `index`: the searchable and visible tools, the discovery tools."""
    plugin = config.discovery.plugin_name
    searchable = [
        not policy.is_hidden(t.full_name) and policy.is_searchable(t.full_name) and t.plugin != plugin
        for t in index.tools
    ]
    return Catalog(
        index=index,
        searchable_mask=np.array(searchable, dtype=bool),
        searchable_count=sum(searchable),
        searchable={t.full_name for t, ok in zip(index.tools, searchable, strict=True) if ok},
        visible={t.full_name for t in index.tools if not policy.is_hidden(t.full_name)},
        discovery_names=[t.full_name for t in index.tools if t.plugin == plugin]
        if config.enabled and config.discovery.enabled
        else [],
    )


@dataclass
class FirstIndex:
    """The index a manager starts from, and what built it."""

    index: ToolIndex
    config: ToolFilterConfig  # bare names resolved against the crawled tools
    fingerprint: Any
    store: SharedIndex | None


async def build_first_index(
    source: ToolSource,
    config: ToolFilterConfig,
    embedding_service: EmbeddingService | None,
    cache: EmbeddingCache | None,
    progress: ProgressCallback | None,
    embed: bool = True,
) -> FirstIndex:
    """Crawl `source` and index its visible tools. A catalog with more than
    ``embedding.background_above`` tools to embed starts with BM25 (``vectors_pending`` says why);
    :meth:`CatalogUpkeep.follow` then embeds them in the background."""
    fingerprint = source.fingerprint(None)
    crawled = source.crawl()
    config = resolve_bare_names(config, [t.full_name for t in crawled])
    policy = _checked_policy(config, [t.full_name for t in crawled])
    circuit = EmbeddingCircuit(
        config.embedding.timeout_seconds, config.embedding.failure_threshold, config.embedding.cooldown_seconds
    )
    options: dict[str, Any] = {
        **build_options(config, cache),
        "progress": progress,
        "circuit": circuit,
        "precision": config.embedding.precision,
    }
    store = await _open_store(config, embedding_service)
    tools = policy.apply(crawled)

    async def build(embed_new: bool) -> ToolIndex:
        if store is not None and embedding_service is not None:  # a store is only opened with a service
            publish = config.index.publish
            return await store.build(tools, embedding_service, publish=publish, embed_new=embed_new, **options)
        return await ToolIndex.build(tools, embedding_service, embed_new=embed_new, **options)

    limit = config.embedding.background_above
    # Only a catalog larger than the limit can start in the background: a small one reads no cache here.
    may_wait = embed and store is None and embedding_service is not None and limit is not None and len(tools) > limit
    waiting = _tools_to_embed(tools, embedding_service, cache) if may_wait else 0
    in_background = limit is not None and waiting > limit
    try:
        try:
            index = await build(embed and not in_background)
        except EmbeddingServiceError as exc:
            if config.embedding.on_failure != "bm25":
                raise
            # Start anyway: BM25 ranks every tool; a later selection (after the cooldown) embeds them.
            logger.warning(
                "sk-toolfilter: the embedding service failed while indexing (%s); BM25 ranks the tools until "
                "it answers (embedding.on_failure: bm25)",
                exc,
            )
            index = await build(False)
    except BaseException:
        if store is not None:
            await store.aclose()
        raise
    if in_background:
        index.vectors_pending = (
            f"{waiting} of {len(tools)} tools are being embedded in the background; BM25 ranks until all are ready"
        )
    return FirstIndex(index, config, fingerprint, store)


async def _open_store(config: ToolFilterConfig, embedding_service: EmbeddingService | None) -> SharedIndex | None:
    """The shared store ``index.store`` names (None for memory; BM25 alone always indexes in memory)."""
    if config.index.store == "memory":
        return None
    if embedding_service is None:
        logger.warning("sk-toolfilter: index.store applies to semantic and hybrid search; BM25 indexes in memory")
        return None
    return await SharedIndex.open(config.index, embedding_service)


def _checked_policy(config: ToolFilterConfig, names: list[str]) -> ToolPolicy:
    """The visibility policy; an ``exclude`` or override that matches no tool is a warning (an error
    with ``strict``)."""
    policy = ToolPolicy(config)
    unmatched = policy.unmatched(names)
    if unmatched and config.strict:
        raise ConfigError("; ".join(unmatched) + " (tool_filtering.strict is on)")
    for message in unmatched:
        logger.warning("sk-toolfilter: %s", message)
    return policy


def build_options(config: ToolFilterConfig, cache: EmbeddingCache | None) -> dict[str, Any]:
    """The :meth:`ToolIndex.build` options every (re-)index of one manager shares."""
    return {"bm25_config": config.bm25, "batch_size": config.embedding.batch_size, "cache": cache}


class CatalogUpkeep:
    """Holds the current :class:`Catalog` and keeps it in step with its source and its vectors.

    Every change (tools added or removed, vectors built in the background, a new shared-index
    version) is built aside and swapped in whole, under one lock: a selection sees the old
    catalog or the new one, never a mix.
    """

    def __init__(self, index: ToolIndex, config: ToolFilterConfig, policy: ToolPolicy) -> None:
        self.config, self.policy = config, policy
        self.catalog = describe_catalog(index, config, policy)
        self.source: ToolSource | None = None
        self.store: SharedIndex | None = None
        self.embedding_cache: EmbeddingCache | None = None
        self.refreshing = threading.Lock()
        self.background: asyncio.Task[None] | None = None
        self._fingerprint: Any = None
        self._in_step = True  # the catalog holds the source's tools as of the last check
        self._next_deep_check = 0.0
        self._retry_embedding_at = 0.0

    def follow(
        self,
        source: ToolSource,
        first: FirstIndex,
        cache: EmbeddingCache | None,
        progress: ProgressCallback | None,
    ) -> None:
        """Follow `source` from `first` on; start the background build an instant start asked for."""
        index = first.index
        self.source, self._fingerprint, self.embedding_cache, self.store = source, first.fingerprint, cache, first.store
        if index.missing_vectors:
            self._retry_embedding_at = time.monotonic() + self.config.embedding.cooldown_seconds
        if index.vectors_pending:
            self._retry_embedding_at = float("inf")  # the background build embeds them, not a request
            self.background = asyncio.get_running_loop().create_task(self._embed_in_background(progress))

    def _swap(self, index: ToolIndex) -> None:
        self.catalog = describe_catalog(index, self.config, self.policy)

    async def vectors_ready(self) -> None:
        """Wait until a background build (if any) has swapped its complete index in."""
        if self.background is not None:
            await asyncio.shield(self.background)

    async def _embed_in_background(self, progress: ProgressCallback | None) -> None:
        """Embed the tools an instant start left without vectors, then swap the complete index in whole."""
        pending = self.catalog.index
        service = pending.embedding_service
        assert service is not None
        options = {
            **build_options(self.config, self.embedding_cache),
            "circuit": pending.circuit,
            "precision": pending.precision,
        }
        try:
            with collector_paused():
                complete = await ToolIndex.build(
                    list(pending.tools), service, progress=progress, previous=pending, **options
                )
        except EmbeddingServiceError as exc:
            logger.warning(
                "sk-toolfilter: building the tool vectors in the background failed (%s); BM25 ranks the tools "
                "until the embedding service answers",
                exc,
            )
            pending.vectors_pending = None  # the usual retry after the cooldown takes over
            pending.vectors_failed = (
                f"building the tool vectors failed ({exc}); BM25 ranks until the embedding service answers "
                f"(retried after embedding.cooldown_seconds={self.config.embedding.cooldown_seconds:g})"
            )
            self._retry_embedding_at = time.monotonic() + self.config.embedding.cooldown_seconds
            return
        while not self.refreshing.acquire(blocking=False):  # a re-index is swapping an index: after it
            await asyncio.sleep(0.01)
        try:
            current = self.catalog.index
            if current is not pending:  # the tools changed meanwhile: their list, with the vectors built
                complete = await ToolIndex.build(list(current.tools), service, previous=complete, **options)
            self._swap(complete)  # one whole index: BM25 before this line, hybrid after
            self._retry_embedding_at = 0.0
            method = self.config.search_method
            logger.info("sk-toolfilter: the tool vectors are ready (%d tools); ranking with %s", len(complete), method)
        finally:
            self.refreshing.release()

    async def aclose(self) -> None:
        """Stop a background build and the small-talk exemplars' embedding (returning once both have
        stopped) and release the shared store's connections."""
        if self.background is not None and not self.background.done():
            self.background.cancel()
            await asyncio.wait({self.background})
        await self.catalog.index.aclose()
        if self.store is not None:
            await self.store.aclose()

    def gone(self) -> frozenset[str]:
        """Tools of the current catalog no longer in the source (a re-index elsewhere is on its way);
        empty, without asking the source per tool, when the last check found the catalog in step."""
        source = self.source
        if source is None or self._in_step:
            return frozenset()
        return frozenset(n for n in self.catalog.index.names if not source.exists(n))

    def exists(self, full_name: str) -> bool:
        """The tool is still in its source (always true without a source to check)."""
        return self.source is None or self.source.exists(full_name)

    def source_names(self) -> list[str]:
        """Every tool of the followed source (hidden ones included), in its order."""
        return [] if self.source is None else self.source.names()

    async def _rebuild(self, tools: list[ToolMetadata], old: ToolIndex, *, embed_new: bool, changed: bool) -> ToolIndex:
        """A new index of `tools` from `old` (its vectors and tokens reused): through the shared store when
        there is one (publishing when the tools `changed`), else in memory. A store failure with unchanged
        tools keeps `old` (the catalog in memory keeps serving)."""
        store = self.store
        common: dict[str, Any] = {
            **build_options(self.config, self.embedding_cache),
            "previous": old,
            "embed_new": embed_new,
        }
        if store is not None and old.embedding_service is not None:
            try:
                return await store.build(
                    tools,
                    old.embedding_service,
                    circuit=old.circuit,
                    precision=old.precision,
                    publish=self.config.index.publish and changed,
                    **common,
                )
            except IndexStoreError as exc:
                store.report_failure(exc)
                if not changed:
                    return old
        return await ToolIndex.build(tools, old.embedding_service, **common)

    async def refresh(self, *, force: bool = False) -> bool:
        """Re-index if the source's tools changed (or `force`, or vectors are due for a retry, or the
        shared store has a new version); True when a new index was swapped in."""
        source, store = self.source, self.store
        if source is None:
            return False
        now = time.monotonic()
        deep = now >= self._next_deep_check
        if deep:
            self._next_deep_check = now + DEEP_CHECK_SECONDS
        fingerprint = source.fingerprint(None if deep else self._fingerprint)
        old = self.catalog.index
        retry = old.missing_vectors > 0 and now >= self._retry_embedding_at
        new_version = store is not None and await store.new_version_available()
        self._in_step = fingerprint == self._fingerprint
        if self._in_step and not force and not retry and not new_version:
            return False
        if not self.refreshing.acquire(blocking=False):
            return False  # another task is rebuilding; this selection uses the current index (gone tools masked)
        try:
            old = self.catalog.index
            tools = self.policy.apply(source.crawl())
            tools_changed = fingerprint != self._fingerprint
            building = self.background is not None and not self.background.done()

            async def build(embed_new: bool = True) -> ToolIndex:
                return await self._rebuild(tools, old, embed_new=embed_new and not building, changed=tools_changed)

            try:
                with collector_paused():
                    index = await build()
            except EmbeddingServiceError as exc:
                # Keep selecting: known tools keep their vectors, new ones are ranked by BM25 until
                # a later selection (after the cooldown) embeds them. One warning per incident.
                index = await build(embed_new=False)
                self._retry_embedding_at = time.monotonic() + self.config.embedding.cooldown_seconds
                if old.missing_vectors == 0:
                    logger.warning(
                        "sk-toolfilter: re-index could not embed %d new tool(s) (%s); BM25 ranks them "
                        "until the embedding service answers",
                        index.missing_vectors,
                        exc,
                    )
            else:
                if old.missing_vectors:
                    logger.info("sk-toolfilter: the tools indexed without vectors are embedded now")
            if index is old:
                return False
            if building:
                index.vectors_pending = old.vectors_pending
            if new_version and store is not None:
                store.picked_up()
            self._swap(index)
            self._fingerprint, self._in_step = fingerprint, True
            added = len(set(index.names) - set(old.names))
            removed = len(set(old.names) - set(index.names))
            logger.info("sk-toolfilter: re-indexed the tools (+%d / -%d tools, %d total)", added, removed, len(index))
            return True
        finally:
            self.refreshing.release()


def _tools_to_embed(
    tools: Sequence[ToolMetadata], service: EmbeddingService | None, cache: EmbeddingCache | None
) -> int:
    """How many of `tools` have no vector in the cache (all of them without one)."""
    if service is None or not tools:
        return 0
    _, missing = known_vectors(embedding_texts(tools), {}, cache, service)
    return len(tools) if missing is None else int(missing.sum())
