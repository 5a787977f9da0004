"""The tool tokens of a request with provider tool search (``report --provider-search``), estimated from
what OpenAI documents: the loaded tools' schemas in full; each deferred function by its name and
description ("for an individual deferred function, the model still sees the function name and
description, so in practice tool search is mostly deferring the parameter schema", OpenAI's tool-search
guide); and the ``tool_search`` tool. With Claude, from what Anthropic documents: a deferred tool "will
not be included in initial system prompt" (``defer_loading``), so only the loaded schemas and the search
tool count (on the same JSON, with the report's tokenizer: Claude's own tokenizer differs). A tool the
model then finds is loaded later: that cost depends on the model's searches and is not counted.
Measured figures need a live key."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sk_toolfilter.basics.tokenizer import count_json_tokens
from sk_toolfilter.selection.provider_search import ANTHROPIC_SEARCH_TOOL, OPENAI_SEARCH_TOOL, WirePlan


def provider_search_tools(
    every_tool: Sequence[dict[str, Any]], plan: WirePlan
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The plan's loaded tools in full and its deferred ones by name and description (Chat Completions
    shapes in, Responses shapes out). `every_tool`: the unfiltered request's tools."""
    by_name = {t["function"]["name"]: t["function"] for t in every_tool}
    shown = [{"type": "function", **by_name[n]} for n in plan.loaded if n in by_name]
    deferred = [
        {"type": "function", "name": n, "description": by_name[n].get("description") or ""}
        for n in plan.deferred
        if n in by_name
    ]
    return shown, deferred


def provider_search_tokens(every_tool: Sequence[dict[str, Any]], plan: WirePlan, encoding: str) -> tuple[int, int]:
    """(estimated tool tokens with OpenAI, with Claude) of one request sent as `plan` says."""
    shown, deferred = provider_search_tools(every_tool, plan)
    openai = count_json_tokens([*shown, *deferred, OPENAI_SEARCH_TOOL], encoding)
    return openai, count_json_tokens([*shown, ANTHROPIC_SEARCH_TOOL], encoding)
