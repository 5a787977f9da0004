"""The tool tokens of a request with provider tool search (``report --provider-search``), estimated from
what OpenAI documents: the loaded tools' schemas in full; each deferred function by its name and
description ("for an individual deferred function, the model still sees the function name and
description, so in practice tool search is mostly deferring the parameter schema", OpenAI's tool-search
guide); and the ``tool_search`` tool. A tool the model then finds is loaded at the end of the context:
that cost depends on the model's searches and is not counted. Measured figures need a live key."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sk_toolfilter.basics.tokenizer import count_json_tokens
from sk_toolfilter.selection.provider_search import OPENAI_SEARCH_TOOL


def provider_search_tools(
    every_tool: Sequence[dict[str, Any]], loaded: Sequence[str], hidden: Callable[[str], bool]
) -> tuple[list[dict[str, Any]], int]:
    """The request's tools as the model is documented to see them up front (Chat Completions shapes in,
    Responses shapes out), and how many are deferred. `every_tool`: the unfiltered request's tools."""
    by_name = {t["function"]["name"]: t["function"] for t in every_tool}
    chosen = [n for n in loaded if n in by_name]
    shown: list[dict[str, Any]] = [{"type": "function", **by_name[n]} for n in chosen]
    deferred = [f for n, f in by_name.items() if n not in set(chosen) and not hidden(n)]
    shown += [{"type": "function", "name": f["name"], "description": f.get("description") or ""} for f in deferred]
    return [*shown, dict(OPENAI_SEARCH_TOOL)], len(deferred)


def provider_search_tokens(
    every_tool: Sequence[dict[str, Any]], loaded: Sequence[str], hidden: Callable[[str], bool], encoding: str
) -> tuple[int, int]:
    """(estimated tool tokens, deferred tools) of one request with provider tool search."""
    shown, deferred = provider_search_tools(every_tool, loaded, hidden)
    return count_json_tokens(shown, encoding), deferred
