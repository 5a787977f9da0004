"""The Agent Framework hooks: a chat middleware that narrows every model call's tools, and a
function middleware that refuses calls to tools the model may not use or was not offered.

Agent Framework runs chat middleware inside its function-calling loop, so every model call of a
turn (and of a streamed turn) passes :class:`ToolFilterMiddleware`. It replaces the call's
``options`` with a copy carrying the selected tools; the agent's own tool list never changes.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from agent_framework import ChatContext, ChatMiddleware, FunctionInvocationContext, FunctionMiddleware

from sk_toolfilter.agent_framework.messages import to_chat_history
from sk_toolfilter.agent_framework.provider_search import check_client, mark_deferred
from sk_toolfilter.agent_framework.tools import function_tools
from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.provider_wire.call import call_for_offer, set_call
from sk_toolfilter.selection.learning import context_from_arguments, conversation_owner
from sk_toolfilter.selection.provider_search import check_tool_names
from sk_toolfilter.selection.query import QueryStrategy
from sk_toolfilter.selection.refusals import refusal, report_refusal

if TYPE_CHECKING:
    from semantic_kernel.contents import ChatHistory

    from sk_toolfilter.selection.manager import ToolFilterManager
    from sk_toolfilter.selection.offer import Offer

# The tools the latest model call of this task offered (None: nothing was narrowed, nothing is checked).
# Agent Framework runs a turn's model calls and tool calls in one task (parallel tool calls in
# tasks that copy its context), so the guard sees the offer of the call that asked for the tool.
_OFFERED: ContextVar[tuple[int, frozenset[str]] | None] = ContextVar("sk_toolfilter_af_offered", default=None)

MAX_CHAINS = 1024
"""Stored chains (``previous_response_id``, server conversations) a middleware remembers the messages of."""


def response_calls(response: Any) -> list[str]:
    """The function names a chat response calls, in order, once each."""
    names = [
        content.name
        for message in getattr(response, "messages", None) or ()
        for content in getattr(message, "contents", None) or ()
        if getattr(content, "type", None) == "function_call" and getattr(content, "name", None)
    ]
    return list(dict.fromkeys(names))


def _messages_of(stored: Any) -> list[Any] | None:
    """A chain's messages as another replica stored them (None for nothing, or anything malformed)."""
    if not isinstance(stored, list):
        return None
    from agent_framework import Message

    try:
        return [Message.from_dict(item) for item in stored if isinstance(item, dict)]
    except Exception:  # a row this version cannot read: the call goes on with its own messages
        return None


class ToolFilterMiddleware(ChatMiddleware):
    """Narrows the tools of every model call to the manager's selection for the conversation so far."""

    def __init__(self, manager: ToolFilterManager, query_strategy: QueryStrategy | None = None) -> None:
        self.manager = manager
        self.query_strategy: QueryStrategy = query_strategy or manager.config.query_strategy
        self._chains: OrderedDict[str, list[Any]] = OrderedDict()
        self._writes: set[asyncio.Task[None]] = set()
        """The messages of each stored chain this process served, by the response (or server conversation)
        id its next call continues: Agent Framework sends a stored chain's later calls with only their new
        messages, so the filter reads the conversation as a stateless one shows it (bounded: the
        :data:`MAX_CHAINS` most recent)."""
        self.last_selection: list[str] = []
        """The names offered on the most recent model call (empty when no tools were sent)."""
        self.last_selection_seconds = 0.0
        """Time the most recent model call spent selecting its tools."""
        self.last_offer: Offer | None = None
        """The most recent model call's :class:`~sk_toolfilter.selection.offer.Offer` (evidence, second-stage cost)."""

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        options = dict(context.options or {})
        tools = list(options.get("tools") or ())
        functions = function_tools(tools)
        search = self.manager.config.provider_search
        if search.enabled:  # before anything is sent: a client without tool search is an error, never a 400
            check_client(
                context.client, options.get("model"), search.provider, search.unit, search.model_supports_tool_search
            )
        if not functions:
            self.last_selection = []
            mark_deferred((), ())
            set_call(None)
            await call_next()
            return
        by_name = {f.name: f for f, _ in functions}
        if search.enabled:
            check_tool_names(getattr(context.client, "tool_search_provider", ""), search.search, by_name)
        ranked = {id(f) for f, _ in functions}
        # Entries the filter cannot rank (hosted tools) are the caller's explicit choice: they stay on offer.
        passthrough = [t for t in tools if id(t) not in ranked]
        messages = await self._whole_conversation(context)
        with context_from_arguments(self.manager.config.learning, context.kwargs):
            history, offer = await self._select(messages, list(by_name))
        deferred = offer.deferred
        # provider search: the rest goes deferred (the client marks it)
        kept = [*(by_name[n] for n in self.last_selection), *(by_name[n] for n in deferred), *passthrough]
        options["tools"] = kept or None
        if not kept:
            options.pop("tool_choice", None)
        context.options = options  # a copy: the next call of the loop starts from the agent's full list
        provider = getattr(context.client, "tool_search_provider", "")
        if offer.filter_answers and context.stream and provider == "anthropic":
            raise ConfigError(
                "tool_filtering.provider_search.search: filter answers Claude's searches on non-streamed runs only "
                "(the answer needs the whole reply): run without streaming, or set search: provider"
            )
        mark_deferred(deferred, kept, answered=offer.filter_answers)

        def within() -> AbstractContextManager[Any]:  # the run's learning context: the wire answers outside it
            return context_from_arguments(self.manager.config.learning, context.kwargs)

        with within():
            owner = conversation_owner(history) if offer.filter_answers else ""  # whose answers (the desk's)
        set_call(call_for_offer(self.manager, offer, provider, owner=owner, allowed=set(by_name), within=within))
        _OFFERED.set((id(self.manager), frozenset([*self.last_selection, *deferred])))
        await call_next()
        self._capture(context, history, set(by_name), messages)

    async def _whole_conversation(self, context: ChatContext) -> list[Any]:
        """The call's messages after those of the stored chain it continues (``conversation_id``: a stored
        response or a server conversation this replica served, else one another replica shared through
        the store); else its messages as they are."""
        chain = (context.options or {}).get("conversation_id")
        if not isinstance(chain, str) or not chain:
            return list(context.messages)
        earlier = self._chains.get(chain)
        shared = self.manager.conversation_state
        if earlier is None and shared is not None:
            earlier = _messages_of(await shared.get("chain", chain))
        return [*earlier, *context.messages] if earlier else list(context.messages)

    def _remember_chain(self, response: Any, messages: list[Any]) -> None:
        """A stored response (or server conversation) the next call may continue: its conversation so far
        (with a shared store, written there too, beside the request: :meth:`settled` waits for it)."""
        chain = getattr(response, "conversation_id", None) or getattr(response, "response_id", None)
        if not isinstance(chain, str) or not chain:
            return
        whole = [*messages, *(getattr(response, "messages", None) or ())]
        self._chains[chain] = whole
        self._chains.move_to_end(chain)
        while len(self._chains) > MAX_CHAINS:
            self._chains.popitem(last=False)
        shared = self.manager.conversation_state
        if shared is not None:
            value = [m.to_dict() for m in whole if hasattr(m, "to_dict")]
            task = asyncio.get_running_loop().create_task(shared.put("chain", chain, value))
            self._writes.add(task)
            task.add_done_callback(self._writes.discard)

    async def settled(self) -> None:
        """Wait for what this middleware is writing to the shared store (tests, shutdown)."""
        while self._writes:
            await asyncio.gather(*list(self._writes), return_exceptions=True)

    def _capture(self, context: ChatContext, history: ChatHistory, allowed: set[str], messages: list[Any]) -> None:
        """Learning from use: the response's function calls teach the turn they answer, now (streamed:
        once the stream is finalized), within the run's scope and conversation; a stored response is
        remembered for the call that continues it."""

        def capture(response: Any) -> Any:
            with context_from_arguments(self.manager.config.learning, context.kwargs):
                self.manager.capture(history, response_calls(response), allowed=allowed)
            self._remember_chain(response, messages)
            return response

        if context.stream:
            context.stream_result_hooks.append(capture)
        elif context.result is not None:
            capture(context.result)

    async def _select(self, messages: list[Any], names: list[str]) -> tuple[ChatHistory, Offer]:
        history = to_chat_history(messages)
        offer = await self.manager.offer(history, names, strategy=self.query_strategy)
        self.last_offer = offer
        self.last_selection_seconds = offer.seconds
        self.last_selection = list(offer.names)
        return history, offer


class ToolGuardMiddleware(FunctionMiddleware):
    """Refuses a call to a tool this agent may never use, or one the model was not offered on the
    call that asked for it (it is loaded for the next call: the conversation now names it). Counts
    the calls that run (``always_include_top_n_used``)."""

    def __init__(self, manager: ToolFilterManager) -> None:
        self.manager = manager

    async def process(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]) -> None:
        name, manager = context.function.name, self.manager
        offered = _OFFERED.get()
        outcome = refusal(manager, name, offered[1] if offered is not None and offered[0] == id(manager) else None)
        if outcome is None:
            manager.usage.record(name)
            await call_next()
            return
        answer, level = outcome
        report_refusal(manager, name, answer, level)
        context.result = answer
