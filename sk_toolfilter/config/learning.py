"""``tool_filtering.learning``: learning from use — what similar past requests called moves up."""

from __future__ import annotations

from pydantic import Field

from sk_toolfilter.config.base import StrictConfig


class LearningConfig(StrictConfig):
    """Learning from use (:mod:`sk_toolfilter.retrieval.memory`): every completed turn is remembered as
    (the request's vector, the tools called) — never its text — and a new request's shortlist is
    reordered by what similar past requests called, weighted by how far that held on this agent's own
    traffic. Only the order changes: how many tools are sent stays what the first stage's scores say.

    Off: nothing is stored or read. The memory lives in this process unless ``file`` (or
    ``index.store: postgres``) keeps it.

    Who steers whom: with ``scope: shared`` (the default) every request of the catalog reads what
    every user's requests taught; name a kernel or run argument instead (``scope: tenant_id``) and a
    request reads only its own scope's rows. Either way a tool moves or enters only on the evidence
    of ``min_conversations`` distinct conversations, each weighing what its nearest turn does.
    """

    enabled: bool = Field(default=True, description="Learn from completed turns and use what was learned.")
    max_requests: int = Field(
        default=20_000, ge=1, le=1_000_000, description="Past requests remembered (the oldest leave first)."
    )
    max_megabytes: float = Field(
        default=64.0, gt=0.0, le=4096.0, description="Memory bound of what is remembered (vectors and tool names)."
    )
    max_age_days: float | None = Field(
        default=180.0, gt=0.0, description="Past requests older than this are forgotten (null: kept until evicted)."
    )
    half_life_days: float | None = Field(
        default=30.0, gt=0.0, description="A past request's weight halves every this many days (null: no decay)."
    )
    file: str | None = Field(
        default=None,
        description="File (.npz) that keeps what was learned across restarts: vectors, tool names and one "
        "fingerprint per request, no text. '~' is expanded; in an agent file a relative path is relative to the file.",
    )
    scope: str = Field(
        default="shared",
        min_length=1,
        max_length=128,
        description="'shared': one memory for every request of the catalog; otherwise the name of the kernel or "
        "run argument (or learning_context(scope=...)) whose value scopes it, e.g. 'tenant_id' or 'user_id': a "
        "request reads only what its own scope's requests taught. A scoped request without a value learns and "
        "reads nothing.",
    )
    min_conversations: int = Field(
        default=2,
        ge=2,
        le=100,
        description="Distinct conversations whose similar requests must have called a tool before it moves or "
        "enters (one conversation is never enough: a single injected call cannot steer other users).",
    )
    catalog: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The catalog identity learning is kept under (the file's header, the fingerprints). Unset: "
        "index.catalog when you set it, else 'default' — the same tools configured in code and in an agent file "
        "read and write the same learning. A file or table of another catalog or model is never overwritten.",
    )
    read_only: bool = Field(
        default=False,
        description="Read what the file or table keeps, never write it (nothing learned here is stored). The "
        "CLI's inspecting commands (search, explain, learned, eval without --learn) run this way.",
    )
    sync_seconds: float = Field(
        default=30.0,
        ge=0.0,
        le=3600.0,
        description="How often what was learned is written to the file (and, with index.store: postgres, shared "
        "with the other replicas).",
    )
