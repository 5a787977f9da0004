"""Provider tool search for Semantic Kernel's ``OpenAIResponsesAgent`` (OpenAI Responses API, gpt-5.4 and
later): the filter's selection is loaded, every other tool the agent may use goes with
``defer_loading: true``, beside ``{"type": "tool_search"}``.

Semantic Kernel builds the Responses request's tools once per ``invoke``, from the kernel's functions
that ``FunctionChoiceBehavior`` allows, with no field for ``defer_loading`` (its per-invoke ``tools``
argument is overwritten by that list). So the selection is made once per ``invoke`` (not per model
call of its function loop), passed as the function choice filters, and the deferred flags are set on
the wire by an httpx transport of the agent's own OpenAI client — public surfaces only:

    client = provider_search_openai_client(api_key="sk-...")      # AsyncOpenAI with the transport
    agent = OpenAIResponsesAgent(ai_model_id="gpt-5.4", client=client, kernel=kernel)
    manager = await create_tool_filter(kernel, config)            # provider_search: {enabled: true}
    async for item in invoke_with_provider_search(agent, manager, "Where is my package 1Z999?"):
        print(item.message.content)
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator
from typing import Any

import httpx

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.provider_wire.call import call_for_offer, wire_call
from sk_toolfilter.provider_wire.openai_responses import ResponsesWire
from sk_toolfilter.provider_wire.search_answer import OPENAI_CLIENT_SEARCH_TOOL
from sk_toolfilter.selection.learning import conversation_owner
from sk_toolfilter.selection.provider_search import OPENAI_SEARCH_TOOL, check_model

_CLIENTS: weakref.WeakSet[Any] = weakref.WeakSet()


def provider_search_openai_client(*, transport: httpx.AsyncBaseTransport | None = None, **options: Any) -> Any:
    """An ``AsyncOpenAI`` client (`options`: api_key, base_url, …) whose requests go through the
    :class:`~sk_toolfilter.provider_wire.openai_responses.ResponsesWire` (over `transport`, by default plain HTTP):
    deferred tools, and with ``search: filter`` the model's searches answered by the filter."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(http_client=httpx.AsyncClient(transport=ResponsesWire(transport)), **options)  # type: ignore[arg-type]
    _CLIENTS.add(client)
    return client


def check_responses_agent(agent: Any, *, assumed: bool = False) -> None:
    """A :class:`ConfigError` unless `agent` is an ``OpenAIResponsesAgent`` on a client from
    :func:`provider_search_openai_client`, for a model with tool search."""
    if agent.client not in _CLIENTS:
        raise ConfigError(
            "tool_filtering.provider_search: the OpenAIResponsesAgent's client sends no deferred tools; build it "
            "with sk_toolfilter.integration.responses_agent.provider_search_openai_client(...)"
        )
    check_model("openai", agent.ai_model_id, assumed=assumed)


async def invoke_with_provider_search(
    agent: Any, manager: Any, messages: Any = None, *, thread: Any = None, **kwargs: Any
) -> AsyncIterator[Any]:
    """``agent.invoke(messages, thread=thread, **kwargs)`` with the filter: the tools are selected once
    for the conversation (a local thread's messages and `messages`; a thread stored on the server:
    `messages`). With ``provider_search`` on, the selection is loaded and every other usable tool
    deferred; off, only the selection is sent. Yields what ``agent.invoke`` yields."""
    from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
    from semantic_kernel.contents import ChatHistory

    search = manager.config.provider_search
    if search.enabled:
        check_responses_agent(agent, assumed=search.model_supports_tool_search)
    history = ChatHistory()
    if thread is not None and not (thread.store_enabled and thread.response_id):  # kept here, not on the server
        async for message in thread.get_messages(sort_order="asc"):
            history.add_message(message)
    for message in [messages] if isinstance(messages, str) else list(messages or []):
        history.add_user_message(message) if isinstance(message, str) else history.add_message(message)
    kernel = kwargs.get("kernel") or agent.kernel
    names = [f.fully_qualified_name for f in kernel.get_full_list_of_function_metadata()]
    offer = await manager.offer(history, names)
    on_wire = offer.on_wire or ["-none-"]  # [] would allow all
    behavior = FunctionChoiceBehavior.Auto(filters={"included_functions": on_wire})
    call = None
    if search.enabled and offer.deferred:
        tool = OPENAI_CLIENT_SEARCH_TOOL if offer.filter_answers else OPENAI_SEARCH_TOOL
        owner = conversation_owner(history) if offer.filter_answers else ""  # whose answers (the desk's)
        call = call_for_offer(manager, offer, "openai", owner=owner, search_tool=tool)
    with wire_call(call):
        async for item in agent.invoke(messages, thread=thread, function_choice_behavior=behavior, **kwargs):
            yield item
