"""ToolFilterManager: per request, pick the few tools that matter and clone the settings to match."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from sk_toolfilter.basics.progress import ProgressCallback
from sk_toolfilter.basics.redaction import library_logger, warn_once
from sk_toolfilter.basics.tokenizer import count_json_tokens
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.errors import ConfigError, UnknownToolError
from sk_toolfilter.retrieval.bulk import collector_paused
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.cutoff import ToolDecision, apply_cutoff
from sk_toolfilter.retrieval.embeddings import create_embedding_service
from sk_toolfilter.retrieval.encoders import EmbeddingService
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.metadata import ToolMetadata, openai_tool_definition
from sk_toolfilter.retrieval.rerank import resolve_reranker
from sk_toolfilter.retrieval.search import MAX_QUERY_PARTS, Ranking, rank_tools
from sk_toolfilter.retrieval.text import split_request_clauses
from sk_toolfilter.selection.agent_loop import LoopInputs, plan_agent_loop
from sk_toolfilter.selection.catalog_upkeep import Catalog, CatalogUpkeep, build_first_index
from sk_toolfilter.selection.co_usage import CoUsage, CoUsageFile
from sk_toolfilter.selection.query import QueryStrategy, build_query
from sk_toolfilter.selection.settings import allowed_by_behavior, clone_with_functions
from sk_toolfilter.selection.tool_source import (  # noqa: F401  (kernel_fingerprint: its 0.2 home)
    KernelTools,
    ToolSource,
    kernel_fingerprint,
)
from sk_toolfilter.selection.turns import Turn, split_turns
from sk_toolfilter.selection.usage import UsageTracker
from sk_toolfilter.selection.visibility import ToolPolicy, resolve_bare_names
from sk_toolfilter.store.co_usage_table import CoUsageTable
from sk_toolfilter.store.shared_index import SharedIndex
from sk_toolfilter.telemetry import SelectionRecord, Telemetry

logger = library_logger(__name__)

if TYPE_CHECKING:
    from semantic_kernel import Kernel
    from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
    from semantic_kernel.contents import ChatHistory

SettingsT = TypeVar("SettingsT", bound="PromptExecutionSettings")

# Only a request's first characters are read for a list of actions (a pasted document is not one).
MAX_LISTED_REQUEST_CHARS = 2000

# A tool scoring below this fraction of the best match is not a discovery match.
MIN_MATCH_SCORE = 0.3

ConversationPins = Callable[["ChatHistory"], Sequence[tuple[str, str]]]
"""Tools a conversation asks to keep on offer, as ``(full_name, reason)`` pairs (e.g. found with discovery)."""


@dataclass(frozen=True)
class Selection:
    """The outcome of one selection: names to send (best first, then pins) and the evidence."""

    names: list[str]
    ranking: Ranking
    decisions: list[ToolDecision]


class ToolFilterManager:
    """Selects tools for each request from a :class:`ToolIndex` according to a :class:`ToolFilterConfig`.

    ``always_include`` names must be full names of indexed, visible functions (``Plugin-function``);
    an unknown name raises :class:`UnknownToolError` listing the closest real names.
    """

    def __init__(
        self, index: ToolIndex, config: ToolFilterConfig | None = None, *, usage: UsageTracker | None = None
    ) -> None:
        self.config = resolve_bare_names(config or ToolFilterConfig(), index.names)
        self.usage = usage or UsageTracker()
        self.co_usage = CoUsage()
        self._turn_configs: dict[tuple[tuple[str, float], ...], ToolFilterConfig] = {}
        self._co_usage_file: CoUsageFile | None = None
        if self.config.agent_loop.co_usage_file:
            self._co_usage_file = CoUsageFile(self.config.agent_loop.co_usage_file)
            self._co_usage_file.load_into(self.co_usage)
        self.policy = ToolPolicy(self.config)
        for position, name in enumerate(self.config.always_include):
            if self.policy.is_hidden(name):
                raise ConfigError(
                    f"tool_filtering.always_include[{position}]: {name!r} is excluded or disabled for this agent"
                )
            if name not in index:
                raise UnknownToolError(f"tool_filtering.always_include[{position}]", name, index.names)
        if self.config.rerank.type != "none":
            resolve_reranker(self.config.rerank.model)  # a wrong rerank.model fails here, not per request
        self._upkeep = CatalogUpkeep(index, self.config, self.policy)
        self._conversation_pins: dict[str, ConversationPins] = {}
        self._co_usage_table: CoUsageTable | None = None
        self.telemetry = Telemetry()
        """Spans and metrics of selections (off unless the app turns telemetry on)."""
        self._token_counts: dict[str, int] = {}
        self._catalog_tokens: tuple[Catalog | None, int] = (None, 0)
        index.circuit.on_incident = self.telemetry.embedding_incident

    @property
    def _catalog(self) -> Catalog:
        return self._upkeep.catalog

    @property
    def index(self) -> ToolIndex:
        """The current index (replaced, never mutated, when the tools change)."""
        return self._catalog.index

    @property
    def catalog_size(self) -> int:
        """The agent's own tools: the index without the discovery tools (what the report and chat count)."""
        return len(self._catalog.index) - len(self._catalog.discovery_names)

    @property
    def discovery_names(self) -> list[str]:
        """The functions of the discovery plugin (``config.discovery.plugin_name``), pinned on every request."""
        return self._catalog.discovery_names

    def set_conversation_pins(self, key: str, source: ConversationPins | None) -> None:
        """Register (or with None remove) a source of tools that a conversation keeps on offer.

        :meth:`select_for_history` asks every source; the discovery plugin registers one for the
        tools the model found with it.
        """
        if source is None:
            self._conversation_pins.pop(key, None)
        else:
            self._conversation_pins[key] = source

    @classmethod
    async def from_kernel(
        cls,
        kernel: Kernel,
        config: ToolFilterConfig | None = None,
        *,
        embedding_service: EmbeddingService | None = None,
        progress: ProgressCallback | None = None,
        embed: bool = True,
    ) -> ToolFilterManager:
        """Index `kernel` (embedding with `embedding_service`, or the one ``config.embedding`` names)
        and count the functions the model calls on it.

        This is selection only: the discovery plugin and the execution guard are added by
        :func:`sk_toolfilter.create_tool_filter` (or :func:`sk_toolfilter.enable_tool_filtering`).
        The manager follows the kernel: plugins added or removed later are re-indexed (only what
        changed) before the next selection.
        """
        manager = await cls.from_source(
            KernelTools(kernel), config, embedding_service=embedding_service, progress=progress, embed=embed
        )
        manager.usage.attach(kernel)
        return manager

    @classmethod
    async def from_source(
        cls,
        source: ToolSource,
        config: ToolFilterConfig | None = None,
        *,
        embedding_service: EmbeddingService | None = None,
        progress: ProgressCallback | None = None,
        embed: bool = True,
    ) -> ToolFilterManager:
        """Index the tools of any :class:`~sk_toolfilter.selection.tool_source.ToolSource` (an SK
        kernel, an Agent Framework tool list) and follow it: tools added or removed later are
        re-indexed before the next selection."""
        config = config or ToolFilterConfig()
        if embedding_service is None and config.search_method != "bm25":
            embedding_service = create_embedding_service(config.embedding)
        cache = EmbeddingCache(config.embedding.cache_dir) if config.embedding.cache and embedding_service else None
        with collector_paused():
            first = await build_first_index(source, config, embedding_service, cache, progress, embed)
            try:
                manager = cls(first.index, first.config)
            except BaseException:
                if first.store is not None:
                    await first.store.aclose()
                raise
            manager._upkeep.follow(source, first, cache, progress)
            loop = first.config.agent_loop
            if first.store is not None and loop.enabled and loop.co_usage:
                manager._co_usage_table = first.store.co_usage_table(loop.co_usage_sync_seconds)
                if manager._co_usage_table is not None:
                    await manager._co_usage_table.load_into(manager.co_usage)
            return manager

    @property
    def index_store(self) -> SharedIndex | None:
        """The shared store the index comes from (``index.store``), or None for an in-memory index."""
        return self._upkeep.store

    @property
    def co_usage_table(self) -> CoUsageTable | None:
        """Where replicas share co-usage (with ``index.store: postgres``), or None."""
        return self._co_usage_table

    async def vectors_ready(self) -> None:
        """Wait until the tools' vectors are built (at once unless an instant start is embedding them
        in the background: see ``embedding.background_above``)."""
        await self._upkeep.vectors_ready()

    async def aclose(self) -> None:
        """Write what co-usage learned (``agent_loop.co_usage_file``, the shared store's co-usage
        table) and release the store's connections (selections keep working from memory)."""
        if self._co_usage_file is not None:
            self._co_usage_file.flush(self.co_usage)
        if self._co_usage_table is not None:
            await self._co_usage_table.aclose(self.co_usage)
        await self._upkeep.aclose()

    async def refresh(self, *, force: bool = False) -> bool:
        """Re-index if the source's tools changed (or `force`); True when a new index was swapped in.

        Only new or changed tools are embedded and tokenized. The new index is built aside and
        swapped in atomically; selections running meanwhile keep using the old one (and never emit
        a tool that is gone: names are checked against the source).
        """
        return await self._upkeep.refresh(force=force)

    @property
    def source(self) -> ToolSource | None:
        """What the manager follows (an SK kernel, an Agent Framework tool list), or None."""
        return self._upkeep.source

    def _source_names(self) -> list[str]:
        return self._upkeep.source_names()

    def _exists(self, full_name: str) -> bool:
        return self._upkeep.exists(full_name)

    # --- visibility ---------------------------------------------------------------------------
    def is_hidden(self, full_name: str) -> bool:
        """True for a function this agent may never see or run (excluded or disabled)."""
        return self.policy.is_hidden(full_name)

    def find_visible_tool(self, name: str) -> ToolMetadata | None:
        """A searchable tool by full name (``Plugin-function`` or ``Plugin.function``) or unique bare name."""
        catalog = self._catalog
        name = name.strip()
        for candidate in (name, name.replace(".", "-", 1)):
            if candidate in catalog.searchable and self._exists(candidate):
                return catalog.index.get(candidate)
        bare = [n for n in catalog.searchable if n.split("-", 1)[-1] == name]
        return catalog.index.get(bare[0]) if len(bare) == 1 and self._exists(bare[0]) else None

    async def discover(self, query: str) -> list[ToolMetadata]:
        """Searchable tools matching `query` (best first); every searchable tool for an empty query."""
        await self.refresh()
        catalog = self._catalog
        if not query.strip():
            return [t for t in catalog.index.tools if t.full_name in catalog.searchable and self._exists(t.full_name)]
        ranking = await rank_tools(catalog.index, query, self.config, allowed=catalog.searchable_mask)
        return [
            s.tool for s in ranking.tools if (s.name_match or s.score >= MIN_MATCH_SCORE) and self._exists(s.full_name)
        ]

    # --- selection ----------------------------------------------------------------------------
    async def select(
        self,
        query: str,
        *,
        allowed: set[str] | None = None,
        extra_pins: Sequence[tuple[str, str]] = (),
        turn: Turn | None = None,
        previous_turn: Turn | None = None,
    ) -> Selection:
        """Rank, cut by threshold and ``top_k``, then add pinned tools. Never raises for a query.

        `allowed` narrows everything (e.g. the caller's own filters); `extra_pins` are
        ``(name, reason)`` pairs such as tools found with discovery. With `turn` (the current user
        turn of an agent loop) the ``agent_loop`` policy applies: the turn's tools stay and tools
        used together with the best-ranked ones are added, within one budget per request.
        With telemetry on (:mod:`sk_toolfilter.telemetry`), each selection is one span.
        """
        with self.telemetry.selection() as record:
            selection = await self._select(query, allowed, extra_pins, turn, previous_turn)
            if self.telemetry.enabled:
                self._describe_selection(record, query, selection, turn)
        return selection

    def _describe_selection(self, record: SelectionRecord, query: str, selection: Selection, turn: Turn | None) -> None:
        config, catalog = self.config, self._catalog
        scores = {d.full_name: d.score for d in selection.decisions}
        pinned = {d.full_name for d in selection.decisions if d.reason.startswith("pinned")}
        record.catalog_size = len(catalog.searchable)
        record.budget = self._budget(turn)
        record.method, record.method_used = config.search_method, selection.ranking.method
        record.offered, record.pins = selection.names, [n for n in selection.names if n in pinned]
        record.scores = [scores.get(n) for n in selection.names]
        record.fallback_reason, record.query = selection.ranking.fallback_reason, query
        if selection.ranking.rerank is not None:
            record.extra["sk_toolfilter.rerank"] = selection.ranking.rerank
        if self._catalog_tokens[0] is not catalog:  # summed once per catalog, not per selection
            self._catalog_tokens = (catalog, sum(self._schema_tokens(n) for n in catalog.searchable))
        record.tokens_all = self._catalog_tokens[1]
        record.tokens_offered = sum(self._schema_tokens(n) for n in selection.names)

    def _budget(self, turn: Turn | None) -> int:
        """Selected tools per request: ``top_k``, or within an agent loop's turn ``max(top_k, max_tools)``."""
        loop = self.config.agent_loop
        return max(self.config.top_k, loop.max_tools) if turn is not None and loop.enabled else self.config.top_k

    def _schema_tokens(self, name: str) -> int:
        """Tokens of a tool's schema as SK's OpenAI connector sends it (counted once per tool)."""
        if name not in self._token_counts:
            tool = self._catalog.index.get(name)
            self._token_counts[name] = count_json_tokens(openai_tool_definition(tool)) if tool is not None else 0
        return self._token_counts[name]

    def _turn_config(self, model_weights: dict[str, float] | None) -> ToolFilterConfig:
        """The configuration a turn's requests rank with (:meth:`ToolFilterConfig.for_turn`), made once per blend."""
        key = tuple(sorted((model_weights or {}).items()))
        if key not in self._turn_configs:
            self._turn_configs[key] = self.config.for_turn(model_weights)
        return self._turn_configs[key]

    async def _select(
        self,
        query: str,
        allowed: set[str] | None,
        extra_pins: Sequence[tuple[str, str]],
        turn: Turn | None,
        previous_turn: Turn | None,
    ) -> Selection:
        await self.refresh()
        config, catalog = self.config, self._catalog
        candidates, count = catalog.searchable_mask, catalog.searchable_count
        if allowed is not None:
            candidates = candidates & catalog.index.mask_of(allowed)
            count = int(np.count_nonzero(candidates))
        loop_turn = turn if turn is not None and config.agent_loop.enabled else None
        if loop_turn is not None:
            config = self._turn_config(catalog.index.loop_fusion_weights)
        needs = self._needs(loop_turn.request) if loop_turn is not None else []
        every_tool = count == len(catalog.index)  # nothing to mask out (the ranking skips its masking passes)
        ranking = await rank_tools(
            catalog.index,
            query,
            config,
            limit=max(config.top_k * 4, 20),
            allowed=None if every_tool else candidates,
            prefetch=needs,
            fill=False,  # tools without evidence are never sent: the selection does not list them
        )
        # Functions removed while this (older) index was in use are dropped before the cut, not after it.
        decisions = apply_cutoff(
            [t for t in ranking.tools if self._exists(t.full_name)], config, no_tool_reason=ranking.no_tool_reason
        )
        decisions += [ToolDecision(name, False, f"cut: {why}") for name, why in ranking.without_evidence]
        names = [d.full_name for d in decisions if d.kept]
        budget = self._budget(loop_turn)
        everything_fits = count <= budget  # counted on the mask: no per-tool list on this path
        if everything_fits:
            # Filtering would save nothing and could only hide a tool: every candidate is sent (the
            # caller's own filters, exclusions and visibility still narrowed the candidates).
            tools = zip(catalog.index.tools, candidates, strict=True)
            everything = [t.full_name for t, ok in tools if ok and self._exists(t.full_name)]
            ranked = [n for n in names if n in everything]
            names = ranked + [n for n in everything if n not in ranked]
            by_name = {d.full_name: d for d in decisions}
            reason = f"kept: all {len(everything)} candidate tools fit the budget of {budget}"
            decisions = [
                ToolDecision(
                    n,
                    True,
                    reason,
                    getattr(by_name.get(n), "score", None),
                    getattr(by_name.get(n), "method_scores", None),
                )
                for n in names
            ]
        elif loop_turn is not None:
            # The needs were embedded with the query; when that failed, they are ranked with BM25 too.
            need_config = config
            if ranking.fallback_reason is not None:
                need_config = config.model_copy(update={"search_method": "bm25"})
            best = await self._best_per_need(needs, candidates, need_config)
            names, decisions = self._plan_agent_loop(loop_turn, previous_turn, names, decisions, allowed, best)

        pins = [(n, "pinned: always_include") for n in config.always_include]
        pins += self.policy.pinned()
        pins += extra_pins
        visible = catalog.visible
        for name in self.usage.most_used(config.always_include_top_n_used, visible):
            pins.append((name, f"pinned: among the {config.always_include_top_n_used} most used tools"))
        if config.enabled and not everything_fits:
            # When every candidate is sent there is nothing left to discover: a small agent sends
            # exactly what plain Semantic Kernel sends, never more.
            pins += [(n, "pinned: discovery tool") for n in catalog.discovery_names]
        pinned: list[str] = []
        for name, reason in pins:
            usable = name in visible and (allowed is None or name in allowed) and self._exists(name)
            if name in names or not usable:
                continue
            names.append(name)
            pinned.append(name)
            decisions = [d for d in decisions if d.full_name != name]
            decisions.append(ToolDecision(name, True, reason))
        if config.max_tools_total is not None and len(names) > config.max_tools_total:
            names, decisions = _cap_total(names, decisions, pinned, config.max_tools_total)
        return Selection(names, ranking, decisions)

    def _needs(self, request: str) -> list[str]:
        """The actions a request lists (``agent_loop.split_request``); [] when it asks for one thing."""
        if not self.config.agent_loop.split_request:
            return []
        needs = split_request_clauses(request[:MAX_LISTED_REQUEST_CHARS])[:MAX_QUERY_PARTS]
        return needs if len(needs) > 1 else []

    async def _best_per_need(
        self, needs: Sequence[str], candidates: np.ndarray, config: ToolFilterConfig
    ) -> list[tuple[str, str]]:
        """(best tool, need) for each need."""
        index, found = self._catalog.index, []
        for need in needs:
            ranking = await rank_tools(index, need, config, limit=1, allowed=candidates, fill=False)
            found += [(t.full_name, need) for t in ranking.tools if self._exists(t.full_name)]
        return found

    def _plan_agent_loop(
        self,
        turn: Turn,
        previous: Turn | None,
        ranked: list[str],
        decisions: list[ToolDecision],
        allowed: set[str] | None,
        needs: Sequence[tuple[str, str]],
    ) -> tuple[list[str], list[ToolDecision]]:
        catalog = self._catalog

        def usable(name: str, searchable_only: bool) -> bool:
            pool = catalog.searchable if searchable_only else catalog.visible
            return name in pool and (allowed is None or name in allowed) and self._exists(name)

        loop = LoopInputs(turn, previous, ranked, decisions, needs, self._budget(turn), catalog.index.providers)
        return plan_agent_loop(self.config.agent_loop, loop, self.co_usage, usable)

    async def select_for_history(
        self,
        history: ChatHistory,
        *,
        allowed: set[str] | None = None,
        strategy: QueryStrategy | None = None,
    ) -> Selection:
        """Select for the next request of a conversation: query from the history, plus the tools
        its registered conversation-pin sources keep on offer (see :meth:`set_conversation_pins`)."""
        completed, turn = split_turns(history)
        loop = self.config.agent_loop
        learned = loop.enabled and loop.co_usage and self.co_usage.learn(completed) > 0
        if learned and self._co_usage_file is not None:
            self._co_usage_file.changed(self.co_usage)
        if self._co_usage_table is not None:
            self._co_usage_table.tick(self.co_usage)  # shares what it learned, picks up what others did
        query = build_query(history, strategy or self.config.query_strategy)
        pins = [pin for source in list(self._conversation_pins.values()) for pin in source(history)]
        previous = completed[-1] if completed else None
        return await self.select(query, allowed=allowed, extra_pins=pins, turn=turn, previous_turn=previous)

    async def filter_tools(self, query: str) -> list[str]:
        """Full names (``Plugin-function``) to send for `query`: ranked best first, then pinned tools."""
        return (await self.select(query)).names

    async def explain(self, query: str) -> list[ToolDecision]:
        """Per ranked tool: the score of each method, and why it was kept or cut."""
        return (await self.select(query)).decisions

    async def prepare_execution_settings(self, query: str | ChatHistory, base_settings: SettingsT) -> SettingsT:
        """A clone of `base_settings` offering only the selected functions; the base is never mutated.

        `query` is the text to match, or a chat history (then the query is built from the
        conversation and tools found with discovery are included). With ``enabled: false`` nothing is
        ranked: the base settings come back unchanged, or, when ``exclude`` or ``enabled: false``
        overrides hide tools, a clone offering every visible one (exclusions are a policy, not a
        ranking hint). With nothing selected and nothing pinned the clone offers no tools at all.
        """
        if not self.config.enabled:
            everything = self._source_names() or self.index.names
            allowed = allowed_by_behavior(base_settings.function_choice_behavior, everything)
            offered = [n for n in everything if allowed is None or n in allowed]
            visible = [n for n in offered if not self.is_hidden(n)]
            return base_settings if len(visible) == len(offered) else clone_with_functions(base_settings, visible)
        allowed = allowed_by_behavior(base_settings.function_choice_behavior, self.index.names)
        if isinstance(query, str):
            selection = await self.select(query, allowed=allowed)
        else:
            selection = await self.select_for_history(query, allowed=allowed)
        return clone_with_functions(base_settings, selection.names)


def _cap_total(
    names: list[str], decisions: list[ToolDecision], pinned: list[str], cap: int
) -> tuple[list[str], list[ToolDecision]]:
    """At most `cap` names, pins included: the lowest-ranked selected tools go first; when the pins
    alone are more than `cap`, the first `cap` pins in pin order stay (the configuration's own, then
    those of tool sources and servers, then conversation pins) and one warning per source names it."""
    kept_pins = pinned[:cap]
    room = cap - len(kept_pins)
    pinned_set = set(pinned)
    ranked = [n for n in names if n not in pinned_set]
    dropped = set(ranked[room:]) | set(pinned[cap:])
    by_name = {d.full_name: d for d in decisions}
    if len(pinned) > cap and pinned[cap] in by_name:  # the source whose pins cross the cap is named
        source = by_name[pinned[cap]].reason.removeprefix("pinned: ")
        warn_once(
            logger,
            f"{source} pins more tools than max_tools_total={cap} holds: the pinned tools beyond it are not sent "
            "(explain lists them; raise max_tools_total or pin fewer)",
        )
    ranked_reason = f"cut: beyond max_tools_total={cap} (pinned tools included)"
    pin_reason = f"cut: beyond max_tools_total={cap} (more tools are pinned than it holds)"

    def cut(d: ToolDecision) -> ToolDecision:
        why = pin_reason if d.full_name in pinned_set else ranked_reason
        return ToolDecision(
            d.full_name, False, f"{why}; {d.reason}" if d.full_name in pinned_set else why, d.score, d.method_scores
        )

    return [n for n in names if n not in dropped], [cut(d) if d.full_name in dropped else d for d in decisions]
