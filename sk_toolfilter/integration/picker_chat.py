"""A Semantic Kernel chat service as the tool picker's chat (``rerank: {type: llm}``).

The picking call goes to the service itself (a filtering wrapper is unwrapped first, so the call never
passes the filter), with settings that carry no ``function_choice_behavior``: no tools are offered and
nothing is invoked. Where the settings class has ``response_format`` the answer's JSON schema is sent
(OpenAI structured output); elsewhere the picker's tolerant parser reads the text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.integration.service import FilteredChatCompletion
from sk_toolfilter.selection.llm_pick import LLMToolPicker, PickerChat, PickerReply, service_address

if TYPE_CHECKING:
    from semantic_kernel import Kernel
    from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase

    from sk_toolfilter.config import RerankConfig


def semantic_kernel_picker_chat(service: ChatCompletionClientBase) -> PickerChat:
    """`service` (an SK chat service) as a :data:`~sk_toolfilter.selection.llm_pick.PickerChat`."""
    from semantic_kernel.contents import ChatHistory, FunctionCallContent

    inner = service.inner if isinstance(service, FilteredChatCompletion) else service
    settings_class = inner.get_prompt_execution_settings_class()
    structured = "response_format" in settings_class.model_fields

    async def chat(system: str, user: str, response_format: dict[str, Any]) -> PickerReply:
        history = ChatHistory(system_message=system)
        history.add_user_message(user)
        settings = settings_class(response_format=response_format) if structured else settings_class()
        replies = await inner.get_chat_message_contents(history, settings)
        if not replies:
            return PickerReply("")
        reply = replies[0]
        usage = (reply.metadata or {}).get("usage")
        return PickerReply(
            text=str(reply.content or ""),
            input_tokens=_count(usage, "prompt_tokens"),
            output_tokens=_count(usage, "completion_tokens"),
            called_a_tool=any(isinstance(item, FunctionCallContent) for item in reply.items),
        )

    return chat


def semantic_kernel_picker(
    config: RerankConfig, kernel: Kernel | None = None, service: ChatCompletionClientBase | None = None
) -> LLMToolPicker:
    """The picker for ``rerank: {type: llm}``: the kernel's chat service ``config.service_id`` names, else
    `service` (an agent's own chat service), else the kernel's default chat service."""
    from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase

    chosen: Any = None
    if kernel is not None and (config.service_id is not None or service is None):
        try:
            chosen = kernel.get_service(config.service_id, type=ChatCompletionClientBase)
        except Exception:  # SK raises KernelServiceNotFoundError
            chosen = None
        if chosen is None and config.service_id is not None:
            known = [s for s, v in kernel.services.items() if isinstance(v, ChatCompletionClientBase)]
            raise ConfigError(
                f"tool_filtering.rerank.service_id: no chat service {config.service_id!r} on the kernel "
                f"(chat services: {', '.join(known) or 'none'})"
            )
    chosen = chosen or service
    if chosen is None:
        raise ConfigError(
            "tool_filtering.rerank: type llm needs a chat model to pick with: add a chat service to the kernel "
            "(or name one with rerank.service_id), or give the agent file a model: block"
        )
    model = getattr(chosen, "ai_model_id", None) or type(chosen).__name__
    inner = chosen.inner if isinstance(chosen, FilteredChatCompletion) else chosen
    return LLMToolPicker(semantic_kernel_picker_chat(chosen), config, model=str(model), where=service_address(inner))


def _count(usage: Any, key: str) -> int | None:
    value = usage.get(key) if isinstance(usage, dict) else getattr(usage, key, None)
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
