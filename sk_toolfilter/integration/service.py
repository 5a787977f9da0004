"""Drop-in filtering for any SK chat service: a wrapper that narrows the tools of every request.

The wrapper sees each model request after Semantic Kernel has filled ``settings.tools`` — the
first request of an agent turn, every request inside the auto-invoke loop, and streaming — and
keeps only the tools the :class:`ToolFilterManager` selects for the conversation so far. It works
on SK's per-call copy of the settings, so the caller's (or an agent's) own settings never change.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from pydantic import PrivateAttr
from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase

from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.selection.active import serving
from sk_toolfilter.selection.learning import context_from_arguments
from sk_toolfilter.selection.provider_search import refuse_in_semantic_kernel
from sk_toolfilter.selection.query import QueryStrategy
from sk_toolfilter.selection.settings import tool_name, tool_names

if TYPE_CHECKING:
    from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
    from semantic_kernel.contents import ChatHistory, ChatMessageContent, StreamingChatMessageContent

    from sk_toolfilter.selection.manager import ToolFilterManager
    from sk_toolfilter.selection.offer import Offer

logger = library_logger(__name__)


class FilteredChatCompletion(ChatCompletionClientBase):
    """Wraps a chat service so every request carries only the selected tools.

    Build it with :func:`wrap_chat_service` (or :func:`enable_tool_filtering` for every service on a
    kernel). It has the wrapped service's ``service_id`` and ``ai_model_id``; everything but the tool
    list is delegated unchanged.
    """

    SUPPORTS_FUNCTION_CALLING = True
    inner: ChatCompletionClientBase
    manager: Any
    query_strategy: QueryStrategy = "conversation"
    _offered: dict[int, list[Any]] = PrivateAttr(default_factory=dict)
    _last_selection: list[str] = PrivateAttr(default_factory=list)
    _last_seconds: float = PrivateAttr(default=0.0)
    _last_offer: Any = PrivateAttr(default=None)

    @property
    def last_selection(self) -> list[str]:
        """The names offered on the most recent request (empty when no tools were sent)."""
        return list(self._last_selection)

    @property
    def last_offer(self) -> Offer | None:
        """The most recent request's :class:`~sk_toolfilter.selection.offer.Offer` (its selection holds the
        evidence and the second stage's cost); None before the first filtered request."""
        return self._last_offer

    @property
    def last_selection_seconds(self) -> float:
        """Time the most recent request spent selecting its tools (0.0 when it did not filter)."""
        return self._last_seconds

    # --- delegation -------------------------------------------------------------------------
    def get_prompt_execution_settings_class(self) -> type[PromptExecutionSettings]:
        return self.inner.get_prompt_execution_settings_class()

    def _verify_function_choice_settings(self, settings: PromptExecutionSettings) -> None:
        self.inner._verify_function_choice_settings(settings)

    def _update_function_choice_settings_callback(self) -> Any:
        return self.inner._update_function_choice_settings_callback()

    def _reset_function_choice_settings(self, settings: PromptExecutionSettings) -> None:
        self.inner._reset_function_choice_settings(settings)

    def service_url(self) -> str | None:
        return self.inner.service_url()

    async def get_chat_message_contents(
        self, chat_history: ChatHistory, settings: PromptExecutionSettings, **kwargs: Any
    ) -> list[ChatMessageContent]:
        # discovery and the guard answer for this agent's manager; learning reads the run's scope
        with serving(self.manager), context_from_arguments(self.manager.config.learning, kwargs.get("arguments")):
            if not self.inner.SUPPORTS_FUNCTION_CALLING:
                return await self.inner.get_chat_message_contents(chat_history, settings, **kwargs)
            return await super().get_chat_message_contents(chat_history, settings, **kwargs)

    async def get_streaming_chat_message_contents(
        self, chat_history: ChatHistory, settings: PromptExecutionSettings, **kwargs: Any
    ) -> AsyncGenerator[list[StreamingChatMessageContent], Any]:
        with serving(self.manager), context_from_arguments(self.manager.config.learning, kwargs.get("arguments")):
            async for chunk in super().get_streaming_chat_message_contents(chat_history, settings, **kwargs):
                yield chunk

    # --- the hook ---------------------------------------------------------------------------
    async def _narrow(self, chat_history: ChatHistory, settings: PromptExecutionSettings) -> None:
        """Replace ``settings.tools`` with the selected subset (SK's per-call copy, not the caller's)."""
        manager: ToolFilterManager = self.manager
        key = id(settings)
        state = self._offered.get(key)
        current = getattr(settings, "tools", None)
        if state is None:
            # First request of this call: SK just filled the full list allowed by the caller's filters.
            state = self._offered[key] = [list(current or []), current]
            weakref.finalize(settings, self._offered.pop, key, None)
        elif current is not state[1]:
            # SK changed the tools itself (its last request after maximum_auto_invoke_attempts): respect it.
            self._last_selection = tool_names(current)
            return
        full = state[0]
        behavior = settings.function_choice_behavior
        if not full or behavior is None:
            self._last_selection = tool_names(full) if behavior else []
            return
        names = [tool_name(t) for t in full]
        names_on_offer = [n for n in names if n is not None]
        if len(names_on_offer) < len(names):
            logger.warning("sk-toolfilter: unrecognized tool format from %s; not filtering", type(self.inner))
            return
        offer = await manager.offer(chat_history, names_on_offer, strategy=self.query_strategy)
        self._last_offer = offer
        self._last_seconds = offer.seconds
        self._last_selection = list(offer.names)
        if not offer.narrowed:
            return
        by_name = dict(zip(names_on_offer, full, strict=True))
        kept = [by_name[n] for n in offer.names]
        # Only the wire list is narrowed. The caller's own filters stay as they were, so a model that
        # calls a visible tool it was not offered meets the execution guard's clear answer, not SK's
        # allow-list refusal (an ERROR with a traceback).
        # `tools` belongs to the OpenAI-style settings classes this wrapper serves, not to the base class.
        settings.tools = kept or None  # type: ignore[attr-defined]
        state[1] = settings.tools  # type: ignore[attr-defined]  # (pydantic may store a copy)
        if not kept and hasattr(settings, "tool_choice"):
            settings.tool_choice = None

    async def _inner_get_chat_message_contents(
        self, chat_history: ChatHistory, settings: PromptExecutionSettings
    ) -> list[ChatMessageContent]:
        await self._narrow(chat_history, settings)
        messages = await self.inner._inner_get_chat_message_contents(chat_history, settings)
        self._capture(chat_history, settings, called_names(messages))
        return messages

    async def _inner_get_streaming_chat_message_contents(
        self, chat_history: ChatHistory, settings: PromptExecutionSettings, function_invoke_attempt: int = 0
    ) -> AsyncGenerator[list[StreamingChatMessageContent], Any]:
        await self._narrow(chat_history, settings)
        called: list[str] = []
        async for chunk in self.inner._inner_get_streaming_chat_message_contents(
            chat_history, settings, function_invoke_attempt
        ):
            called.extend(called_names(chunk))
            yield chunk
        self._capture(chat_history, settings, called)

    def _capture(self, chat_history: ChatHistory, settings: PromptExecutionSettings, called: list[str]) -> None:
        """Learning from use: the response called tools — the turn is learned now (not when a later
        request shows it), within what the caller's filters allowed on this call."""
        if called:
            state = self._offered.get(id(settings))
            allowed = set(tool_names(state[0])) if state is not None else None
            self.manager.capture(chat_history, called, allowed=allowed)


def called_names(messages: Any) -> list[str]:
    """The function names a response (messages, or streamed chunks) calls, in order, once each."""
    from semantic_kernel.contents import FunctionCallContent

    names = [
        item.name
        for message in messages or ()
        for item in getattr(message, "items", ())
        if isinstance(item, FunctionCallContent) and item.name
    ]
    return list(dict.fromkeys(names))


def wrap_chat_service(
    service: ChatCompletionClientBase, manager: ToolFilterManager, query_strategy: QueryStrategy | None = None
) -> FilteredChatCompletion:
    """`service`, filtered by `manager` on every request.

    The query is built from the chat history (`query_strategy`, default ``manager.config.query_strategy``).
    """
    if isinstance(service, FilteredChatCompletion):
        service = service.inner
    refuse_in_semantic_kernel(manager.config.provider_search)
    return FilteredChatCompletion(
        inner=service,
        manager=manager,
        query_strategy=query_strategy or manager.config.query_strategy,
        service_id=service.service_id,
        ai_model_id=service.ai_model_id,
    )
