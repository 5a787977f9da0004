"""The turns of a conversation: each user request and the tools called while answering it.

Inside an agent loop the model calls several tools for one user request; the request stays what
the next tool is chosen for. A *turn* starts at a user message and runs to the next one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from semantic_kernel.contents import ChatHistory


@dataclass(frozen=True)
class Turn:
    """One user request and the functions called for it so far (full names, in call order, once each)."""

    request: str
    calls: list[str] = field(default_factory=list)


def conversation_opening(history: ChatHistory) -> list[str]:
    """The texts of a conversation's messages up to and including its first user message (what names a
    conversation that names itself no other way)."""
    from semantic_kernel.contents import AuthorRole

    opening = []
    for message in history.messages:
        opening.append(f"{message.role.value}:{(message.content or '').strip()}")
        if message.role == AuthorRole.USER and (message.content or "").strip():
            break
    return opening


def split_turns(history: ChatHistory) -> tuple[list[Turn], Turn | None]:
    """(completed turns, the current turn): the current turn is the one the next request belongs to.

    A turn is complete once a later user message exists, or once the assistant answered it with
    text after its tool calls (the model is done with that request). Messages before the first user
    message (system, developer) belong to no turn.
    """
    from semantic_kernel.contents import AuthorRole, FunctionCallContent

    turns: list[tuple[str, list[str], bool]] = []  # (request, calls, answered)
    for message in history.messages:
        if message.role == AuthorRole.USER:
            text = (message.content or "").strip()
            if text:
                turns.append((text, [], False))
            continue
        if not turns:
            continue
        request, calls, _ = turns[-1]
        for item in message.items:
            # SK spells a name "Plugin-function"; a tool without a plugin (Agent Framework) is its own name.
            if isinstance(item, FunctionCallContent) and item.name and item.name not in calls:
                calls.append(item.name)
        answered = (
            message.role == AuthorRole.ASSISTANT
            and bool(message.content)
            and not any(isinstance(item, FunctionCallContent) for item in message.items)
        )
        turns[-1] = (request, calls, answered or turns[-1][2])
    if not turns:
        return [], None
    completed = [Turn(r, c) for r, c, _ in turns[:-1]]
    request, calls, answered = turns[-1]
    if answered:
        return [*completed, Turn(request, calls)], None
    return completed, Turn(request, calls)
