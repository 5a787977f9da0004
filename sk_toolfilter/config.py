"""The ``tool_filtering`` configuration block, validated by pydantic."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from sk_toolfilter.basics.errors import ConfigError, describe_validation_error

SearchMethod = Literal["semantic", "bm25", "hybrid"]

RankingMethod = Literal["semantic", "bm25"]
DEFAULT_WEIGHTS: dict[RankingMethod, float] = {"semantic": 0.7, "bm25": 0.3}


def checked_weights(value: dict[RankingMethod, float]) -> dict[RankingMethod, float]:
    """Hybrid weights as configured: non-negative, the method left out at its default weight."""
    if any(w < 0 for w in value.values()):
        raise ValueError("weights must be >= 0")
    return {**DEFAULT_WEIGHTS, **value}


class StrictConfig(BaseModel):
    """Unknown keys, NaN / infinity, and booleans where a number belongs are errors."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_booleans_for_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _is_numeric(field.annotation) and _holds_bool(value):
            raise ValueError("expected a number, not true/false")
        return value


def _is_numeric(annotation: Any) -> bool:
    if annotation is bool:
        return False
    if annotation in (int, float):
        return True
    return any(_is_numeric(arg) for arg in get_args(annotation))


def _holds_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return True
    if isinstance(value, dict):
        return any(isinstance(v, bool) for v in value.values())
    return isinstance(value, list) and any(isinstance(v, bool) for v in value)


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
    api_key: SecretStr | None = Field(
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
        description="How tool vectors are held and scored: int8 (default: 388 bytes per 384-d tool, 3-4x "
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
    pinned_by: str | None = Field(
        default=None,
        description="Who pinned the tool when the file did not (load_agent sets it for a tool source's "
        "always_include and an MCP server's _meta load hint): named in explain and in the max_tools_total warning. "
        "Such pins are capped by max_tools_total at run time instead of failing the configuration.",
    )


class RerankConfig(StrictConfig):
    """The second stage, between the first-stage ranking and the cut. ``cross-encoder``: the shipped
    reranker reads the request and each shortlisted tool together and reorders the shortlist (how many
    are sent stays the first stage's decision). ``llm``: the application's own chat model picks up to
    ``top_k`` tools from the shortlist (names and one-line descriptions only; never a tool outside it;
    any failure keeps the first stage's answer). ``rerank: llm`` is short for ``{type: llm}``."""

    type: Literal["none", "cross-encoder", "llm"] = Field(
        default="none",
        description="none: the first stage's order; cross-encoder: the shipped reranker reorders it; llm: the "
        "application's chat model picks from the shortlist.",
    )
    shortlist: int = Field(
        default=10,
        ge=2,
        le=100,
        description="How many of the first stage's best tools the second stage reads (cross-encoder: 10, chosen by "
        "leave-one-catalog-out; llm: 20 unless set, where the first stage's top 20 holds every needed tool for 90 % "
        "of requests on an unseen catalog). Each more costs time (and, with llm, tokens).",
    )
    model: str | None = Field(
        default=None,
        description="cross-encoder: a shipped reranker id or a folder with its model.json (default: the shipped one).",
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
        if self.type == "llm" and "shortlist" not in self.model_fields_set:
            object.__setattr__(self, "shortlist", LLM_SHORTLIST)  # (validate_assignment would re-run this)
        if self.type != "cross-encoder" and self.model is not None:
            raise ValueError(f"rerank.model names a cross-encoder: it applies to type: cross-encoder, not {self.type}")
        if self.type != "llm" and self.service_id is not None:
            raise ValueError(
                f"rerank.service_id names the picking chat service: it applies to type: llm, not {self.type}"
            )
        return self


LLM_SHORTLIST = 20
"""The shortlist the model picks from unless ``rerank.shortlist`` is set."""


class DiscoveryConfig(StrictConfig):
    """The built-in discovery plugin the model calls to search the whole catalog."""

    enabled: bool = Field(default=True, description="Offer the two discovery tools (search_tools, describe_tool).")
    plugin_name: str = Field(
        default="ToolSearch", pattern=r"^[0-9A-Za-z_]+$", description="Plugin name of the discovery tools."
    )
    max_loaded: int = Field(default=5, ge=1, le=50, description="Discovered tools sent on the next request.")
    max_chars: int = Field(default=6000, ge=500, le=50_000, description="Hard cap on one discovery answer.")


class AgentLoopConfig(StrictConfig):
    """Selection inside an agent loop: the requests the model makes while answering one user turn.

    The user's request of the current turn stays the query (tool calls are context, not the
    query); tools called earlier in the turn stay on offer; tools that past turns used together
    with the best-ranked ones (learned from the conversations the filter sees) are added, and so is
    the best tool of each action a request lists ("lock the doors, press the brake and start the
    engine"). All of
    them share one budget per request: ``max(top_k, max_tools)`` selected tools, not counting
    ``always_include`` and the discovery tools.
    """

    enabled: bool = Field(default=True, description="Apply the agent-loop policy below inside a turn.")
    keep_turn_tools: bool = Field(default=True, description="Tools called earlier in the turn stay on offer.")
    previous_turn_tools: bool = Field(
        default=True, description="Tools of the previous turn fill what the budget leaves (follow-ups: 'the same')."
    )
    split_request: bool = Field(
        default=True,
        description="A request listing several actions (commas, 'and', 'then'): each action's best tool is kept.",
    )
    co_usage: bool = Field(default=True, description="Add tools past turns used together with the best-ranked ones.")
    co_usage_min_share: float = Field(
        default=0.3, gt=0.0, le=1.0, description="A companion was used in at least this share of its anchor's turns."
    )
    co_usage_min_turns: int = Field(
        default=1, ge=1, description="... and in at least this many turns (1: learn from the first turns on)."
    )
    co_usage_anchors: int = Field(default=3, ge=0, le=20, description="Best-ranked tools whose companions count.")
    lookup_tools: bool = Field(
        default=True,
        description="Add the lookup tools that give a best-ranked tool's required parameters (read from the "
        "schemas: get_zipcode_based_on_city for estimate_distance(cityA: zipcode)) while no past turn used it.",
    )
    co_usage_file: str | None = Field(
        default=None,
        description="JSON file that keeps what co_usage learned across restarts (tool names and a fingerprint "
        "per turn, no conversation text). '~' is expanded; in an agent file a relative path is relative to the file.",
    )
    co_usage_sync_seconds: float = Field(
        default=30.0,
        ge=0.0,
        le=3600.0,
        description="With index.store: postgres, co-usage is shared by every replica of the catalog through the "
        "store: each writes what it learned and reads what the others learned at most this often.",
    )
    max_tools: int = Field(default=6, ge=1, le=128, description="Selected tools per request (with top_k: the larger).")
    method_weights: dict[RankingMethod, float] | None = Field(
        default=None,
        description="Hybrid blend for the requests inside a turn. Unset: the top-level method_weights when they "
        "are set, else the blend chosen for the embedding model inside turns (its model.json loop_hybrid_weights: "
        "semantic 0.9 / bm25 0.1 for the shipped minilm-l6-tools-v1), else the single-request blend.",
    )

    @field_validator("method_weights")
    @classmethod
    def _weights_non_negative(cls, value: dict[RankingMethod, float] | None) -> dict[RankingMethod, float] | None:
        return None if value is None else checked_weights(value)


class IndexConfig(StrictConfig):
    """Where the tool index lives: in this process (``memory``) or shared in a database.

    ``store: postgres`` keeps one record per tool (metadata, content hash, model id, vector) and a
    version row per catalog in PostgreSQL with pgvector, through Semantic Kernel's Postgres
    connector: replicas that start against a warm store read the vectors instead of embedding.
    Without ``connection_string`` the standard libpq variables (``PGHOST``, ``PGPORT``,
    ``PGDATABASE``, ``PGUSER``, ``PGPASSWORD``) or ``POSTGRES_CONNECTION_STRING`` apply.
    """

    store: Literal["memory", "postgres"] = Field(
        default="memory", description="memory: this process only; postgres: shared by every replica (pgvector)."
    )
    catalog: str = Field(
        default="default",
        min_length=1,
        max_length=200,
        description="Name of this catalog in the store (agents that share tools share a name).",
    )
    connection_string: SecretStr | None = Field(
        default=None, description="libpq connection string or postgresql:// URL; use ${VAR}, never a literal."
    )
    db_schema: str = Field(
        default="public",
        alias="schema",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,62}$",
        description="PostgreSQL schema of the tables.",
    )
    table_prefix: str = Field(
        default="sk_toolfilter",
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,39}$",
        description="Prefix of the table names (tools, versions, co-usage).",
    )
    publish: bool = Field(
        default=True,
        description="A replica whose tools are not all in the store embeds the new or changed ones and "
        "publishes its catalog as the new version (false: it embeds them for itself only).",
    )
    check_interval_seconds: float = Field(
        default=0.0, ge=0.0, le=3600.0, description="How often a selection checks the catalog version (0: each one)."
    )
    timeout_seconds: float = Field(default=5.0, gt=0.0, le=300.0, description="Bound on each database call.")
    retry_seconds: float = Field(
        default=10.0, ge=0.0, le=3600.0, description="After the store failed, how long to serve from memory first."
    )

    model_config = ConfigDict(populate_by_name=True)

    @model_validator(mode="after")
    def _database_keys_need_a_database(self) -> IndexConfig:
        if self.store == "memory":
            given = [k for k in ("connection_string",) if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{given[0]} applies to a database store (store: postgres), not store: memory")
        return self


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
