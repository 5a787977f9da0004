"""``tool_filtering.embedding``: the embedding service, its cache, its failures."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from sk_toolfilter.config.base import RememberedSecret, StrictConfig


class EmbeddingConfig(StrictConfig):
    """Which embedding service turns tool descriptions and queries into vectors.

    ``provider``: ``local`` (a bundled offline ONNX model: ``model`` names it, default the
    tool-retrieval model ``minilm-l6-tools-v1``; ``all-MiniLM-L6-v2-int8`` is the general one), ``openai``,
    ``azure_openai`` or ``none`` (BM25 only). Left unset, it is ``openai`` when an ``api_key``
    is configured and ``local`` otherwise.
    """

    provider: Literal["local", "openai", "azure_openai", "none"] | None = Field(
        default=None,
        description="local (a bundled offline ONNX model), openai, azure_openai or none (BM25 only). Unset: openai "
        "when an api_key is configured, else local.",
    )
    model: str | None = Field(
        default=None,
        description="Model or deployment name. Local: minilm-l6-tools-v1 (default), minilm-l2-tools-v1 (the same "
        "with a 2.5x faster request encoder), all-MiniLM-L6-v2-int8, or a folder with a model.json "
        "(built with training/).",
    )
    api_key: RememberedSecret | None = Field(
        default=None, description="Embedding service key; use ${VAR} in an agent file, never a literal."
    )
    base_url: str | None = Field(default=None, description="OpenAI-compatible server URL.")
    endpoint: str | None = Field(default=None, description="Azure OpenAI endpoint.")
    api_version: str | None = Field(default=None, description="Azure OpenAI API version.")
    dimensions: int | None = Field(
        default=None,
        gt=0,
        description="Vector size asked of OpenAI / Azure OpenAI (and checked on every answer); local models have 384.",
    )
    precision: Literal["float32", "int8"] = Field(
        default="int8",
        description="How tool vectors are held and scored: int8 (default: 392 bytes per 384-d tool, 3-4x "
        "faster on large catalogs, recall@5 unchanged on the four dev sets) or float32 (exact, 1,536 bytes).",
    )
    batch_size: int = Field(default=64, gt=0, le=2048, description="Tool texts per embedding call when indexing.")
    cache: bool = Field(default=True, description="Reuse tool embeddings across runs (on disk).")
    background_above: int | None = Field(
        default=500,
        ge=0,
        description="Instant start: when more tools than this have no vector yet (none cached), the agent answers "
        "at once with BM25 while they are embedded in the background, and switches to the configured method when "
        "all are ready (ToolFilterManager.vectors_ready). null: always wait for the vectors.",
    )
    timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        description="Query-embedding timeout; then BM25. At build time a call of n texts may take "
        "timeout_seconds x ceil(n / 8).",
    )
    on_failure: Literal["error", "bm25"] = Field(
        default="error",
        description="When the service fails while the catalog is first indexed (a damaged local model file, an "
        "unreachable API): 'error' stops with EmbeddingServiceError; 'bm25' logs one warning, ranks with BM25 and "
        "embeds the tools once the service answers (after cooldown_seconds).",
    )
    failure_threshold: int = Field(default=3, ge=1, description="Consecutive failures that open the circuit.")
    cooldown_seconds: float = Field(default=30.0, ge=0, description="How long an open circuit skips the service.")
    cache_dir: str | None = Field(
        default=None,
        description="Default: $SK_TOOLFILTER_CACHE or ~/.cache/sk-toolfilter. '~' is expanded; in an agent file a "
        "relative folder is relative to the file. Unwritable: a warning, and the run goes on without the cache.",
    )

    @property
    def resolved_provider(self) -> str:
        if self.provider is not None:
            return self.provider
        return "openai" if self.api_key is not None else "local"
