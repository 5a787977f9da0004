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
    """Tool tokens of a conversation's requests as billed: the cached part (:func:`cache_split`) at
    `cached_fraction`, the rest in full."""
    uncached, cached = cache_split(tools_per_request, tokens_per_request)
    return cached * cached_fraction + uncached


def cache_split(tools_per_request: Sequence[Sequence[str]], tokens_per_request: Sequence[int]) -> tuple[int, int]:
    """(uncached, cached) tool tokens of a conversation's requests: when a request's tools list starts
    with the previous request's (the same list, or it with tools appended), that part is a cached prefix
    and the rest new input; any other request is uncached. The whole prompt is assumed long enough to be
    cached (OpenAI: 1,024 tokens; a conversation with some history is)."""
    uncached = cached = 0
    previous: list[str] | None = None
    previous_tokens = 0
    for tools, tokens in zip(tools_per_request, tokens_per_request, strict=True):
        names = list(tools)
        extends = previous is not None and names[: len(previous)] == previous
        hit = min(previous_tokens, tokens) if extends else 0
        cached += hit
        uncached += tokens - hit
        previous, previous_tokens = names, tokens
    return uncached, cached
