"""``ToolFilterConfig``: the whole ``tool_filtering`` block, its sections behind it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import (
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from sk_toolfilter.basics.errors import ConfigError, describe_validation_error
from sk_toolfilter.config.agent_loop import AgentLoopConfig
from sk_toolfilter.config.base import DEFAULT_WEIGHTS, RankingMethod, SearchMethod, StrictConfig, checked_weights
from sk_toolfilter.config.embedding import EmbeddingConfig
from sk_toolfilter.config.index import IndexConfig
from sk_toolfilter.config.learning import LearningConfig
from sk_toolfilter.config.provider_search import ProviderSearchConfig
from sk_toolfilter.config.ranking import BM25Config, DiscoveryConfig, RerankConfig, ToolOverride


class ToolFilterConfig(StrictConfig):
    """The ``tool_filtering`` block of an agent file.

    ``similarity_threshold`` is relative, and means the same for every method: each method scores
    a tool in [0, 1] as a fraction of the best tool's score for the same query (1.0 = the best
    match). A tool is kept when its score is at least the threshold, at most ``top_k`` of them.
    """

    enabled: bool = Field(
        default=True, description="false: nothing is ranked; every visible tool is sent (exclusions still apply)."
    )
    top_k: int = Field(default=5, gt=0, le=128, description="Ranked tools sent per request (pinned tools come on top).")
    max_tools_total: int | None = Field(
        default=None,
        gt=0,
        le=256,
        description="Hard cap on the tools sent per request, pinned and discovery tools included (HoloDeck's top_k "
        "meaning): the lowest-ranked selected tools are dropped first, pinned tools never. null: no cap.",
    )
    similarity_threshold: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Keep a ranked tool whose score is at least this fraction of the best tool's score.",
    )
    always_include: list[str] = Field(
        default_factory=list, description="Tools (Plugin-function) sent with every request, on top of top_k."
    )
    always_include_top_n_used: int = Field(
        default=0, ge=0, le=128, description="Also pin the N tools the model called most (0: none)."
    )
    strict: bool = Field(
        default=False,
        description="Every exclude pattern and tools_overrides name must match a tool or plugin: an unmatched one "
        "is an error instead of a warning.",
    )
    search_method: SearchMethod = Field(
        default="hybrid", description="semantic (embeddings), bm25 (words) or hybrid (both, fused)."
    )
    query_strategy: Literal["last_message", "conversation"] = Field(
        default="conversation", description="What the query is built from in chat (see sk_toolfilter.selection.query)."
    )
    fusion: Literal["zscore", "rrf"] = Field(
        default="zscore",
        description="How hybrid combines methods: weighted z-scores of raw scores, or Reciprocal Rank Fusion.",
    )
    rrf_k: int = Field(default=60, gt=0, description="Reciprocal Rank Fusion constant.")
    method_weights: dict[RankingMethod, float] = Field(
        default_factory=lambda: dict(DEFAULT_WEIGHTS),
        description="Per-method weights in hybrid fusion. Unset: the blend fitted for the embedding model "
        "(its model.json hybrid_weights), else semantic 0.7 / bm25 0.3. Set, they apply inside turns too "
        "(see agent_loop.method_weights).",
    )
    split_queries: bool = Field(
        default=True,
        description="Intent coverage: rank each intent of a multi-intent request too (steps started by 'then' / "
        "'after that' / 'finally', a sentence opening with 'Then' or 'Also', or min_query_parts sentences), and "
        "merge the rankings round by round.",
    )
    min_query_parts: int = Field(
        default=3, ge=2, description="Sentences a request needs before each sentence counts as an intent."
    )
    no_tool_margin: float | None = Field(
        default=-0.05,
        ge=-1.0,
        le=1.0,
        description="Small talk sends no catalog tool: a request closer to a description of small talk (greetings, "
        "thanks, questions about the assistant) than to its best tool's cosine + this margin, or naming nothing "
        "beyond stopwords and small talk's own words ('what can you do?'), sends only pinned and named tools "
        "(sk_toolfilter.retrieval.small_talk). null turns the check off.",
    )
    cutoff: Literal["threshold", "autocut"] = Field(
        default="threshold",
        description="threshold: keep scores >= similarity_threshold; autocut: stop at the first score "
        "below autocut_ratio x the previous one.",
    )
    autocut_ratio: float = Field(
        default=0.5, gt=0.0, lt=1.0, description="cutoff: autocut stops at a score below this x the previous one."
    )
    semantic_floor: float = Field(
        default=0.2,
        ge=-1.0,
        le=1.0,
        description="Cosine similarity below which a tool counts as unrelated to the query.",
    )
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig, description="The embedding service.")
    bm25: BM25Config = Field(default_factory=BM25Config, description="BM25 parameters.")
    exclude: list[str] = Field(
        default_factory=list,
        description="Plugins or functions this agent may never see or run: names or globs ('Files-delete_*', 'Admin').",
    )
    allow: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Per plugin (tool source), the only tools of it the agent may see and run: function names or "
        "globs ({'filesystem': ['read_file', 'list_directory']}); the plugin's other tools, including tools an MCP "
        "server adds later, are hidden as if excluded. A tool source's own allowed_tools key fills this.",
    )
    tools_overrides: dict[str, ToolOverride] = Field(
        default_factory=dict, description="Per tool (Plugin-function): visibility, pins and extra indexed words."
    )
    discovery: DiscoveryConfig = Field(default_factory=DiscoveryConfig, description="The discovery tools.")
    rerank: RerankConfig = Field(default_factory=RerankConfig, description="The second stage (a reranker).")
    selection_mode: Literal["fresh", "sticky"] = Field(
        default="fresh",
        description="sticky: within a conversation, tools once sent stay sent, in the same order (prompt caches).",
    )
    sticky_max_tools: int = Field(default=12, ge=1, le=256, description="Cap of a sticky tool list (LRU).")
    agent_loop: AgentLoopConfig = Field(default_factory=AgentLoopConfig, description="Selection inside agent loops.")
    index: IndexConfig = Field(default_factory=IndexConfig, description="Where the tool index lives.")
    learning: LearningConfig = Field(
        default_factory=LearningConfig, description="Learning from use: what similar past requests called moves up."
    )
    provider_search: ProviderSearchConfig = Field(
        default_factory=ProviderSearchConfig,
        description="The tools not selected go deferred to the model provider's own tool search (opt-in).",
    )

    @model_validator(mode="after")
    def _pins_fit_the_cap(self) -> ToolFilterConfig:
        cap = self.max_tools_total
        written = self.written_pins()
        if cap is not None and len(written) > cap:
            raise ValueError(
                f"max_tools_total={cap} is below the {len(written)} tools this configuration pins "
                "(always_include and tools_overrides with always_include: true) that it must hold"
            )
        return self

    def written_pins(self) -> list[str]:
        """The tools the configuration itself pins: ``always_include`` and ``tools_overrides`` entries with
        ``always_include: true`` (not those a tool source or server pinned: ``pinned_by``)."""
        pins = dict.fromkeys(self.always_include)
        pins.update(
            (name, None)
            for name, o in self.tools_overrides.items()
            if o.always_include and o.enabled and o.pinned_by is None
        )
        return list(pins)

    def updated(self, **changes: Any) -> ToolFilterConfig:
        """A copy with `changes`, checked like a configuration read from a file (``model_copy(update=…)``
        alone skips every validator)."""
        checked = type(self).model_validate({**{k: getattr(self, k) for k in type(self).model_fields}, **changes})
        checked.__pydantic_fields_set__ = self.model_fields_set | set(changes)  # what was set stays what was set
        return checked

    @field_validator("rerank", mode="before")
    @classmethod
    def _rerank_by_name(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value

    @field_validator("always_include", "exclude", mode="before")
    @classmethod
    def _one_name_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("method_weights")
    @classmethod
    def _weights_non_negative(cls, value: dict[RankingMethod, float]) -> dict[RankingMethod, float]:
        return checked_weights(value)

    def for_turn(self, model_weights: dict[str, float] | None = None) -> ToolFilterConfig:
        """This configuration as the requests inside a turn use it: ``agent_loop.method_weights``, else the
        top-level ``method_weights`` when set, else `model_weights` (the blend chosen for the embedding
        model inside turns), else unchanged."""
        weights: Mapping[Any, float] | None = self.agent_loop.method_weights
        if weights is None and "method_weights" not in self.model_fields_set:
            weights = model_weights
        return self if weights is None else self.model_copy(update={"method_weights": dict(weights)})

    def for_first_request(self, model_weights: dict[str, float] | None = None) -> ToolFilterConfig:
        """This configuration as a conversation's first request uses it (``agent_loop.first_request_weights``):
        unchanged (``plain``: as :meth:`~sk_toolfilter.ToolFilterManager.filter_tools` ranks), as a turn's
        requests (``turn``: :meth:`for_turn`), or with a blend of its own."""
        weights = self.agent_loop.first_request_weights
        if weights == "plain":
            return self
        if weights == "turn":
            return self.for_turn(model_weights)
        return self.model_copy(update={"method_weights": dict(weights)})

    @classmethod
    def from_mapping(cls, data: Any, *, where: str = "tool_filtering") -> ToolFilterConfig:
        """Validate a mapping (e.g. the parsed YAML block); errors name the key and the bad value."""
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a mapping, got {type(data).__name__}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(exc, where)) from None
