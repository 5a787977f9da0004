"""ToolFilterManager: per request, pick the few tools that matter and clone the settings to match."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sk_toolfilter.cache import EmbeddingCache
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.discovery import MIN_MATCH_SCORE, DiscoveryPlugin, discovered_in
from sk_toolfilter.embeddings import create_embedding_service
from sk_toolfilter.errors import ConfigError, UnknownToolError
from sk_toolfilter.index import ProgressCallback, ToolIndex
from sk_toolfilter.metadata import ToolMetadata, crawl_kernel
from sk_toolfilter.query import QueryStrategy, build_query
from sk_toolfilter.search import Ranking, rank_tools
from sk_toolfilter.settings import allowed_by_behavior, clone_with_functions
from sk_toolfilter.usage import UsageTracker
from sk_toolfilter.visibility import ToolPolicy

if TYPE_CHECKING:
    from semantic_kernel import Kernel
    from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
    from semantic_kernel.connectors.ai.embedding_generator_base import EmbeddingGeneratorBase
    from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
    from semantic_kernel.contents import ChatHistory

logger = logging.getLogger(__name__)

SettingsT = TypeVar("SettingsT", bound="PromptExecutionSettings")

DISCOVERY_FUNCTIONS = ("search_tools", "describe_tool")


@dataclass(frozen=True)
class ToolDecision:
    """Why one tool was kept or cut for a query (see :meth:`ToolFilterManager.explain`)."""

    full_name: str
    kept: bool
    reason: str
    score: float | None = None
    method_scores: dict[str, float] | None = None


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
        self.index = index
        self.config = config or ToolFilterConfig()
        self.usage = usage or UsageTracker()
        self.policy = ToolPolicy(self.config)
        for position, name in enumerate(self.config.always_include):
            if name not in index or self.policy.is_hidden(name):
                if self.policy.is_hidden(name):
                    raise ConfigError(
                        f"tool_filtering.always_include[{position}]: {name!r} is excluded or disabled for this agent"
                    )
                raise UnknownToolError(f"tool_filtering.always_include[{position}]", name, index.names)
        plugin = self.config.discovery.plugin_name
        self.discovery_names = [
            f"{plugin}-{f}" for f in DISCOVERY_FUNCTIONS if self.config.discovery.enabled and f"{plugin}-{f}" in index
        ]
        self._searchable = {
            t.full_name
            for t in index.tools
            if not self.policy.is_hidden(t.full_name) and self.policy.is_searchable(t.full_name) and t.plugin != plugin
        }

    @classmethod
    async def from_kernel(
        cls,
        kernel: Kernel,
        config: ToolFilterConfig | None = None,
        *,
        embedding_service: EmbeddingGeneratorBase | None = None,
        progress: ProgressCallback | None = None,
    ) -> ToolFilterManager:
        """Index `kernel` (embedding with `embedding_service`, or the one ``config.embedding`` names),
        add the discovery plugin, and guard and count the functions the model calls on it."""
        from sk_toolfilter.guard import attach_execution_guard

        config = config or ToolFilterConfig()
        discovery = None
        if config.enabled and config.discovery.enabled and config.discovery.plugin_name not in kernel.plugins:
            discovery = DiscoveryPlugin(None)  # type: ignore[arg-type]  # bound to the manager below
            kernel.add_plugin(discovery, config.discovery.plugin_name)
        if embedding_service is None and config.search_method != "bm25":
            embedding_service = create_embedding_service(config.embedding)
        cache = EmbeddingCache(config.embedding.cache_dir) if config.embedding.cache and embedding_service else None
        policy = ToolPolicy(config)
        crawled = crawl_kernel(kernel)
        policy.check_names([t.full_name for t in crawled])
        index = await ToolIndex.build(
            policy.apply(crawled),
            embedding_service,
            bm25_config=config.bm25,
            batch_size=config.embedding.batch_size,
            progress=progress,
            cache=cache,
        )
        manager = cls(index, config)
        if discovery is not None:
            discovery._manager = manager
        manager.usage.attach(kernel)
        attach_execution_guard(kernel, manager)
        return manager

    # --- visibility ---------------------------------------------------------------------------
    def is_hidden(self, full_name: str) -> bool:
        """True for a function this agent may never see or run (excluded or disabled)."""
        return self.policy.is_hidden(full_name)

    def find_visible_tool(self, name: str) -> ToolMetadata | None:
        """A searchable tool by full name (``Plugin-function`` or ``Plugin.function``) or unique bare name."""
        name = name.strip()
        candidates = {name, name.replace(".", "-", 1)}
        for candidate in candidates:
            if candidate in self._searchable:
                return self.index.get(candidate)
        bare = [n for n in self._searchable if n.split("-", 1)[-1] == name]
        return self.index.get(bare[0]) if len(bare) == 1 else None

    async def discover(self, query: str) -> list[ToolMetadata]:
        """Searchable tools matching `query` (best first); every searchable tool for an empty query."""
        if not query.strip():
            return [t for t in self.index.tools if t.full_name in self._searchable]
        ranking = await rank_tools(self.index, query, self.config, allowed=self._searchable)
        return [s.tool for s in ranking.tools if s.name_match or s.score >= MIN_MATCH_SCORE]

    # --- selection ----------------------------------------------------------------------------
    async def select(
        self, query: str, *, allowed: set[str] | None = None, extra_pins: Sequence[tuple[str, str]] = ()
    ) -> Selection:
        """Rank, cut by threshold and ``top_k``, then add pinned tools. Never raises for a query.

        `allowed` narrows everything (e.g. the caller's own filters); `extra_pins` are
        ``(name, reason)`` pairs such as tools found with discovery.
        """
        config = self.config
        candidates = self._searchable if allowed is None else self._searchable & set(allowed)
        ranking = await rank_tools(self.index, query, config, limit=max(config.top_k * 4, 20), allowed=candidates)
        decisions: list[ToolDecision] = []
        names: list[str] = []
        previous: float | None = None
        cut_by_gap = False
        for scored in ranking.tools:
            name = scored.full_name
            gap = previous is not None and scored.score < config.autocut_ratio * previous
            if len(names) >= config.top_k:
                reason, kept = f"cut: beyond top_k={config.top_k}", False
            elif scored.name_match:
                reason, kept = "kept: the query names this tool", True
            elif config.cutoff == "autocut":
                cut_by_gap = cut_by_gap or gap
                kept = not cut_by_gap
                reason = (
                    f"cut: after a score gap (below {config.autocut_ratio:.2f} x the previous score)"
                    if cut_by_gap
                    else f"kept: score {scored.score:.2f}, no gap before it"
                )
            elif scored.score >= config.similarity_threshold:
                reason = f"kept: score {scored.score:.2f} >= threshold {config.similarity_threshold:.2f}"
                kept = True
            else:
                reason = f"cut: score {scored.score:.2f} < threshold {config.similarity_threshold:.2f}"
                kept = False
            if kept:
                names.append(name)
            if not scored.name_match:
                previous = scored.score
            decisions.append(ToolDecision(name, kept, reason, scored.score, scored.method_scores))

        pins = [*extra_pins]
        pins += [(n, "pinned: always_include") for n in [*config.always_include, *self.policy.pinned()]]
        visible = {t.full_name for t in self.index.tools if not self.policy.is_hidden(t.full_name)}
        for name in self.usage.most_used(config.always_include_top_n_used, visible):
            pins.append((name, f"pinned: among the {config.always_include_top_n_used} most used tools"))
        if config.enabled:
            pins += [(n, "pinned: discovery tool") for n in self.discovery_names]
        for name, reason in pins:
            if name in names or name not in visible or (allowed is not None and name not in allowed):
                continue
            names.append(name)
            decisions = [d for d in decisions if d.full_name != name]
            decisions.append(ToolDecision(name, True, reason))
        return Selection(names, ranking, decisions)

    async def select_for_history(
        self,
        history: ChatHistory,
        *,
        allowed: set[str] | None = None,
        strategy: QueryStrategy | None = None,
    ) -> Selection:
        """Select for the next request of a conversation: query from the history, plus discovered tools."""
        query = build_query(history, strategy or self.config.query_strategy)
        found = discovered_in(history, self, self.config.discovery.max_loaded) if self.discovery_names else []
        return await self.select(
            query, allowed=allowed, extra_pins=[(n, "pinned: found with discovery") for n in found]
        )

    async def filter_tools(self, query: str) -> list[str]:
        """Full names (``Plugin-function``) to send for `query`: ranked best first, then pinned tools."""
        return (await self.select(query)).names

    async def explain(self, query: str) -> list[ToolDecision]:
        """Per ranked tool: the score of each method, and why it was kept or cut."""
        return (await self.select(query)).decisions

    def wrap(self, service: ChatCompletionClientBase, query_strategy: QueryStrategy | None = None) -> Any:
        """`service` wrapped so that every request it sends carries only the selected tools.

        The query is built from the chat history (``query_strategy``, default from the config).
        """
        from sk_toolfilter.service import wrap_chat_service

        return wrap_chat_service(service, self, query_strategy or self.config.query_strategy)

    async def prepare_execution_settings(self, query: str | ChatHistory, base_settings: SettingsT) -> SettingsT:
        """A clone of `base_settings` offering only the selected functions; the base is never mutated.

        `query` is the text to match, or a chat history (then the query is built from the
        conversation and tools found with discovery are included). With ``enabled: false`` the base
        settings are returned unchanged. With nothing selected and nothing pinned the clone offers
        no tools at all.
        """
        if not self.config.enabled:
            return base_settings
        allowed = allowed_by_behavior(base_settings.function_choice_behavior, self.index.names)
        if isinstance(query, str):
            selection = await self.select(query, allowed=allowed)
        else:
            selection = await self.select_for_history(query, allowed=allowed)
        return clone_with_functions(base_settings, selection.names)
