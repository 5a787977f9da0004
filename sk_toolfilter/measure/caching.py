"""What tool schemas cost with provider prompt caching: a tools list sent again unchanged is a cached
prompt prefix, billed at a fraction of the input price.

The default fraction is OpenAI's published one: cached input tokens cost 50 % of uncached ones for the
GPT-4o family (OpenAI, "Prompt caching" guide and API pricing page), for prompts of at least 1,024
tokens whose beginning (the tools come first) matches an earlier request exactly. Other providers
publish other fractions (Anthropic bills cache reads at 10 % and cache writes at 125 %): pass yours.
"""

from __future__ import annotations

from collections.abc import Sequence

OPENAI_CACHED_FRACTION = 0.5
"""Cached input tokens cost this fraction of the input price (OpenAI, GPT-4o family)."""


def billed_tool_tokens(
    tools_per_request: Sequence[Sequence[str]],
    tokens_per_request: Sequence[int],
    cached_fraction: float = OPENAI_CACHED_FRACTION,
) -> float:
    """Tool tokens of a conversation's requests as billed: when a request's tools list starts with the
    previous request's (the same list, or it with tools appended), that part is billed at
    `cached_fraction` and the rest in full; any other request is billed in full. The whole prompt is
    assumed long enough to be cached (OpenAI: 1,024 tokens; a conversation with some history is)."""
    billed, previous, previous_tokens = 0.0, None, 0
    for tools, tokens in zip(tools_per_request, tokens_per_request, strict=True):
        names = list(tools)
        # The previous list again, or the previous list with tools appended (sticky lists): that part is a
        # cached prefix; the tools after it are new input.
        extends = previous is not None and names[: len(previous)] == previous
        cached = min(previous_tokens, tokens) if extends else 0
        billed += cached * cached_fraction + (tokens - cached)
        previous, previous_tokens = names, tokens
    return billed
