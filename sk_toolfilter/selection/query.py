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

    ``last_message``: the latest user message. ``conversation``: the latest user message — the
    request of the current turn, which stays in charge for every request of an agent loop — then
    the assistant's latest text since that message, cut to `max_chars`.

    Earlier turns and the names of the tools called so far are left out on purpose: on the
    bfcl_multiturn dev half, adding the conversation's first message cut step recall from 0.923 to
    0.865, and tool names outweigh the request. The agent-loop policy carries that context instead
    (the turn's tools, tools used together with them, the previous turn's tools).
    """
    from semantic_kernel.contents import AuthorRole

    messages = list(history.messages)
    user_positions = [i for i, m in enumerate(messages) if m.role == AuthorRole.USER and _text(m)]
    if not user_positions:
        return ""
    latest_user = _text(messages[user_positions[-1]])
    if strategy == "last_message":
        return latest_user[:max_chars]

    parts = [latest_user]
    assistant_text = [
        _text(m) for m in messages[user_positions[-1] + 1 :] if m.role == AuthorRole.ASSISTANT and _text(m)
    ]
    if assistant_text:
        parts.append(assistant_text[-1][:500])
    return "\n".join(p for p in parts if p)[:max_chars]
