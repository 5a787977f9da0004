"""Embedding services: the offline default model, and building one from configuration."""

from __future__ import annotations

import asyncio
import math
import threading
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import PrivateAttr
from semantic_kernel.connectors.ai.embedding_generator_base import EmbeddingGeneratorBase

from sk_toolfilter.config import EmbeddingConfig
from sk_toolfilter.errors import ConfigError, EmbeddingServiceError
from sk_toolfilter.redaction import library_logger
from sk_toolfilter.retrieval.local_models import DEFAULT_MODEL_ID, LocalModel, resolve_local_model, sha256_of
from sk_toolfilter.retrieval.text import clean_text

if TYPE_CHECKING:
    from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings

logger = library_logger(__name__)

LOCAL_MODEL_ID = DEFAULT_MODEL_ID


class OnnxEncoder:
    """One ONNX encoder and its tokenizer, loaded on first use after every file's sha256 is checked.

    Vectors are mean-pooled over real tokens (attention mask) and L2-normalized, like
    sentence-transformers. Raises EmbeddingServiceError for a missing, damaged or unloadable file.
    """

    def __init__(self, files: LocalModel, *, max_length: int = 256, batch_size: int = 32) -> None:
        self.files, self.max_length, self.batch_size = files, max_length, batch_size
        self._session: Any = None
        self._tokenizer: Any = None
        self._lock = threading.Lock()  # guards loading; onnxruntime sessions run concurrently

    def load(self) -> None:
        """Check and load the files (once); EmbeddingServiceError when one is missing or damaged."""
        with self._lock:
            if self._session is None:
                self._load_files()

    def _load_files(self) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        files = self.files
        for path, expected in files.checked_files():
            if not path.is_file():
                raise EmbeddingServiceError(
                    f"local embedding model {files.id!r}: file missing: {path} (reinstall sk-toolfilter, or choose "
                    f"another embedding.model)"
                )
            if sha256_of(path) != expected:
                raise EmbeddingServiceError(
                    f"local embedding model {files.id!r}: {path} is damaged or was replaced (its sha256 is not "
                    f"{expected[:12]}…); reinstall sk-toolfilter, or choose another embedding.model"
                )
        try:
            tokenizer = Tokenizer.from_file(str(files.tokenizer_file))
            # Pad per batch (faster than the file's fixed 128), and mean-pool with the attention mask
            # so padding never changes a vector.
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            tokenizer.enable_truncation(max_length=min(self.max_length, files.max_length))
            options = ort.SessionOptions()
            options.log_severity_level = 3
            session = ort.InferenceSession(
                str(files.model_file), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # a manifest pointing at files that are no model or tokenizer
            raise EmbeddingServiceError(
                f"local embedding model {files.id!r} could not be loaded ({type(exc).__name__})"
            ) from None
        self._session, self._tokenizer = session, tokenizer

    def embed(self, texts: list[str]) -> np.ndarray:
        """Rows of L2-normalized float32 vectors, one per text, computed in the calling thread."""
        self.load()
        out = np.zeros((len(texts), self.files.dimensions), dtype=np.float32)
        # Sorting by length keeps padding small inside each batch.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            encodings = self._tokenizer.encode_batch([texts[i] or " " for i in idx])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            hidden = self._session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[idx] = pooled
        return out


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
    batch_size: int = 32
    _documents: OnnxEncoder = PrivateAttr()
    _queries: OnnxEncoder | None = PrivateAttr(default=None)
    _query_service: LocalQueryEncoder | None = PrivateAttr(default=None)
    _hybrid_weights: dict[str, float] | None = PrivateAttr(default=None)

    def model_post_init(self, __context: Any) -> None:
        super().model_post_init(__context)
        files = resolve_local_model(self.model)  # ConfigError for a name that is no model
        document_files = resolve_local_model(files.documents) if files.documents else files
        for f in (files, document_files):
            if f.dimensions != self.dimensions:
                raise ConfigError(
                    f"tool_filtering.embedding.model: {f.id} has {f.dimensions} dimensions; "
                    f"local models must have {self.dimensions}"
                )
        self.ai_model_id = files.id  # caches are keyed by it: switching models never mixes vectors
        self._hybrid_weights = files.hybrid_weights
        options = {"max_length": self.max_length, "batch_size": self.batch_size}
        self._documents = OnnxEncoder(document_files, **options)
        if files.documents:
            self._queries = OnnxEncoder(files, **options)
            self._query_service = LocalQueryEncoder(ai_model_id=f"{self.ai_model_id}:query", encoder=self._queries)

    @property
    def query_encoder(self) -> LocalQueryEncoder | None:
        """The service that embeds requests (an asymmetric model), or ``None`` (the same as documents)."""
        return self._query_service

    @property
    def hybrid_weights(self) -> dict[str, float] | None:
        """The BM25 / semantic blend fitted for this model (its ``model.json``), or None."""
        return self._hybrid_weights

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        """Embed documents (tool texts, passages) in the calling thread; rows are unit float32 vectors."""
        if self._queries is not None:
            self._queries.load()  # every file is checked at first use, not only the tools' encoder
        return self._documents.embed(texts)

    def embed_queries_sync(self, texts: list[str]) -> np.ndarray:
        """Embed requests in the calling thread (the query encoder of an asymmetric model)."""
        return (self._queries or self._documents).embed(texts)

    async def generate_embeddings(
        self, texts: list[str], settings: PromptExecutionSettings | None = None, **kwargs: Any
    ) -> np.ndarray:
        return await asyncio.to_thread(self.embed_sync, list(texts))


class LocalQueryEncoder(EmbeddingGeneratorBase):
    """The request side of an asymmetric local model (see :attr:`LocalEmbeddingGenerator.query_encoder`)."""

    dimensions: ClassVar[int] = 384
    encoder: Any

    async def generate_embeddings(
        self, texts: list[str], settings: PromptExecutionSettings | None = None, **kwargs: Any
    ) -> np.ndarray:
        return await asyncio.to_thread(self.encoder.embed, list(texts))


def query_encoder(service: EmbeddingGeneratorBase) -> EmbeddingGeneratorBase:
    """The service that embeds requests for `service`'s documents: its ``query_encoder`` when it has
    one (an asymmetric model, or a wrapper of one), else `service` itself."""
    return getattr(service, "query_encoder", None) or service


def fitted_weights(service: EmbeddingGeneratorBase | None) -> dict[str, float] | None:
    """The hybrid blend fitted for `service`'s model (a local model's, through any wrapper), or None."""
    while service is not None:
        weights = getattr(service, "hybrid_weights", None)
        if weights is not None:
            return dict(weights)
        service = getattr(service, "inner", None)
    return None


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
        return LocalEmbeddingGenerator(model=config.model, batch_size=min(config.batch_size, 64))
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


def embedding_model_id(service: EmbeddingGeneratorBase) -> str:
    """A stable id of the model behind a service (for caches and reports)."""
    return str(getattr(service, "ai_model_id", None) or type(service).__name__)


TEXTS_PER_TIMEOUT = 8
"""A catalog call of n texts may take ``timeout_seconds × ⌈n / 8⌉`` (a query embeds a few)."""


def catalog_call_timeout(timeout: float | None, n_texts: int) -> float | None:
    """The bound on one embedding call of `n_texts` catalog texts, given the per-query `timeout`."""
    return None if timeout is None else timeout * math.ceil(n_texts / TEXTS_PER_TIMEOUT)


async def embed_texts(
    service: EmbeddingGeneratorBase, texts: list[str], batch_size: int = 64, *, timeout: float | None = None
) -> np.ndarray:
    """Embed texts in batches; validate shape and values; return L2-normalized float32 rows.

    Every text is cleaned first (:func:`clean_text`); each service call is bounded by `timeout`.
    Raises EmbeddingServiceError naming the problem (service exception, timeout, non-numeric,
    ragged or wrongly shaped vectors, NaN/inf) — never another exception type.
    """
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    texts = [clean_text(t) for t in texts]
    expected_dims = getattr(service, "dimensions", None)
    parts: list[np.ndarray] = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        result = await _call_service(service, batch, timeout)
        try:
            array = np.asarray(result, dtype=np.float32)
        except (ValueError, TypeError) as exc:
            raise EmbeddingServiceError(
                f"embedding service {embedding_model_id(service)!r} returned non-numeric or ragged vectors ({exc})"
            ) from None
        if isinstance(expected_dims, int) and array.ndim == 2 and array.shape[1] != expected_dims:
            raise EmbeddingServiceError(
                f"embedding service {embedding_model_id(service)!r} returned {array.shape[1]}-dimensional vectors; "
                f"{expected_dims} were asked for"
            )
        if array.ndim != 2 or array.shape[0] != len(batch) or array.shape[1] == 0:
            raise EmbeddingServiceError(
                f"embedding service returned shape {array.shape} for {len(batch)} texts "
                f"(expected ({len(batch)}, dimensions))"
            )
        if parts and array.shape[1] != parts[0].shape[1]:
            raise EmbeddingServiceError(
                f"embedding service changed dimensions mid-run: {parts[0].shape[1]} then {array.shape[1]}"
            )
        if not np.isfinite(array).all():
            raise EmbeddingServiceError("embedding service returned NaN or infinite values")
        parts.append(array)
    vectors = np.concatenate(parts)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


async def _call_service(service: EmbeddingGeneratorBase, batch: list[str], timeout: float | None) -> Any:
    name = embedding_model_id(service)
    try:
        return await asyncio.wait_for(service.generate_embeddings(batch), timeout)
    except EmbeddingServiceError:
        raise
    except asyncio.TimeoutError:
        raise EmbeddingServiceError(f"embedding service {name!r} did not answer within {timeout:g}s") from None
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and getattr(task, "cancelling", lambda: 1)():
            raise  # this task is being cancelled: let it
        raise EmbeddingServiceError(f"embedding service {name!r} cancelled the request") from None
    except (KeyboardInterrupt, SystemExit):
        raise  # the process is being stopped: never contained
    except BaseException as exc:  # any failure of a third-party service, GeneratorExit and the like included
        raise EmbeddingServiceError(f"embedding service {name!r} failed: {type(exc).__name__}: {exc}") from exc
