"""An Agent Framework chat client as the tool picker's chat (``rerank: {type: llm}``).

The picking call sends two messages and no tools (``tool_choice`` none), so no function is invoked
and the filter's chat middleware (which narrows only calls that carry tools) lets it pass untouched.
"""

from __future__ import annotations

from typing import Any

from sk_toolfilter.config import RerankConfig
from sk_toolfilter.selection.llm_pick import LLMToolPicker, PickerChat, PickerReply, service_address


def agent_framework_picker_chat(client: Any) -> PickerChat:
    """`client` (an Agent Framework chat client) as a :data:`~sk_toolfilter.selection.llm_pick.PickerChat`."""
    from agent_framework import Message

    async def chat(system: str, user: str, response_format: dict[str, Any]) -> PickerReply:
        messages = [Message("system", [system]), Message("user", [user])]
        response = await client.get_response(messages, options={"response_format": response_format})
        usage = response.usage_details or {}
        called = any(c.type == "function_call" for m in response.messages for c in m.contents)
        return PickerReply(
            text=response.text or "",
            input_tokens=_count(usage.get("input_token_count")),
            output_tokens=_count(usage.get("output_token_count")),
            called_a_tool=called,
        )

    return chat


def agent_framework_picker(config: RerankConfig, client: Any) -> LLMToolPicker:
    """The picker for ``rerank: {type: llm}`` that picks with `client`."""
    model = getattr(client, "model", None) or getattr(client, "model_id", None) or type(client).__name__
    return LLMToolPicker(agent_framework_picker_chat(client), config, model=str(model), where=service_address(client))


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
