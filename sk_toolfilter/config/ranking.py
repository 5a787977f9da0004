"""How tools are ranked beyond the search method: BM25, per-tool overrides, the second stage, discovery."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from sk_toolfilter.config.base import StrictConfig


class BM25Config(StrictConfig):
    """BM25 parameters. The defaults were tuned on the dev halves of the public benchmarks."""

    k1: float = Field(default=2.0, ge=0.0, le=10.0, description="Term-frequency saturation.")
    b: float = Field(default=0.5, ge=0.0, le=1.0, description="Length normalisation (0: none, 1: full).")
    name_boost: int = Field(default=3, ge=1, le=10, description="How many times the name counts.")
    stemming: bool = Field(default=True, description="Snowball stemming of tool and query words.")


class ToolOverride(StrictConfig):
    """Per-tool metadata and visibility, keyed by full name (``Plugin-function``) in ``tools_overrides``.

    ``enabled: false`` hides the tool everywhere (never sent, listed, pinned or executed);
    ``searchable: false`` keeps it callable when pinned but out of search and discovery.
    """

    enabled: bool = Field(default=True, description="false: the tool is hidden everywhere (never sent or run).")
    searchable: bool = Field(default=True, description="false: callable when pinned, but out of search and discovery.")
    always_include: bool = Field(default=False, description="Sent with every request.")
    category: str | None = Field(default=None, description="A category word added to the tool's indexed text.")
    tags: list[str] = Field(default_factory=list, description="Tags added to the tool's indexed text.")
    keywords: list[str] = Field(default_factory=list, description="Extra words and aliases to match.")
    destructive: bool | None = Field(
        default=None,
        description="true: the tool destroys or deletes (learning from use and co-usage may reorder it when the "
        "ranking sent it, never add it to a conversation on other conversations' requests alone). Unset: an MCP "
        "tool's destructiveHint, else a name with a delete, remove, purge, drop, destroy, erase, wipe, truncate, "
        "revoke, terminate, kill or uninstall verb.",
    )
    pinned_by: str | None = Field(
        default=None,
        description="Who pinned the tool when the file did not (load_agent sets it for a tool source's "
        "always_include and an MCP server's _meta load hint): named in explain and in the max_tools_total warning. "
        "Such pins are capped by max_tools_total at run time instead of failing the configuration.",
    )


class RerankConfig(StrictConfig):
    """The second stage, between the first-stage ranking and the cut. ``learned``: a ranker over the first
    stage's own evidence reorders the shortlist (no model call). ``cross-encoder``: a reranker
    (``rerank.model``: a folder; none ships) reads the request and each shortlisted tool together and
    reorders the shortlist (how many are sent stays the first stage's decision). ``llm``: the
    application's own chat model picks up to ``top_k`` tools from the shortlist (names and one-line
    descriptions only; never a tool outside it; any failure keeps the first stage's answer).
    ``rerank: llm`` is short for ``{type: llm}``."""

    type: Literal["none", "cross-encoder", "llm", "learned"] = Field(
        default="none",
        description="none: the first stage's order; cross-encoder: a reranker (rerank.model) reorders it; llm: the "
        "application's chat model picks from the shortlist; learned: a ranker trained over the first stage's own "
        "evidence reorders it (no model call).",
    )
    shortlist: int = Field(
        default=10,
        ge=2,
        le=100,
        description="How many of the first stage's best tools the second stage reads (cross-encoder: 10, chosen by "
        "leave-one-catalog-out; llm: 20 unless set, where the first stage's top 20 holds every needed tool for 90 % "
        "of requests on an unseen catalog; learned: 30 unless set, what it was trained on). Each more costs time "
        "(and, with llm, tokens).",
    )
    model: str | None = Field(
        default=None,
        description="cross-encoder: a folder with a reranker's model.json (required: none ships); learned: a ranker "
        "file written by training.learned_ranker (default: the shipped learned-ranker-v1).",
    )
    service_id: str | None = Field(
        default=None,
        description="llm: the kernel's chat service that picks (default: the agent's own chat model). A cheap model "
        "beside a larger one for the answer is the usual setup.",
    )
    timeout_seconds: float = Field(
        default=3.0, gt=0, le=120, description="llm: a pick not answered within this keeps the first stage's answer."
    )
    description_chars: int = Field(
        default=160, ge=20, le=2000, description="llm: each tool's description, one line, cut to this many characters."
    )
    cache_size: int = Field(
        default=1024, ge=0, le=1_000_000, description="llm: picks kept for repeated requests (0: none kept)."
    )
    cache_seconds: float = Field(default=600.0, ge=0, le=86_400, description="llm: how long a kept pick is reused.")
    failure_threshold: int = Field(
        default=3,
        ge=1,
        description="llm: consecutive failed picking calls (errors, timeouts) that pause the picker: the first stage "
        "answers at once meanwhile (as embedding.failure_threshold does for the embedding service).",
    )
    cooldown_seconds: float = Field(
        default=30.0, ge=0, description="llm: how long a paused picker is not called; then one call tries it again."
    )

    @model_validator(mode="after")
    def _llm_reads_twenty(self) -> RerankConfig:
        if self.type in ("llm", "learned") and "shortlist" not in self.model_fields_set:
            shortlist = LLM_SHORTLIST if self.type == "llm" else LEARNED_SHORTLIST
            object.__setattr__(self, "shortlist", shortlist)  # (validate_assignment would re-run this)
        if self.type not in ("cross-encoder", "learned") and self.model is not None:
            raise ValueError(
                f"rerank.model names a cross-encoder or a learned ranker: it applies to those types, not {self.type}"
            )
        if self.type != "llm" and self.service_id is not None:
            raise ValueError(
                f"rerank.service_id names the picking chat service: it applies to type: llm, not {self.type}"
            )
        return self


LLM_SHORTLIST = 20
"""The shortlist the model picks from unless ``rerank.shortlist`` is set."""
LEARNED_SHORTLIST = 30
"""The shortlist the learned ranker reorders unless ``rerank.shortlist`` is set (what it was trained on)."""


class DiscoveryConfig(StrictConfig):
    """The built-in discovery plugin the model calls to search the whole catalog."""

    enabled: bool = Field(default=True, description="Offer the two discovery tools (search_tools, describe_tool).")
    plugin_name: str = Field(
        default="ToolSearch", pattern=r"^[0-9A-Za-z_]+$", description="Plugin name of the discovery tools."
    )
    max_loaded: int = Field(default=5, ge=1, le=50, description="Discovered tools sent on the next request.")
    max_chars: int = Field(default=6000, ge=500, le=50_000, description="Hard cap on one discovery answer.")
