"""ToolIndex: a catalog of tool descriptions with BM25 statistics and embeddings."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from sk_toolfilter.basics.errors import EmbeddingServiceError
from sk_toolfilter.basics.progress import ProgressCallback
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.config import BM25Config
from sk_toolfilter.retrieval.batching import QueryBatcher
from sk_toolfilter.retrieval.bm25 import BM25Index
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.encoders import (
    EmbeddingService,
    catalog_call_timeout,
    embed_texts,
    embedding_model_id,
    fitted_weights,
    query_encoder,
)
from sk_toolfilter.retrieval.faults import EmbeddingCircuit
from sk_toolfilter.retrieval.gloss import with_english_gloss
from sk_toolfilter.retrieval.metadata import ToolMetadata, crawl_kernel
from sk_toolfilter.retrieval.names import NameMatcher
from sk_toolfilter.retrieval.numerics import AGREEMENT, PROBE_TEXTS
from sk_toolfilter.retrieval.prerequisites import Provider, find_providers
from sk_toolfilter.retrieval.scoring import CatalogVectors, Precision
from sk_toolfilter.retrieval.small_talk import (
    SMALL_TALK,
    SmallTalkStore,
    SmallTalkVectors,
    load_exemplars,
    matching_variant,
    shipped_exemplar_variants,
    small_talk_key,
    small_talk_rows,
    worst_probe_agreement,
)

logger = library_logger(__name__)

"""Called as ``progress(done, total)`` while tool texts are embedded."""

# Texts longer than this are cut before embedding (models truncate anyway; APIs reject huge inputs).
MAX_EMBED_CHARS = 4000
# Query vectors remembered per index (a few MB): the requests of an agent loop repeat their turn's request.
QUERY_VECTORS_KEPT = 1024


class ToolIndex:
    """Tool metadata, BM25 statistics and (optionally) one embedding per tool.

    Build it with :meth:`build_from_kernel` (or :meth:`build` from records). Immutable once built:
    a changed kernel gets a new index.
    """

    def __init__(
        self,
        tools: Sequence[ToolMetadata],
        *,
        embeddings: np.ndarray | None = None,
        embedding_service: EmbeddingService | None = None,
        bm25_config: BM25Config | None = None,
        circuit: EmbeddingCircuit | None = None,
        token_cache: dict[str, list[str]] | None = None,
        missing: np.ndarray | None = None,
        precision: Precision = "float32",
        bm25: BM25Index | None = None,
    ) -> None:
        full_names = [t.full_name for t in tools]
        if len(set(full_names)) != len(full_names):
            dupes = sorted({n for n in full_names if full_names.count(n) > 1})
            raise ValueError(f"duplicate tool names in the catalog: {', '.join(dupes[:5])}")
        if embeddings is not None and embeddings.shape[0] != len(tools):
            raise EmbeddingServiceError(f"{embeddings.shape[0]} embeddings for {len(tools)} tools: sizes must match")
        self.tools: tuple[ToolMetadata, ...] = tuple(tools)
        self.precision: Precision = precision
        self._vectors = None if embeddings is None else CatalogVectors(embeddings, precision)
        self._missing = missing if missing is not None and missing.any() else None
        self.embedding_service = embedding_service
        self.bm25_config = bm25_config or BM25Config()
        if bm25 is not None and (bm25.size != len(self.tools) or bm25.config != self.bm25_config):
            raise ValueError("the BM25 statistics given were built for another catalog or configuration")
        self.bm25 = bm25 or BM25Index.from_tools(self.tools, self.bm25_config, token_cache)
        self.name_matcher = NameMatcher(self.tools)
        self._position = {name: i for i, name in enumerate(full_names)}
        self.circuit = circuit or EmbeddingCircuit()
        # Concurrent requests' query embeddings go out together (see sk_toolfilter.retrieval.batching); a hung
        # call is abandoned after the circuit's timeout so it cannot hold up the requests behind it.
        self._batcher = QueryBatcher(self._embed_batch)
        self._beside_lane: asyncio.Lock | None = None  # learning's embeddings: one at a time, beside requests
        # Every request of an agent loop ranks the same turn request again: its vector is reused.
        self._query_vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._small_talk: SmallTalkVectors | None = None
        self._small_talk_lock = asyncio.Lock()
        self._exemplar_task: asyncio.Task[tuple[CatalogVectors, CatalogVectors] | None] | None = None
        self._shipped: dict[tuple[str, int], dict[str, np.ndarray]] = {}
        self.small_talk_store: SmallTalkStore | None = None
        """Where small-talk vectors this index embeds are kept for the other replicas (the shared store)."""
        self.vectors_pending: str | None = None
        """Set while the tools' vectors are built in the background: why this index ranks with BM25."""
        self.vectors_failed: str | None = None
        """Why this index has no vectors when building them failed (said by a ranking that falls back)."""
        self.fusion_weights = fitted_weights(embedding_service)
        """The hybrid blend fitted for the embedding model (used when the config sets no ``method_weights``)."""
        self.loop_fusion_weights = fitted_weights(embedding_service, "loop_hybrid_weights")
        """The blend chosen for the embedding model inside agent-loop turns (see ``ToolFilterConfig.for_turn``)."""

    @classmethod
    async def build(
        cls,
        tools: Sequence[ToolMetadata],
        embedding_service: EmbeddingService | None = None,
        *,
        bm25_config: BM25Config | None = None,
        batch_size: int = 64,
        progress: ProgressCallback | None = None,
        cache: EmbeddingCache | None = None,
        previous: ToolIndex | None = None,
        circuit: EmbeddingCircuit | None = None,
        embed_new: bool = True,
        precision: Precision | None = None,
    ) -> ToolIndex:
        """Index `tools`; with a service, embed every tool once, in batches (cached ones are reused).

        With `previous` (the index this one replaces), unchanged tools reuse its vectors and tokens,
        and its circuit breaker carries over: only what changed is re-indexed. Each call to the
        service is bounded by the circuit's ``timeout_seconds``. With ``embed_new=False`` the service
        is not called: tools without a known vector get a zero vector (BM25 ranks them) and are
        counted in :attr:`missing_vectors`. `precision` (default: the previous index's, else float32)
        is how the vectors are held and scored (see :mod:`sk_toolfilter.retrieval.scoring`).

        Raises EmbeddingServiceError (with the cause) when the service fails or misbehaves.
        """
        circuit = circuit or (previous.circuit if previous is not None else None) or EmbeddingCircuit()
        embeddings, missing = None, None
        if embedding_service is not None and tools:
            texts = embedding_texts(tools)
            same_service = previous is not None and previous.embedding_service is embedding_service
            known = previous.vectors_by_text() if same_service and previous is not None else {}
            if embed_new:
                embeddings, _ = await embed_catalog(
                    embedding_service,
                    texts,
                    cache=cache,
                    batch_size=batch_size,
                    progress=progress,
                    known=known,
                    timeout=circuit.timeout_seconds,
                )
            else:
                embeddings, missing = known_vectors(texts, known, cache, embedding_service)
        reuse = previous is not None and previous.bm25_config == (bm25_config or BM25Config())
        index = cls(
            tools,
            embeddings=embeddings,
            embedding_service=embedding_service,
            bm25_config=bm25_config,
            circuit=circuit,
            token_cache=previous.bm25.token_cache if reuse and previous is not None else None,
            missing=missing,
            precision=precision or (previous.precision if previous is not None else "float32"),
        )
        index.adopt_small_talk(previous)
        return index

    def adopt_small_talk(self, previous: ToolIndex | None) -> None:
        """The small-talk vectors (and their store) of the index this one replaces, when both embed with the
        same service: the same vectors, never embedded twice."""
        if previous is not None and previous.embedding_service is self.embedding_service:
            self._small_talk = previous._small_talk
            self._exemplar_task = previous._exemplar_task
            self.small_talk_store = self.small_talk_store or previous.small_talk_store

    async def load_small_talk(self, store: SmallTalkStore) -> bool:
        """Take the small-talk vectors `store` keeps for this index's model (a replica reads what one
        process embedded: ~3,100 texts it need not embed), and keep in it what this index embeds itself.
        A model with shipped vectors never uses a store (they are chosen per CPU arithmetic). True when
        the vectors came from `store`."""
        self.small_talk_store = store
        service, vectors = self.embedding_service, self._vectors
        if self._small_talk is not None or service is None or vectors is None or self._uses_shipped(service):
            return False
        dims = vectors.shape[1]
        stored = await store.load_small_talk(embedding_model_id(service), small_talk_key(), small_talk_rows(), dims)
        if stored is None:
            return False
        descriptions = stored[: len(SMALL_TALK)]
        self._small_talk = SmallTalkVectors(descriptions, *_split_exemplars(stored[len(SMALL_TALK) :]))
        return True

    def _uses_shipped(self, service: EmbeddingService) -> bool:
        dims = self._vectors.shape[1] if self._vectors is not None else 0
        return bool(self._shipped_variants(embedding_model_id(query_encoder(service)), dims))

    def _shipped_variants(self, model_id: str, dims: int) -> dict[str, np.ndarray]:
        """:func:`shipped_exemplar_variants`, read from disk once per index (the store check at build and
        the first request's small talk ask the same)."""
        key = (model_id, dims)
        if key not in self._shipped:
            self._shipped[key] = shipped_exemplar_variants(model_id, dims)
        return self._shipped[key]

    @classmethod
    async def build_from_kernel(
        cls,
        kernel: Any,
        embedding_service: EmbeddingService | None = None,
        *,
        bm25_config: BM25Config | None = None,
        batch_size: int = 64,
        progress: ProgressCallback | None = None,
        cache: EmbeddingCache | None = None,
    ) -> ToolIndex:
        """Index every function of every plugin of an SK `kernel` (``None`` service: BM25 only).

        The kernel is read by attribute (:func:`crawl_kernel`); nothing here imports Semantic Kernel.
        """
        return await cls.build(
            crawl_kernel(kernel),
            embedding_service,
            bm25_config=bm25_config,
            batch_size=batch_size,
            progress=progress,
            cache=cache,
        )

    def __len__(self) -> int:
        return len(self.tools)

    def __contains__(self, full_name: object) -> bool:
        return full_name in self._position

    @cached_property
    def providers(self) -> dict[str, tuple[Provider, ...]]:
        """Lookup tools that give each tool's required parameters (read from the schemas, once)."""
        return find_providers(self.tools)

    @property
    def names(self) -> list[str]:
        """Full names in kernel order."""
        return [t.full_name for t in self.tools]

    @property
    def missing_vectors(self) -> int:
        """Tools indexed without a vector (a re-index whose embedding failed): BM25 ranks them."""
        return 0 if self._missing is None else int(self._missing.sum())

    @property
    def embeddings(self) -> np.ndarray | None:
        """The tools' unit vectors as float32 rows (dequantized when held as int8), or None."""
        return None if self._vectors is None else self._vectors.float32()

    def vectors_of(self, positions: Sequence[int]) -> np.ndarray | None:
        """The float32 vectors of the tools at `positions` (a few rows, not the catalog), or None."""
        return None if self._vectors is None else self._vectors.rows(np.asarray(positions, dtype=np.int64))

    @property
    def vector_bytes(self) -> int:
        """Memory held for the tools' vectors."""
        return 0 if self._vectors is None else self._vectors.nbytes

    @property
    def has_embeddings(self) -> bool:
        return self._vectors is not None and self.embedding_service is not None

    def position(self, full_name: str) -> int:
        return self._position[full_name]

    def get(self, full_name: str) -> ToolMetadata | None:
        position = self._position.get(full_name)
        return None if position is None else self.tools[position]

    def vectors_by_text(self) -> dict[str, np.ndarray]:
        """Each tool's embedding keyed by the exact text embedded (for rebuilds)."""
        vectors = self.embeddings
        if vectors is None:
            return {}
        return {
            t.embedding_text()[:MAX_EMBED_CHARS]: v
            for i, (t, v) in enumerate(zip(self.tools, vectors, strict=True))
            if self._missing is None or not self._missing[i]
        }

    def mask_of(self, names: Iterable[str]) -> np.ndarray:
        """Boolean mask over the catalog of the given names (unknown names are ignored)."""
        mask = np.zeros(len(self.tools), dtype=bool)
        positions = [p for p in (self._position.get(n) for n in names) if p is not None]
        mask[positions] = True
        return mask

    def bm25_raw_scores(self, query: str) -> np.ndarray:
        return self.bm25.raw_scores(query)

    async def embed_queries(self, queries: list[str]) -> np.ndarray:
        """Unit vectors of the queries, in one call, through the index's circuit breaker.

        The last ``QUERY_VECTORS_KEPT`` query vectors are reused. Raises EmbeddingServiceError on any
        failure, timeout, size mismatch, or while the circuit is open.
        """
        if not self.has_embeddings:
            raise EmbeddingServiceError("this index has no embedding service")
        self.circuit.check()
        texts = [q[:MAX_EMBED_CHARS] for q in queries]
        known = self._query_vectors
        vectors, missing = self._kept_and_missing(texts)
        if missing:
            # Chinese requests carry their English gloss, as Chinese tool texts do (retrieval.gloss).
            glossed = [with_english_gloss(t)[:MAX_EMBED_CHARS] for t in missing]
            vectors.update(zip(missing, await self._batcher.embed(glossed), strict=True))
        for text, vector in vectors.items():
            known[text] = vector
            known.move_to_end(text)
        while len(known) > QUERY_VECTORS_KEPT:
            known.popitem(last=False)
        if len(texts) == 1:  # a copy (as np.stack gives): callers never share the kept vector
            return vectors[texts[0]][None, :].copy()
        return np.stack([vectors[t] for t in texts])

    def _kept_and_missing(self, texts: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        """The kept vectors of `texts` (cut to ``MAX_EMBED_CHARS``) by text, and the texts without one, once each."""
        known = self._query_vectors
        vectors = {t: known[t] for t in texts if t in known}
        return vectors, [t for t in dict.fromkeys(texts) if t not in vectors]

    def known_query_vectors(self, queries: Sequence[str]) -> list[np.ndarray | None]:
        """The vector a request already computed for each query (the last ``QUERY_VECTORS_KEPT``; a copy),
        else None — nothing is embedded."""
        known = self._query_vectors
        found = [known.get(q[:MAX_EMBED_CHARS]) for q in queries]
        return [None if v is None else v.copy() for v in found]

    async def embed_beside_requests(self, queries: list[str]) -> np.ndarray:
        """Unit vectors for work beside the requests (learning from use), never in their way: a text a
        request embedded is reused (the last ``QUERY_VECTORS_KEPT``: one embedding per request), the
        rest are embedded one at a time in a lane of their own — outside the requests' batches and
        deadlines, and outside the circuit breaker (a slow or failing call here never sends a request
        to BM25). Raises EmbeddingServiceError on any failure (the caller skips that work)."""
        service, kept = self.embedding_service, self._vectors
        if service is None or kept is None:
            raise EmbeddingServiceError("this index has no embedding service")
        texts = [q[:MAX_EMBED_CHARS] for q in queries]
        vectors, missing = self._kept_and_missing(texts)
        if missing:
            if self._beside_lane is None:
                self._beside_lane = asyncio.Lock()
            encoder, dims = query_encoder(service), kept.shape[1]
            for text in missing:
                async with self._beside_lane:  # one at a time: requests' own calls always come first
                    vector = await embed_texts(
                        encoder, [with_english_gloss(text)[:MAX_EMBED_CHARS]], timeout=self.circuit.timeout_seconds
                    )
                vectors[text] = _of_dims(vector, dims)[0]
        return np.stack([vectors[t] for t in texts]) if texts else np.zeros((0, kept.shape[1]), np.float32)

    async def _embed_batch(self, texts: list[str]) -> np.ndarray:
        """One service call for the queries of every request waiting in the batcher, through the
        circuit (its timeout bounds the call, not the time requests spent queued before it)."""
        service, vectors = self.embedding_service, self._vectors
        if service is None or vectors is None:
            raise EmbeddingServiceError("this index has no embedding service")
        dims = vectors.shape[1]

        encoder = query_encoder(service)  # an asymmetric model embeds requests with its own encoder

        async def call(timeout: float) -> np.ndarray:
            return _of_dims(await embed_texts(encoder, texts, timeout=timeout), dims)

        return await self.circuit.call(call)

    async def small_talk_vectors(self) -> SmallTalkVectors | None:
        """What small talk is judged against (once per index): the
        :data:`~sk_toolfilter.retrieval.small_talk.SMALL_TALK` descriptions embedded like tools and, when
        ready, the exemplars embedded like requests. They are precomputed for the shipped request
        encoders and used where this CPU computes them alike (a probe of 16 texts); another model, or a
        CPU whose int8 arithmetic matches no shipped set, embeds them once in the background (through the
        disk cache when the service has one) and the descriptions alone judge until then
        (:meth:`small_talk_ready` waits).
        None without embeddings or when the service fails (then no request is judged small talk)."""
        if self._small_talk is None and self.embedding_service is not None and self._vectors is not None:
            async with self._small_talk_lock:  # concurrent first requests embed the descriptions once
                if self._small_talk is None:
                    self._small_talk = await self._first_small_talk_vectors(self._vectors.shape[1])
        task = self._exemplar_task
        if self._small_talk is not None and self._small_talk.no_tool is None and task is not None and task.done():
            exemplars = None if task.cancelled() or task.exception() is not None else task.result()
            if exemplars is not None:
                no_tool, tool_request = exemplars
                self._small_talk = dataclasses.replace(self._small_talk, no_tool=no_tool, tool_request=tool_request)
        return self._small_talk

    async def aclose(self) -> None:
        """Stop embedding the small-talk exemplars if that is still running, and wait until it has stopped."""
        task = self._exemplar_task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task})

    async def small_talk_ready(self) -> SmallTalkVectors | None:
        """:meth:`small_talk_vectors` once the exemplars are embedded too (or have failed)."""
        vectors = await self.small_talk_vectors()
        if vectors is None or self._exemplar_task is None:
            return vectors
        await asyncio.wait({self._exemplar_task})
        return await self.small_talk_vectors()

    async def _first_small_talk_vectors(self, dims: int) -> SmallTalkVectors | None:
        assert self.embedding_service is not None
        service = self.embedding_service
        vectors = await self._embed_small(service, list(SMALL_TALK), "small-talk descriptions")
        if vectors is None or vectors.shape[1] != dims:
            return None
        encoder = query_encoder(service)
        shipped = await self._shipped_exemplars(encoder, dims)
        if shipped is not None:
            return SmallTalkVectors(vectors, *_split_exemplars(shipped))
        self._exemplar_task = asyncio.create_task(self._embed_exemplars(encoder, dims, vectors))
        return SmallTalkVectors(vectors)

    async def _shipped_exemplars(self, encoder: EmbeddingService, dims: int) -> np.ndarray | None:
        """The shipped exemplar vectors this CPU computes alike (checked on the probe texts: see
        :mod:`~sk_toolfilter.retrieval.numerics`), or None: none shipped for this model, or none agrees
        (then they are embedded here like another model's)."""
        model_id = embedding_model_id(encoder)
        variants = self._shipped_variants(model_id, dims)
        if not variants:
            return None

        here = await self._embed_small(encoder, list(PROBE_TEXTS), "small-talk probe")
        if here is None:
            return None
        tag = matching_variant(variants, here)
        if tag is None:
            logger.info(
                "sk-toolfilter: this CPU's int8 arithmetic differs from every shipped small-talk vector set of %s "
                "(worst probe cosine %.3f, %.3f needed): embedding the exemplars here, in the background",
                model_id,
                worst_probe_agreement(variants, here),
                AGREEMENT,
            )
            return None
        return variants[tag]

    async def _embed_small(self, service: EmbeddingService, texts: list[str], what: str) -> np.ndarray | None:
        """A few texts embedded through the circuit breaker, or None when the service fails (said at debug)."""

        async def call(timeout: float) -> np.ndarray:
            return await embed_texts(service, texts, timeout=timeout)

        try:
            return await self.circuit.call(call)
        except EmbeddingServiceError as exc:
            logger.debug("sk-toolfilter: %s not embedded (%s)", what, exc)
            return None

    async def _embed_exemplars(
        self, encoder: EmbeddingService, dims: int, descriptions: np.ndarray
    ) -> tuple[CatalogVectors, CatalogVectors] | None:
        """The exemplars embedded by `encoder` (a model without shipped vectors), or None when it fails;
        kept with the `descriptions` in the :attr:`small_talk_store` when there is one."""

        async def call(timeout: float) -> np.ndarray:
            return await embed_texts(encoder, load_exemplars().texts, batch_size=EXEMPLAR_BATCH, timeout=timeout)

        try:
            vectors = await self.circuit.call(call)
        except EmbeddingServiceError as exc:
            logger.debug("sk-toolfilter: small-talk exemplars not embedded; descriptions alone judge (%s)", exc)
            return None
        if vectors.shape[1] != dims:
            return None
        store, service = self.small_talk_store, self.embedding_service
        if store is not None and service is not None:
            both = np.vstack([descriptions, vectors]).astype(np.float32)
            await store.save_small_talk(embedding_model_id(service), small_talk_key(), both)
        return _split_exemplars(vectors)

    def cosine_scores(self, query_vector: np.ndarray) -> np.ndarray:
        """Cosine similarity of every tool to a unit query vector (rows are unit vectors).

        Computed row by row (``np.vecdot``, or SimSIMD's int8 dot products at ``precision: int8``),
        not as ``embeddings @ q``: a matrix-vector product goes through the BLAS thread pool, whose
        workers must be woken and scheduled for every query. In a busy process (the local model's
        inference threads, an app server's) that wait was 6–8 ms for a 0.1 ms product; the row-wise
        kernels never wait, give the same scores whatever the BLAS thread count, and change no
        process-wide setting.
        """
        assert self._vectors is not None
        return self._vectors.scores(query_vector)

    def cosine_scores_many(self, query_vectors: np.ndarray) -> np.ndarray:
        """:meth:`cosine_scores` of each row of `query_vectors` (the same floats), one row per query: at
        int8 the catalog is read once for all of them."""
        assert self._vectors is not None
        return self._vectors.scores_many(query_vectors)


def embedding_texts(tools: Iterable[ToolMetadata]) -> list[str]:
    """The text embedded for each tool (its :meth:`~ToolMetadata.embedding_text`, cut to a bound)."""
    return [t.embedding_text()[:MAX_EMBED_CHARS] for t in tools]


async def embed_catalog(
    service: EmbeddingService,
    texts: list[str],
    *,
    cache: EmbeddingCache | None = None,
    batch_size: int = 64,
    progress: ProgressCallback | None = None,
    known: dict[str, np.ndarray] | None = None,
    timeout: float | None = None,
) -> tuple[np.ndarray, int]:
    """Embed tool texts in batches, reusing `known` vectors and the cache, filling the cache.

    Returns the float32 vectors (one row per text) and how many texts the service embedded.
    """
    model_id = embedding_model_id(service)
    known = known or {}
    cached: list[np.ndarray | None] = [known.get(t) for t in texts]
    if cache is not None and any(v is None for v in cached):
        from_disk = cache.get(model_id, texts)
        cached = [v if v is not None else d for v, d in zip(cached, from_disk, strict=True)]
    missing = [i for i, vector in enumerate(cached) if vector is None]
    started = time.perf_counter()
    fresh: list[np.ndarray] = []
    try:
        for start in range(0, len(missing), batch_size):
            batch = [texts[i] for i in missing[start : start + batch_size]]
            # A query embeds a few texts; a catalog call embeds up to batch_size: the timeout scales.
            call_timeout = catalog_call_timeout(timeout, len(batch))
            fresh.append(await embed_texts(service, batch, batch_size, timeout=call_timeout))
            if progress is not None:
                progress(min(start + batch_size, len(missing)), len(missing))
    except EmbeddingServiceError:
        if cache is not None and fresh:  # what was built is kept: a retry sends only the rest
            done = sum(len(f) for f in fresh)
            cache.put(model_id, [texts[i] for i in missing[:done]], np.concatenate(fresh))
        raise
    dims = {v.shape[0] for v in cached if v is not None} | {f.shape[1] for f in fresh}
    if len(dims) > 1:
        raise EmbeddingServiceError(f"embedding service returned vectors of different sizes: {sorted(dims)}")
    if fresh:
        new_vectors = np.concatenate(fresh)
        if cache is not None:
            cache.put(model_id, [texts[i] for i in missing], new_vectors)
        for row, i in enumerate(missing):
            cached[i] = new_vectors[row]
        logger.info(
            "embedded %d of %d tools with %s in %.1fs",
            len(missing),
            len(texts),
            model_id,
            time.perf_counter() - started,
        )
    return np.stack(cached).astype(np.float32), len(missing)  # type: ignore[arg-type]


def known_vectors(
    texts: list[str], known: dict[str, np.ndarray], cache: EmbeddingCache | None, service: EmbeddingService
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Vectors for `texts` from `known` and the cache only; zero rows (and a mask) where there is none."""
    vectors: list[np.ndarray | None] = [known.get(t) for t in texts]
    if cache is not None and any(v is None for v in vectors):
        from_disk = cache.get(embedding_model_id(service), texts)
        vectors = [v if v is not None else d for v, d in zip(vectors, from_disk, strict=True)]
    dims = {v.shape[0] for v in vectors if v is not None}
    if not dims:  # nothing known: no vectors at all, every tool waits for one
        return None, np.ones(len(texts), dtype=bool)
    if len(dims) != 1:
        return None, None
    (size,) = dims
    zero = np.zeros(size, dtype=np.float32)
    missing = np.array([v is None for v in vectors], dtype=bool)
    return np.stack([zero if v is None else v for v in vectors]).astype(np.float32), missing


EXEMPLAR_BATCH = 256
"""Exemplars per service call when a model without shipped vectors embeds them (a few calls, not 50)."""


def _split_exemplars(vectors: np.ndarray) -> tuple[CatalogVectors, CatalogVectors]:
    """The exemplars' vectors as (no-tool utterances, tool requests), each scored row by row at int8
    (~4x faster than float32 over 3,136 rows; scores move by ~1e-3 against margins of 0.05 and 0.10)."""
    split = len(load_exemplars().no_tool)
    return CatalogVectors(vectors[:split], "int8"), CatalogVectors(vectors[split:], "int8")


def _of_dims(vectors: np.ndarray, dims: int) -> np.ndarray:
    """`vectors` when they have the index's `dims`; else EmbeddingServiceError naming both."""
    if vectors.shape[1] != dims:
        raise EmbeddingServiceError(
            f"query embedding has {vectors.shape[1]} dimensions, tool embeddings have {dims}: "
            "the embedding model changed since the index was built"
        )
    return vectors
