"""Semantic Kernel embedding services: the offline default model, a cache in front of any service,
and building one from configuration.

These are SK ``EmbeddingGeneratorBase`` services (what SK users pass and SK's vector stores take).
The index itself only needs the :class:`~sk_toolfilter.retrieval.encoders.EmbeddingService`
protocol (:mod:`sk_toolfilter.retrieval.encoders`), which every one of them satisfies.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import PrivateAttr, ValidationError
from semantic_kernel.connectors.ai.embedding_generator_base import EmbeddingGeneratorBase

from sk_toolfilter._compat import moved_attributes
from sk_toolfilter.basics.errors import ConfigError, ToolFilterError
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.config import EmbeddingConfig
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.encoders import (
    OnnxEncoder,
    embedding_model_id,
    optional_attribute,
)
from sk_toolfilter.retrieval.local_models import DEFAULT_MODEL_ID, resolve_local_model

if TYPE_CHECKING:
    from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings

logger = library_logger(__name__)

LOCAL_MODEL_ID = DEFAULT_MODEL_ID


def _ours(error: Any) -> bool:
    return isinstance(error.get("ctx", {}).get("error"), ToolFilterError)


class LocalEmbeddingGenerator(EmbeddingGeneratorBase):
    """An offline model (384 dimensions) run with onnxruntime. ``model`` names it (see
    :mod:`sk_toolfilter.retrieval.local_models`): the tool-retrieval model by default,
    ``all-MiniLM-L6-v2-int8`` for the general-purpose one, or a folder with a ``model.json``.

    The tool-retrieval model is asymmetric: tools (documents) are embedded by the general model and
    requests by its own encoder, trained to land next to the tools they need; ``query_encoder`` is
    that side (``None`` for a symmetric model). Every file's sha256 is checked on first use; a
    missing or damaged file raises EmbeddingServiceError.
    """

    dimensions: ClassVar[int] = 384
    model: str | None = None
    ai_model_id: str = LOCAL_MODEL_ID
    max_length: int = 256
    batch_size: int = 1
    """Texts per ONNX run. 1: every text alone, the fastest and the smallest in memory on CPU (see
    :class:`~sk_toolfilter.retrieval.encoders.OnnxEncoder`), and a tool's vector depends on its text only."""
    _documents: OnnxEncoder = PrivateAttr()
    _queries: OnnxEncoder | None = PrivateAttr(default=None)
    _query_service: LocalQueryEncoder | None = PrivateAttr(default=None)
    _hybrid_weights: dict[str, float] | None = PrivateAttr(default=None)
    _loop_hybrid_weights: dict[str, float] | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            # pydantic wraps the library's own errors (a ConfigError is a ValueError): give them back.
            raise next((e["ctx"]["error"] for e in exc.errors() if _ours(e)), exc) from None

    def model_post_init(self, __context: Any) -> None:
        super().model_post_init(__context)
        files = resolve_local_model(self.model)  # ConfigError for a name that is no model
        document_files = resolve_local_model(files.documents) if files.documents else files
        for f in (files, document_files):
            if f.dimensions != self.dimensions:
                raise ConfigError(
                    f"{f.manifest or f.id}: dimensions: {f.dimensions}, but local models have {self.dimensions} "
                    "(tool_filtering.embedding.model)"
                )
        # Caches and shared indexes are keyed by it: tool vectors by the model that embeds tools (request
        # encoders sharing a tool side share them), request vectors by the request encoder.
        self.ai_model_id = document_files.id
        self._hybrid_weights = files.hybrid_weights
        self._loop_hybrid_weights = files.loop_hybrid_weights
        options = {"max_length": self.max_length, "batch_size": self.batch_size}
        self._documents = OnnxEncoder(document_files, **options)
        if files.documents:
            self._queries = OnnxEncoder(files, **options)
            self._query_service = LocalQueryEncoder(ai_model_id=f"{files.id}:query", encoder=self._queries)

    @property
    def query_encoder(self) -> LocalQueryEncoder:
        """The service that embeds requests: an asymmetric model's request encoder, or (one model for both)
        the same encoder, each request embedded alone (see :meth:`OnnxEncoder.embed`)."""
        if self._queries is None and (
            self._query_service is None or self._query_service.ai_model_id != self.ai_model_id
        ):
            # one model for both: keyed like the documents (read when asked: a caller may rename the model)
            self._query_service = LocalQueryEncoder(ai_model_id=self.ai_model_id, encoder=self._documents)
        assert self._query_service is not None
        return self._query_service

    @property
    def hybrid_weights(self) -> dict[str, float] | None:
        """The BM25 / semantic blend fitted for this model (its ``model.json``), or None."""
        return self._hybrid_weights

    @property
    def loop_hybrid_weights(self) -> dict[str, float] | None:
        """The blend chosen for this model inside agent-loop turns (its ``model.json``), or None."""
        return self._loop_hybrid_weights

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        """Embed documents (tool texts, passages) in the calling thread; rows are unit float32 vectors."""
        if self._queries is not None:
            self._queries.load()  # every file is checked at first use, not only the tools' encoder
        return self._documents.embed(texts)

    def embed_queries_sync(self, texts: list[str]) -> np.ndarray:
        """Embed requests in the calling thread (the query encoder of an asymmetric model)."""
        return (self._queries or self._documents).embed(texts, alone=True)

    async def generate_embeddings(
        self, texts: list[str], settings: PromptExecutionSettings | None = None, **kwargs: Any
    ) -> np.ndarray:
        return await asyncio.to_thread(self.embed_sync, list(texts))


INLINE_QUERY_CHARS = 2_000
"""A request's texts up to this many characters embed in the calling thread once the model is loaded:
a few milliseconds with the default request encoder (about one with ``minilm-l2-tools-v1``), where
handing the work to a worker thread and waking the event loop again adds 0.1–0.3 ms (more on a busy
machine). Longer batches, and the
first call (which checks and loads the files), run in a worker thread so the event loop is not held."""


REQUEST_TEXTS = 32
"""A call of at most this many texts is a request's (its text, its parts and the needs it lists: at most
17), and each text is embedded alone; a larger call is bulk work (the small-talk exemplars) and runs in
batches."""


class LocalQueryEncoder(EmbeddingGeneratorBase):
    """The request side of a local model (see :attr:`LocalEmbeddingGenerator.query_encoder`): each request
    text is embedded alone, so its vector never depends on what else was embedded with it
    (:data:`REQUEST_TEXTS`)."""

    dimensions: ClassVar[int] = 384
    encoder: Any

    async def generate_embeddings(
        self, texts: list[str], settings: PromptExecutionSettings | None = None, **kwargs: Any
    ) -> np.ndarray:
        texts = list(texts)
        alone = len(texts) <= REQUEST_TEXTS
        if self.encoder.loaded and sum(len(t) for t in texts) <= INLINE_QUERY_CHARS:
            return self.encoder.embed(texts, alone=alone)
        return await asyncio.to_thread(self.encoder.embed, texts, alone=alone)


class SizedEmbeddings(EmbeddingGeneratorBase):
    """An OpenAI / Azure OpenAI embedding service asked for `dimensions`-long vectors on every call
    (text-embedding-3 models shorten their vectors server-side). Its ``ai_model_id`` names the size,
    so cached vectors of another size are never reused."""

    inner: EmbeddingGeneratorBase
    dimensions: int

    async def generate_embeddings(
        self, texts: list[str], settings: PromptExecutionSettings | None = None, **kwargs: Any
    ) -> np.ndarray:
        from semantic_kernel.connectors.ai.open_ai import OpenAIEmbeddingPromptExecutionSettings

        sized = OpenAIEmbeddingPromptExecutionSettings(dimensions=self.dimensions)
        return await self.inner.generate_embeddings(texts, settings=sized, **kwargs)


def create_embedding_service(config: EmbeddingConfig) -> EmbeddingGeneratorBase | None:
    """The embedding service an ``embedding:`` block describes (``None`` for ``provider: none``).

    ``dimensions`` is sent with every OpenAI / Azure OpenAI request (and checked on every answer);
    the local model has 384 dimensions and refuses any other number.
    """
    service = _create_embedding_service(config)
    if config.dimensions is None or service is None:
        return service
    if isinstance(service, LocalEmbeddingGenerator):
        if config.dimensions != service.dimensions:
            raise ConfigError(
                f"tool_filtering.embedding.dimensions: the local model has {service.dimensions} dimensions, "
                f"not {config.dimensions}"
            )
        return service
    return SizedEmbeddings(
        ai_model_id=f"{embedding_model_id(service)}@{config.dimensions}", inner=service, dimensions=config.dimensions
    )


def _create_embedding_service(config: EmbeddingConfig) -> EmbeddingGeneratorBase | None:
    provider = config.resolved_provider
    if provider == "none":
        return None
    if provider == "local":
        resolve_local_model(config.model)  # a name that is no model: ConfigError here, not pydantic's wrapper
        return LocalEmbeddingGenerator(model=config.model)
    api_key = config.api_key.get_secret_value() if config.api_key else None
    if provider == "openai":
        from openai import AsyncOpenAI
        from semantic_kernel.connectors.ai.open_ai import OpenAITextEmbedding

        model = config.model or "text-embedding-3-small"
        if api_key is None and config.base_url is None:
            raise ConfigError("tool_filtering.embedding.api_key: required for provider 'openai'")
        client = AsyncOpenAI(api_key=api_key or "not-needed", base_url=config.base_url)
        return OpenAITextEmbedding(ai_model_id=model, async_client=client)
    if provider == "azure_openai":
        from semantic_kernel.connectors.ai.open_ai import AzureTextEmbedding

        if not config.endpoint or not config.model:
            raise ConfigError(
                "tool_filtering.embedding: provider 'azure_openai' needs 'endpoint' and 'model' (the deployment name)"
            )
        return AzureTextEmbedding(
            deployment_name=config.model,
            endpoint=config.endpoint,
            api_key=api_key,
            api_version=config.api_version,
        )
    raise ConfigError(f"tool_filtering.embedding.provider: unknown provider {provider!r}")


class CachedEmbeddings(EmbeddingGeneratorBase):
    """Any embedding service behind the on-disk cache: a text embedded once is never embedded again.

    For evaluation runs, where the same queries are embedded for every method and every run.
    """

    inner: EmbeddingGeneratorBase
    cache: Any
    _query_service: CachedEmbeddings | None = PrivateAttr(default=None)

    async def generate_embeddings(self, texts: list[str], settings: Any = None, **kwargs: Any) -> np.ndarray:
        model_id = str(getattr(self.inner, "ai_model_id", None) or type(self.inner).__name__)
        found = self.cache.get(model_id, texts)
        missing = [i for i, v in enumerate(found) if v is None]
        if missing:
            fresh = np.asarray(await self.inner.generate_embeddings([texts[i] for i in missing], settings, **kwargs))
            self.cache.put(model_id, [texts[i] for i in missing], fresh)
            for row, i in enumerate(missing):
                found[i] = fresh[row]
        return np.stack(found) if found else np.zeros((0, 0), dtype=np.float32)

    @property
    def query_encoder(self) -> CachedEmbeddings | None:
        """The inner service's request encoder behind the same cache (keyed by its own model id)."""
        inner = optional_attribute(self.inner, "query_encoder")
        if inner is not None and self._query_service is None:
            self._query_service = cached(inner, self.cache)  # built once, not per query batch
        return None if inner is None else self._query_service


def runs_here(service: object) -> bool:
    """Whether `service` (or the service it wraps) computes on this CPU: a local model, whose int8
    arithmetic differs by CPU (a remote service computes alike for every caller)."""
    while service is not None:
        if isinstance(service, (LocalEmbeddingGenerator, LocalQueryEncoder)):
            return True
        service = getattr(service, "inner", None)
    return False


def cached(service: EmbeddingGeneratorBase, cache: EmbeddingCache) -> CachedEmbeddings:
    """`service` behind `cache`, keeping the service's model id (so cache keys stay the same)."""
    return CachedEmbeddings(inner=service, cache=cache, ai_model_id=getattr(service, "ai_model_id", None) or "")


__getattr__ = moved_attributes(__name__)
