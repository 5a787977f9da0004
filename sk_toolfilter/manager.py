"""ToolFilterManager: per request, pick the few tools that matter and clone the settings to match."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sk_toolfilter.cache import EmbeddingCache
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.embeddings import create_embedding_service
from sk_toolfilter.errors import UnknownToolError
from sk_toolfilter.index import ProgressCallback, ToolIndex
from sk_toolfilter.query import QueryStrategy
from sk_toolfilter.search import Ranking, rank_tools
from sk_toolfilter.settings import allowed_by_behavior, clone_with_functions
from sk_toolfilter.usage import UsageTracker

if TYPE_CHECKING:
    from semantic_kernel import Kernel
    from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
    from semantic_kernel.connectors.ai.embedding_generator_base import EmbeddingGeneratorBase
    from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings

logger = logging.getLogger(__name__)

SettingsT = TypeVar("SettingsT", bound="PromptExecutionSettings")


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

    ``always_include`` names must be full names of indexed functions (``Plugin-function``); an unknown
    name raises :class:`UnknownToolError` listing the closest real names.
    """

    def __init__(
        self, index: ToolIndex, config: ToolFilterConfig | None = None, *, usage: UsageTracker | None = None
    ) -> None:
        self.index = index
        self.config = config or ToolFilterConfig()
        self.usage = usage or UsageTracker()
        for position, name in enumerate(self.config.always_include):
            if name not in index:
                raise UnknownToolError(f"tool_filtering.always_include[{position}]", name, index.names)

    @classmethod
    async def from_kernel(
        cls,
        kernel: Kernel,
        config: ToolFilterConfig | None = None,
        *,
        embedding_service: EmbeddingGeneratorBase | None = None,
        progress: ProgressCallback | None = None,
    ) -> ToolFilterManager:
        """Index `kernel` (embedding with `embedding_service`, or the one ``config.embedding`` names)
        and start counting the functions the model calls on it."""
        config = config or ToolFilterConfig()
        if embedding_service is None and config.search_method != "bm25":
            embedding_service = create_embedding_service(config.embedding)
        cache = EmbeddingCache(config.embedding.cache_dir) if config.embedding.cache and embedding_service else None
        index = await ToolIndex.build_from_kernel(
            kernel,
            embedding_service,
            bm25_config=config.bm25,
            batch_size=config.embedding.batch_size,
            progress=progress,
            cache=cache,
        )
        manager = cls(index, config)
        manager.usage.attach(kernel)
        return manager

    async def select(self, query: str, *, allowed: set[str] | None = None) -> Selection:
        """Rank, cut by threshold and ``top_k``, then add pinned tools. Never raises for a query."""
        config = self.config
        ranking = await rank_tools(self.index, query, config, limit=max(config.top_k * 4, 20), allowed=allowed)
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

        pins = [(n, "pinned: always_include") for n in config.always_include]
        for name in self.usage.most_used(config.always_include_top_n_used, self.index):
            pins.append((name, f"pinned: among the {config.always_include_top_n_used} most used tools"))
        for name, reason in pins:
            if name in names or (allowed is not None and name not in allowed):
                continue
            names.append(name)
            decisions = [d for d in decisions if d.full_name != name]
            decisions.append(ToolDecision(name, True, reason))
        return Selection(names, ranking, decisions)

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

    async def prepare_execution_settings(self, query: str, base_settings: SettingsT) -> SettingsT:
        """A clone of `base_settings` offering only the selected functions; the base is never mutated.

        With ``enabled: false`` the base settings are returned unchanged. With nothing selected and
        nothing pinned the clone offers no tools at all.
        """
        if not self.config.enabled:
            return base_settings
        allowed = allowed_by_behavior(base_settings.function_choice_behavior, self.index.names)
        selection = await self.select(query, allowed=allowed)
        return clone_with_functions(base_settings, selection.names)
