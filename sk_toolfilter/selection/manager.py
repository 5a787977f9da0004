"""ToolFilterManager: per request, pick the few tools that matter and clone the settings to match."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, TypeVar

from sk_toolfilter._compat import moved_attributes
from sk_toolfilter.basics.progress import ProgressCallback
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.bulk import collector_paused
from sk_toolfilter.retrieval.cache import EmbeddingCache
from sk_toolfilter.retrieval.cutoff import ToolDecision
from sk_toolfilter.retrieval.embeddings import create_embedding_service
from sk_toolfilter.retrieval.encoders import EmbeddingService
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.rerank import check_rerank_model
from sk_toolfilter.selection.call_counts import CallCounter
from sk_toolfilter.selection.catalog_upkeep import Catalog, build_first_index
from sk_toolfilter.selection.learning import Learning
from sk_toolfilter.selection.lookup import CatalogMatches, find_searchable, search_catalog
from sk_toolfilter.selection.offer import Offer
from sk_toolfilter.selection.pipeline import (
    SecondStage,
    Selection,
    SelectionRequest,
)
from sk_toolfilter.selection.provider_search import refuse_in_semantic_kernel
from sk_toolfilter.selection.query import QueryStrategy
from sk_toolfilter.selection.request_path import ConversationPins, RequestPath
from sk_toolfilter.selection.settings import allowed_by_behavior, clone_with_functions
from sk_toolfilter.selection.sticky import StickyLists
from sk_toolfilter.selection.tool_source import KernelTools, ToolSource
from sk_toolfilter.selection.turns import Turn
from sk_toolfilter.selection.visibility import ToolPolicy, resolve_bare_names
from sk_toolfilter.store.conversation_state import ConversationState
from sk_toolfilter.store.shared_index import SharedIndex
from sk_toolfilter.telemetry import Telemetry

logger = library_logger(__name__)

if TYPE_CHECKING:
    from semantic_kernel import Kernel
    from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
    from semantic_kernel.contents import ChatHistory

SettingsT = TypeVar("SettingsT", bound="PromptExecutionSettings")


class ToolFilterManager:
    """Selects tools for each request from a :class:`ToolIndex` according to a :class:`ToolFilterConfig`.

    ``always_include`` names must be full names of indexed, visible functions (``Plugin-function``);
    an unknown name raises :class:`UnknownToolError` listing the closest real names.
    """

    def __init__(
        self, index: ToolIndex, config: ToolFilterConfig | None = None, *, usage: CallCounter | None = None
    ) -> None:
        self.config = resolve_bare_names(config or ToolFilterConfig(), index.names)
        self.usage = usage or CallCounter()
        self.policy = ToolPolicy(self.config)
        self.policy.check_pins(self.config.always_include, index.names)
        check_rerank_model(self.config.rerank)  # a wrong rerank.model fails here, not per request
        self._path = RequestPath.build(index, self.config, self.policy, self.usage)
        self._upkeep, self._selector = self._path.upkeep, self._path.selector
        self.sticky: StickyLists = self._path.sticky
        """The sticky tool list of each conversation (``selection_mode: sticky``), shared by every adapter."""
        self.telemetry: Telemetry = self._path.telemetry
        """Spans and metrics of selections (off unless the app turns telemetry on)."""
        self.learning: Learning = self._path.learning
        """Learning from use (``tool_filtering.learning``): what similar past requests called, and co-usage."""

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
            self._path.conversation_pins.pop(key, None)
        else:
            self._path.conversation_pins[key] = source

    def set_second_stage(self, stage: SecondStage | None) -> None:
        """Run `stage` between the first-stage ranking and the cut of every selection (None removes it).

        :func:`sk_toolfilter.create_tool_filter` sets one for ``rerank: {type: llm}``; see
        :class:`sk_toolfilter.LLMToolPicker` to build one in code.
        """
        self._selector.second_stage = stage

    @property
    def second_stage(self) -> SecondStage | None:
        """The stage between ranking and cut (the model's pick), or None."""
        return self._selector.second_stage

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
        """Index `kernel` (embedding with `embedding_service`, or the one ``config.embedding`` names),
        count the functions the model calls on it, and follow it (plugins added or removed later are
        re-indexed before the next selection). Selection only: :func:`sk_toolfilter.create_tool_filter`
        adds the discovery plugin and the execution guard."""
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
            if first.store is not None:
                await manager._path.share(first.store)
            return manager

    @property
    def index_store(self) -> SharedIndex | None:
        """The shared store the index comes from (``index.store``), or None for an in-memory index."""
        return self._upkeep.store

    @property
    def conversation_state(self) -> ConversationState | None:
        """Where replicas share what conversations leave on them (tool-search answers, stored chains), or
        None without a shared store."""
        store = self._upkeep.store
        return store.conversation_state() if store is not None else None

    async def vectors_ready(self) -> None:
        """Wait until the tools' vectors are built (see ``embedding.background_above``) and the small-talk
        exemplars are ready (embedded here when no shipped set matches this CPU's arithmetic)."""
        await self._upkeep.vectors_ready()
        await self.index.small_talk_ready()

    async def aclose(self) -> None:
        """Write what co-usage and learning from use learned (their files, the shared store's tables) and
        release the store's connections (selections keep working from memory)."""
        await self._path.aclose()
        await self._upkeep.aclose()

    async def refresh(self, *, force: bool = False) -> bool:
        """Re-index if the source's tools changed (or `force`); True when a new index was swapped in.
        Only new or changed tools are embedded; the new index is built aside and swapped in atomically
        (selections meanwhile keep the old one and never emit a tool that is gone)."""
        return await self._upkeep.refresh(force=force)

    @property
    def source(self) -> ToolSource | None:
        """What the manager follows (an SK kernel, an Agent Framework tool list), or None."""
        return self._upkeep.source

    # --- visibility ---------------------------------------------------------------------------
    def is_hidden(self, full_name: str) -> bool:
        """True for a function this agent may never see or run (excluded or disabled)."""
        return self.policy.is_hidden(full_name)

    def find_visible_tool(self, name: str) -> ToolMetadata | None:
        """A searchable tool by full name (``Plugin-function`` or ``Plugin.function``) or unique bare name."""
        return find_searchable(self._catalog, name, self._upkeep.exists)

    async def discover(self, query: str, *, learned: bool = False) -> list[ToolMetadata]:
        """Searchable tools matching `query` (best first); every searchable tool for an empty query."""
        return (await self.search_catalog(query, learned=learned)).matched

    async def search_catalog(self, query: str, *, learned: bool = False, nearest: int = 0) -> CatalogMatches:
        """:meth:`discover`'s matches and, up to `nearest` tools in all, the best-ranked others (not for
        small talk). `learned`: reordered by learning from use in the scope and conversation the context names."""
        await self.refresh()
        memory = self.learning.usable(*self._path.learning_keys(None)) if learned else None
        return await search_catalog(self._catalog, query, self.config, self._upkeep.exists, memory, nearest=nearest)

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

        `allowed` narrows everything (e.g. the caller's own filters); `extra_pins` are ``(name, reason)``
        pairs such as tools found with discovery. With `turn` (the current user turn of an agent loop)
        the ``agent_loop`` policy applies: the turn's tools stay and tools used together with the
        best-ranked ones are added, within one budget per request. With telemetry on, one span each."""
        return await self._path.select(SelectionRequest(query, allowed, extra_pins, turn, previous_turn))

    async def select_for_history(
        self,
        history: ChatHistory,
        *,
        allowed: set[str] | None = None,
        strategy: QueryStrategy | None = None,
    ) -> Selection:
        """Select for the next request of a conversation: query from the history, plus the tools
        its registered conversation-pin sources keep on offer (see :meth:`set_conversation_pins`).
        Co-usage learns from the conversation's completed turns on the way (:mod:`.request_path`)."""
        return await self._path.select(self._path.read(history, allowed, strategy))

    async def filter_tools(self, query: str) -> list[str]:
        """Full names (``Plugin-function``) to send for `query`, best first, then pins: :meth:`select`'s. A bare
        query has no turn (no agent loop): what the adapters send is :meth:`select_for_history`'s."""
        return (await self._path.select(SelectionRequest(query, explained=False))).names

    async def explain(self, query: str) -> list[ToolDecision]:
        """Per ranked tool: the score of each method, and why it was kept or cut."""
        return (await self.select(query)).decisions

    async def offer(
        self, conversation: str | ChatHistory, on_offer: Sequence[str], *, strategy: QueryStrategy | None = None
    ) -> Offer:
        """The tools one model request carries, among the names its framework put `on_offer`: every rule
        about what is sent is decided here (:mod:`sk_toolfilter.selection.offer`). Filtering off hides
        only excluded and disabled tools; on, it sends the selection for `conversation` (a request text
        or a chat history) in the order on offer, or its sticky order; a tool the index does not know
        stays on offer within ``max_tools_total``. The adapters only map names back to their tools."""
        return await self._path.offer(conversation, on_offer, strategy)

    async def record(
        self, conversation: str | ChatHistory, tools: Sequence[str], *, allowed: set[str] | None = None
    ) -> int:
        """Learning from use, for apps that call the model themselves: the model called `tools` for the
        current turn of `conversation` (a history or a text); rows learned (:meth:`RequestPath.record`)."""
        return await self._path.record(conversation, tools, allowed)

    def capture(
        self, conversation: str | ChatHistory, tools: Sequence[str], *, allowed: Collection[str] | None = None
    ) -> None:
        """:meth:`record` beside the request (what the adapters call on every response that calls tools)."""
        self._path.capture(conversation, tools, allowed)

    async def prepare_execution_settings(self, query: str | ChatHistory, base_settings: SettingsT) -> SettingsT:
        """A clone of `base_settings` offering only the selected functions; the base is never mutated.

        `query` is the text to match, or a chat history (the query built from the conversation, tools
        found with discovery included). On offer: the source's functions the base's
        ``FunctionChoiceBehavior`` filters allow; :meth:`offer` decides which are sent (``enabled:
        false`` and nothing hidden: the base itself; nothing selected or pinned: no tools at all)."""
        refuse_in_semantic_kernel(self.config.provider_search)
        everything = self._upkeep.source_names() or self.index.names
        allowed = allowed_by_behavior(base_settings.function_choice_behavior, everything)
        on_offer = [n for n in everything if allowed is None or n in allowed]
        offer = await self.offer(query, on_offer)
        return clone_with_functions(base_settings, offer.names) if offer.narrowed else base_settings


__getattr__ = moved_attributes(__name__)
