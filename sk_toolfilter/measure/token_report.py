"""What a token-savings report holds: per query, the tools and tokens sent with filtering off and on;
the sample conversation's tool lists; the totals. (Rendered by :mod:`.report` and :mod:`.report_html`.)"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from sk_toolfilter.basics.display import number
from sk_toolfilter.measure.caching import OPENAI_CACHED_FRACTION, billed_tool_tokens


@dataclass
class QueryReport:
    query: str
    tools_off: int
    tools_on: int
    tools_tokens_off: int
    tools_tokens_on: int
    body_tokens_off: int
    body_tokens_on: int
    selected: list[str]
    expected: list[str] = field(default_factory=list)
    expected_sent: bool | None = None
    method: str = ""
    """The method that ranked the request (``hybrid``, or ``bm25 (fallback: why)``)."""
    picker: str = ""
    """What the second stage (``rerank: {type: llm}``) did for this request ("" without one)."""
    tools_tokens_provider_search: int | None = None
    """Estimated tool tokens with provider tool search (``report --provider-search``; None: not estimated)."""
    tools_tokens_provider_search_plugin: int | None = None
    """The OpenAI estimate with each plugin's deferred functions as one namespace (``unit: plugin``)."""
    tools_tokens_provider_search_claude: int | None = None
    """The same with Claude (deferred tools documented as not in the prompt)."""
    tools_deferred: int = 0
    """Tools that would go deferred with provider tool search."""
    tools_tokens_filter_search: int | None = None
    """Estimated OpenAI tool tokens with ``search: filter`` (the client-executed search tool's definition)."""
    picker_tried: bool = False
    """Whether the picker was tried (False when every candidate fit, or for small talk)."""
    picker_fallback: str = ""
    """Why a tried pick did not stand (``timeout``, ``call failed``, …; "" when it picked)."""
    picker_input_tokens: int = 0
    picker_output_tokens: int = 0
    picker_seconds: float = 0.0

    @property
    def picker_tokens(self) -> int:
        """Tokens the picking call cost (input and output): spent to save the tools tokens."""
        return self.picker_input_tokens + self.picker_output_tokens


def plural(count: int, noun: str) -> str:
    """`noun` for `count` of it: "1 tool", "2 tools"."""
    return noun if count == 1 else f"{noun}s"


def prefix_stable_share(tool_lists: list[list[str]]) -> float | None:
    """Share of requests (after the first) whose tool list starts with the previous request's list.

    Providers cache the prompt prefix; the tools come first in it, so only such requests can hit it.
    """
    pairs = list(itertools.pairwise(tool_lists))
    if not pairs:
        return None
    return sum(current[: len(previous)] == previous for previous, current in pairs) / len(pairs)


@dataclass
class ConversationReport:
    """One scripted conversation sent turn by turn through the filtering wrapper."""

    turns: list[str]
    tools_per_request: list[list[str]]
    tools_tokens_per_request: list[int]
    wire_modes: dict[str, tuple[int, int]] = field(default_factory=dict)
    """With ``report --provider-search``: (uncached, cached) OpenAI tool tokens over the conversation per
    way of sending (:func:`~sk_toolfilter.measure.provider_search_tokens.conversation_cache`)."""

    def billed_tokens(
        self, catalog_tokens: int, cached_fraction: float = OPENAI_CACHED_FRACTION
    ) -> tuple[float, float]:
        """Tool tokens of the conversation as billed with prompt caching: filtering off (the whole
        catalog every time: cached after the first request) and on."""
        turns = len(self.turns)
        off = billed_tool_tokens([["all"]] * turns, [catalog_tokens] * turns, cached_fraction)
        return off, billed_tool_tokens(self.tools_per_request, self.tools_tokens_per_request, cached_fraction)

    @property
    def prefix_stable_share(self) -> float | None:
        return prefix_stable_share(self.tools_per_request)


@dataclass
class TokenReport:
    agent: str
    model: str
    encoding: str
    catalog_size: int
    search_method: str
    queries: list[QueryReport]
    conversation: ConversationReport | None = None
    selection_mode: str = "fresh"
    framework: str = "semantic-kernel"

    @property
    def totals(self) -> dict[str, Any]:
        def total(key: str) -> int:
            return sum(getattr(q, key) for q in self.queries)

        off, on = total("tools_tokens_off"), total("tools_tokens_on")
        picker = sum(q.picker_tokens for q in self.queries)
        body_off, body_on = total("body_tokens_off"), total("body_tokens_on")
        checked = [q.expected_sent for q in self.queries if q.expected_sent is not None]
        n = max(len(self.queries), 1)
        return {
            "queries": len(self.queries),
            "tools_tokens_off": off,
            "tools_tokens_on": on,
            "body_tokens_off": body_off,
            "body_tokens_on": body_on,
            "saved_percent": round(100.0 * (off - on) / off, 2) if off else 0.0,
            "picker_tokens": picker,
            "picker_tokens_per_request": round(picker / n, 1),
            "picker_tried": sum(q.picker_tried for q in self.queries),
            "picker_fell_back": sum(bool(q.picker_fallback) for q in self.queries),
            "net_saved_percent": round(100.0 * (off - on - picker) / off, 2) if off else 0.0,
            "body_saved_percent": round(100.0 * (body_off - body_on) / body_off, 2) if body_off else 0.0,
            "mean_tools_off": round(total("tools_off") / n, 2),
            "mean_tools_on": round(total("tools_on") / n, 2),
            "expected_tool_sent": f"{sum(checked)}/{len(checked)}" if checked else None,
            "selection_mode": self.selection_mode,
            "framework": self.framework,
            "prefix_stable_share": self.conversation.prefix_stable_share if self.conversation else None,
            **self._provider_search_totals(off),
        }

    def _provider_search_totals(self, off: int) -> dict[str, Any]:
        estimated = [q.tools_tokens_provider_search for q in self.queries]
        if not estimated or None in estimated:
            return {}
        tokens = sum(t for t in estimated if t is not None)
        claude = sum(q.tools_tokens_provider_search_claude or 0 for q in self.queries)
        return {
            "tools_tokens_provider_search": tokens,
            "provider_search_saved_percent": round(100.0 * (off - tokens) / off, 2) if off else 0.0,
            "tools_tokens_provider_search_plugin": (
                plugin := sum(q.tools_tokens_provider_search_plugin or 0 for q in self.queries)
            ),
            "provider_search_plugin_saved_percent": round(100.0 * (off - plugin) / off, 2) if off else 0.0,
            "tools_tokens_provider_search_claude": claude,
            "provider_search_claude_saved_percent": round(100.0 * (off - claude) / off, 2) if off else 0.0,
            "mean_tools_deferred": round(sum(q.tools_deferred for q in self.queries) / len(self.queries), 2),
            "tools_tokens_filter_search": sum(q.tools_tokens_filter_search or 0 for q in self.queries),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "model": self.model,
            "encoding": self.encoding,
            "catalog_size": self.catalog_size,
            "search_method": self.search_method,
            "totals": self.totals,
            "queries": [asdict(q) for q in self.queries],
            "conversation": asdict(self.conversation) if self.conversation else None,
        }


def methods_used(report: TokenReport) -> str:
    """Which method ranked the requests, e.g. ``hybrid for 20 of 20 requests``."""
    counts = Counter(q.method or report.search_method for q in report.queries)
    total = len(report.queries)
    return "; ".join(f"{method} for {n} of {total} {plural(total, 'request')}" for method, n in counts.most_common())


def picker_line(report: TokenReport) -> str | None:
    """The picker's cost and the savings net of it (None when no request used a picker)."""
    if not any(q.picker for q in report.queries):
        return None
    t = report.totals
    n = max(len(report.queries), 1)
    tried = [q for q in report.queries if q.picker_tried]
    fell_back = Counter(q.picker_fallback for q in tried if q.picker_fallback)
    reasons = f" ({', '.join(f'{why} {count}' for why, count in fell_back.most_common())})" if fell_back else ""
    seconds = sum(q.picker_seconds for q in report.queries) / n
    net = t["net_saved_percent"]
    net_text = f"saved {net:.1f}%" if net >= 0 else f"cost {-net:.1f}% more than filtering off"
    return (
        f"The tool picker was tried for {len(tried)} of {n} {plural(n, 'request')}: {len(tried) - fell_back.total()} "
        f"picked, {fell_back.total()} fell back to the first stage{reasons}. It cost "
        f"{number(t['picker_tokens_per_request'], 1)} tokens and {seconds:.2f} s per request; net of it, tools tokens "
        f"{net_text} (gross {t['saved_percent']:.1f}%)"
    )


def provider_search_line(report: TokenReport) -> str | None:
    """The provider-tool-search estimate (None unless the report was asked for it)."""
    t = report.totals
    if "tools_tokens_provider_search" not in t:
        return None
    return (
        f"Provider tool search, an estimate from what the providers document: OpenAI Responses "
        f"{t['tools_tokens_provider_search']:,} tools tokens ({t['provider_search_saved_percent']:.1f}% saved against "
        f"off; the model still sees each of the {number(t['mean_tools_deferred'])} deferred tools per request by name "
        f"and description; {t['tools_tokens_provider_search_plugin']:,}, "
        f"{t['provider_search_plugin_saved_percent']:.1f}% saved, with each plugin's deferred tools as one namespace, "
        "unit: plugin, seen by the namespace's name and "
        f"description only), Claude {t['tools_tokens_provider_search_claude']:,} "
        f"({t['provider_search_claude_saved_percent']:.1f}%; deferred tools are not in the prompt) — the selection's "
        "schemas in full and the search tool; tools the model finds later are not counted. With search: filter "
        f"(the filter answers the search) OpenAI {t['tools_tokens_filter_search']:,} (its search tool's definition "
        "is on the wire). Documented behaviour, not measured against a live endpoint (report --provider-search "
        "--live measures OpenAI)"
    )


def caching_line(report: TokenReport) -> str:
    """The sample conversation's tool tokens as billed with prompt caching, off vs on."""
    assert report.conversation is not None
    catalog = report.queries[0].tools_tokens_off if report.queries else 0
    off, on = report.conversation.billed_tokens(catalog)
    saved = f"{100 * (off - on) / off:.1f}% saved" if off else "n/a"
    line = (
        f"With prompt caching (a repeated tools prefix billed at {OPENAI_CACHED_FRACTION:.0%}, OpenAI's published "
        f"rate for cached input): the conversation's tool tokens cost {off:,.0f} off → {on:,.0f} on ({saved})"
    )
    modes = report.conversation.wire_modes
    if modes:
        split = ", ".join(
            f"{mode} {cached:,} cached / {uncached:,} uncached" for mode, (uncached, cached) in modes.items()
        )
        line += f"; tool tokens over the conversation (OpenAI, estimated): {split}"
    return line
