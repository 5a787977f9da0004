"""Building the retrieval query from a chat history."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from semantic_kernel.contents import ChatHistory

QueryStrategy = Literal["last_message", "conversation"]

MAX_QUERY_CHARS = 4000


def _text(message: object) -> str:
    content = getattr(message, "content", None)
    return content.strip() if isinstance(content, str) else ""


def build_query(
    history: ChatHistory, strategy: QueryStrategy = "conversation", max_chars: int = MAX_QUERY_CHARS
) -> str:
    """The text to rank tools against for the next request.

    ``last_message``: the latest user message. ``conversation``: the latest user message first
    (so it weighs most in the embedding and is never cut), then the latest assistant text, the
    names of the latest tool calls and the user's first message of the conversation (the task),
    cut to `max_chars`.
    """
    from semantic_kernel.contents import AuthorRole, FunctionCallContent

    messages = list(history.messages)
    users = [m for m in messages if m.role == AuthorRole.USER and _text(m)]
    latest_user = _text(users[-1]) if users else ""
    if strategy == "last_message":
        return latest_user[:max_chars]

    parts = [latest_user]
    last_user_index = max((i for i, m in enumerate(messages) if m.role == AuthorRole.USER and _text(m)), default=-1)
    assistant_text = next((_text(m) for m in reversed(messages) if m.role == AuthorRole.ASSISTANT and _text(m)), "")
    if assistant_text:
        parts.append(assistant_text[:500])
    calls = [
        item.name or ""
        for m in messages[max(last_user_index - 4, 0) :]
        for item in m.items
        if isinstance(item, FunctionCallContent)
    ]
    if calls:
        parts.append(" ".join(dict.fromkeys(calls[-6:])))
    if len(users) > 1:
        parts.append(_text(users[0])[:500])
    return "\n".join(p for p in parts if p)[:max_chars]
