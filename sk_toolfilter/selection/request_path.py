"""One request, read top to bottom.

    read the conversation ─▶ learn from its completed turns (learning from use: one step) ─▶ snapshot
    ─▶ the pipeline's stages (first stage ─▶ second stage ─▶ cut ─▶ all fit | agent loop ─▶ pins ─▶ cap)
    ─▶ wire order ─▶ span

Every side effect of a request is a named step here: what learning from use learns from the
conversation (and its file and table), the re-index a changed source needs, the sticky list's update. The stages
themselves are :mod:`sk_toolfilter.selection.pipeline`, run by the
:class:`~sk_toolfilter.selection.selector.Selector`; :class:`~sk_toolfilter.selection.manager.ToolFilterManager`
keeps construction, lifecycle and the thin public verbs that call this.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.retrieval.encoders import embedding_model_id
from sk_toolfilter.selection.call_counts import CallCounter
from sk_toolfilter.selection.catalog_upkeep import CatalogUpkeep
from sk_toolfilter.selection.learning import Learning, current_context, fingerprint
from sk_toolfilter.selection.offer import Offer, search_offer, selected_offer, visible_offer
from sk_toolfilter.selection.pipeline import Selection, SelectionRequest, take_snapshot
from sk_toolfilter.selection.query import QueryStrategy, build_query
from sk_toolfilter.selection.selector import Selector
from sk_toolfilter.selection.span import SpanWriter
from sk_toolfilter.selection.sticky import StickyLists
from sk_toolfilter.selection.turns import Turn, conversation_opening, split_turns
from sk_toolfilter.selection.visibility import ToolPolicy
from sk_toolfilter.store.shared_index import SharedIndex
from sk_toolfilter.telemetry import Telemetry

if TYPE_CHECKING:
    from semantic_kernel.contents import ChatHistory

    from sk_toolfilter.retrieval.index import ToolIndex

ConversationPins = Callable[["ChatHistory"], Sequence[tuple[str, str]]]
"""Tools a conversation asks to keep on offer, as ``(full_name, reason)`` pairs (e.g. found with discovery)."""


@dataclass
class RequestPath:
    """The parts one request passes through, and the steps it takes (one manager's)."""

    config: ToolFilterConfig
    policy: ToolPolicy
    upkeep: CatalogUpkeep
    selector: Selector
    sticky: StickyLists
    telemetry: Telemetry
    learning: Learning
    conversation_pins: dict[str, ConversationPins] = field(default_factory=dict)
    span: SpanWriter = field(default_factory=SpanWriter)
    _learned_index: object = None

    @classmethod
    def build(cls, index: ToolIndex, config: ToolFilterConfig, policy: ToolPolicy, calls: CallCounter) -> RequestPath:
        """One manager's request path, built whole: the catalog it selects from, learning from use (the one
        learner: what similar requests called, and co-usage), the selector that reads it, the sticky
        lists and telemetry (embedding incidents included)."""
        service = index.embedding_service
        model = embedding_model_id(service) if service is not None else "none"
        learning = Learning(config.learning, config.learning.catalog or config.index.catalog, model, policy)
        telemetry = Telemetry()
        index.circuit.on_incident = telemetry.embedding_incident
        upkeep, selector = CatalogUpkeep(index, config, policy), Selector(config, policy, calls, learning)
        return cls(config, policy, upkeep, selector, StickyLists(config.sticky_max_tools), telemetry, learning)

    async def offer(
        self, conversation: str | ChatHistory, on_offer: Sequence[str], strategy: QueryStrategy | None
    ) -> Offer:
        """What one model request carries (see :meth:`ToolFilterManager.offer`): loaded and, with provider
        tool search, deferred."""
        offer = await self._loaded(conversation, on_offer, strategy)
        search = self.config.provider_search
        if not search.enabled:
            return offer
        return search_offer(self, on_offer, offer.names, search, offer)

    @property
    def discovery_names(self) -> list[str]:
        """The discovery tools (never deferred: :func:`~sk_toolfilter.selection.offer.search_offer` reads them here)."""
        return self.upkeep.catalog.discovery_names

    def is_hidden(self, full_name: str) -> bool:
        return self.policy.is_hidden(full_name)

    async def _loaded(
        self, conversation: str | ChatHistory, on_offer: Sequence[str], strategy: QueryStrategy | None
    ) -> Offer:
        """What one request sends loaded: the selection among `on_offer` (filtering off: all but the hidden)."""
        if not self.config.enabled:
            return visible_offer(on_offer, {n for n in on_offer if self.policy.is_hidden(n)})
        started = time.perf_counter()
        allowed = set(on_offer)
        if isinstance(conversation, str):
            selection = await self.select(SelectionRequest(conversation, allowed, explained=False))
        else:
            selection = await self.select(self.read(conversation, allowed, strategy, explained=False))
        order = None
        search = self.config.provider_search
        frozen = search.enabled and search.search == "filter"  # found tools arrive in the conversation
        if (self.config.selection_mode == "sticky" or frozen) and not isinstance(conversation, str):
            order = self.sticky.update(conversation, selection.names, grow=not frozen)  # wire order, per conversation
        index = self.upkeep.catalog.index
        unknown = [n for n in on_offer if n not in index and not self.policy.is_hidden(n)]
        seconds = time.perf_counter() - started
        return selected_offer(on_offer, selection, order, unknown, self.config.max_tools_total, seconds)

    def read(
        self, history: ChatHistory, allowed: set[str] | None, strategy: QueryStrategy | None, *, explained: bool = True
    ) -> SelectionRequest:
        """Read the conversation: its query, the tools its pin sources keep on offer, the current, previous
        and completed turns (what :meth:`learn_from_turns` learns). `explained`: see :class:`SelectionRequest`."""
        completed, turn = split_turns(history)
        query = build_query(history, strategy or self.config.query_strategy)
        pins = [pin for source in list(self.conversation_pins.values()) for pin in source(history)]
        previous = completed[-1] if completed else None
        scope, conversation = self.learning_keys(history)
        return SelectionRequest(query, allowed, pins, turn, previous, completed, explained, scope, conversation)

    def learning_keys(self, history: ChatHistory | None) -> tuple[str | None, str | None]:
        """(stored scope, conversation fingerprint) of a request: the scope and conversation named by
        :func:`~sk_toolfilter.selection.learning.learning_context` (the adapters set it from the kernel or
        run arguments), else the shared scope and the history's opening (its messages up to and including
        the first user message: two conversations that open alike count as one, never one as two)."""
        if not self.learning.enabled:
            return "", None
        scope_value, conversation = current_context()
        scope = self.learning.scope_of(scope_value)
        catalog = self.learning.catalog
        if conversation is not None:
            return scope, fingerprint(catalog, "conversation", str(conversation))
        return scope, None if history is None else fingerprint(catalog, "opening", *conversation_opening(history))

    async def share(self, store: SharedIndex) -> None:
        """With a shared store: learning from use (when on; co-usage is one of its signals) learns from,
        and shares with, the other replicas."""
        await self.learning.share(store)

    async def aclose(self) -> None:
        """Write what learning from use learned: its file, a last sync with the store."""
        await self.learning.aclose()

    def capture(
        self, conversation: str | ChatHistory, calls: Sequence[str], allowed: Collection[str] | None = None
    ) -> None:
        """A model response called `calls`: learn the turn it answers now, beside the request (its calls
        so far with these) — a stateless endpoint, the last turn, manual calling and streaming all learn,
        and the same turn seen again in a later history is not learned twice (one row per request)."""
        if (called := self._called(conversation, calls, allowed)) is not None:
            index, turn, permits, scope, talk = called
            self.learning.learn_soon(index, [turn], permits, conversation=talk, scope=scope)

    async def record(
        self, conversation: str | ChatHistory, calls: Sequence[str], allowed: Collection[str] | None = None
    ) -> int:
        """:meth:`capture`, learned now: for apps that call the model themselves after
        ``prepare_execution_settings`` (the SK wrapper and the Agent Framework middleware capture every
        response on their own). The turn's calls so far with these are learned (a later request showing
        the same turn learns nothing more), within the scope and conversation
        :func:`~sk_toolfilter.learning_context` names; only tools in the catalog, visible, not discovery
        tools and in `allowed` (when given). Returns how many rows were learned (0 with learning off,
        without tools, or without vectors)."""
        if (called := self._called(conversation, calls, allowed)) is None:
            return 0
        index, turn, permits, scope, talk = called
        return await self.learning.learn(index, [turn], permits, conversation=talk, scope=scope)

    def _called(
        self, conversation: str | ChatHistory, calls: Sequence[str], allowed: Collection[str] | None
    ) -> tuple[ToolIndex, Turn, Callable[[str], bool], str | None, str | None] | None:
        """What a response that called `calls` teaches: (the index, the turn they belong to with its calls
        so far, which tools may be learned, its stored scope, its conversation); None with learning off,
        no calls, or no turn."""
        learning = self.learning
        if not learning.enabled or not calls:
            return None
        if isinstance(conversation, str):
            turn = Turn(conversation.strip(), list(dict.fromkeys(calls))) if conversation.strip() else None
            scope, talk = self.learning_keys(None)
        else:
            completed, current = split_turns(conversation)
            last = current or (completed[-1] if completed else None)
            turn = Turn(last.request, list(dict.fromkeys([*last.calls, *calls]))) if last is not None else None
            scope, talk = self.learning_keys(conversation)
        if turn is None:
            return None
        index, discovery = self.upkeep.catalog.index, set(self.upkeep.catalog.discovery_names)
        return index, turn, lambda n: learning.permits(n, index, discovery, allowed), scope, talk

    async def learn_from_turns(self, request: SelectionRequest) -> None:
        """The one step where a request teaches: its conversation's completed turns are remembered by
        learning from use (request vectors and the tools called that were in the catalog, visible and
        allowed here; tools the catalog lost are forgotten first) — the one memory co-usage reads too,
        under the same scope, conversation rule, bounds and forget."""
        learning = self.learning
        if not learning.enabled:
            return
        catalog = self.upkeep.catalog
        if catalog.index is not self._learned_index:
            learning.forget_removed(catalog.index)
            self._learned_index = catalog.index
        if request.completed:
            index, discovery, allowed = catalog.index, set(catalog.discovery_names), request.allowed
            learning.learn_soon(
                index,
                request.completed,
                lambda n: learning.permits(n, index, discovery, allowed),
                conversation=request.conversation,
                scope=request.scope,
            )
        learning.tick()

    async def select(self, request: SelectionRequest) -> Selection:
        """Re-index a changed source, take the snapshot, run the pipeline's stages; one span when
        telemetry is on. A request built without a scope (a plain text) takes the one the context names."""
        if request.scope == "" and self.learning.config.scope != "shared":
            request = replace(request, scope=self.learning_keys(None)[0])
        with self.telemetry.selection() as record:
            await self.upkeep.refresh()
            upkeep = self.upkeep
            await self.learn_from_turns(request)
            snapshot = take_snapshot(upkeep.catalog, request.allowed, upkeep.gone(), upkeep.exists)
            selection = await self.selector.run(request, snapshot)
            if self.telemetry.enabled:
                budget = self.selector.budget(request.turn)
                method = self.config.search_method
                self.span.describe(record, upkeep.catalog, selection, query=request.query, method=method, budget=budget)
        return selection
