"""An Agent Framework conversation as the chat history the selection policy reads.

The query, the turns of an agent loop, the tools found with discovery and the sticky lists are read
from a Semantic Kernel ``ChatHistory`` (the SK path's own type); Agent Framework messages are
converted: text, function calls (by name) and function results (named after their call).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from semantic_kernel.contents import (
    AuthorRole,
    ChatHistory,
    ChatMessageContent,
    FunctionCallContent,
    FunctionResultContent,
    TextContent,
)

_ROLES = {"user": AuthorRole.USER, "assistant": AuthorRole.ASSISTANT, "tool": AuthorRole.TOOL}


def to_chat_history(messages: Sequence[Any]) -> ChatHistory:
    """The conversation so far, as SK's ``ChatHistory`` (system and developer messages are skipped:
    they belong to no turn)."""
    history = ChatHistory()
    names: dict[str, str] = {}
    for message in messages:
        role = _ROLES.get(str(message.role))
        if role is None:
            continue
        items: list[Any] = []
        for content in message.contents:
            kind = content.type
            if kind == "text" and content.text:
                items.append(TextContent(text=content.text))
            elif kind == "function_call" and content.name:
                call_id = str(content.call_id or "")
                names[call_id] = content.name
                arguments = content.arguments if isinstance(content.arguments, str | dict) else None
                items.append(FunctionCallContent(id=call_id, name=content.name, arguments=arguments))
            elif kind == "function_result":
                call_id = str(content.call_id or "")
                name = names.get(call_id)
                if name is not None:
                    items.append(FunctionResultContent(id=call_id, name=name, result=_result_text(content.result)))
        if items:
            history.add_message(ChatMessageContent(role=role, items=items))
    return history


def _result_text(result: Any) -> str:
    """A function result as text (AF keeps a list of contents, or the raw value)."""
    if isinstance(result, list):
        return "\n".join(str(getattr(item, "text", None) or item) for item in result)
    return "" if result is None else str(result)


def from_openai_message(message: dict[str, Any], call_names: dict[str, str]) -> Any:
    """One OpenAI chat message (a recorded conversation's) as an Agent Framework ``Message``;
    `call_names` maps tool-call ids to names as assistant calls are read."""
    from agent_framework import Content, Message

    role = str(message.get("role") or "user")
    text = message.get("content") if isinstance(message.get("content"), str) else ""
    contents: list[Any] = []
    if role == "tool":
        call_id = str(message.get("tool_call_id"))
        contents.append(Content.from_function_result(call_id=call_id, result=text))
    else:
        if text:
            contents.append(Content.from_text(text=text))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            call_names[str(call.get("id"))] = str(function.get("name", ""))
            contents.append(
                Content.from_function_call(
                    call_id=str(call.get("id")), name=str(function.get("name", "")), arguments=function.get("arguments")
                )
            )
    return Message(role="system" if role == "developer" else role, contents=contents)
