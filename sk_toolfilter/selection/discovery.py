"""The discovery plugin: the model's way to search the whole catalog when its tools don't fit.

``search_tools`` answers in tiers that degrade with the number of matches — full signatures for a
few, one-line summaries for more, names only for many, per-plugin counts beyond that — under a
hard size cap, and always ends with a footer saying how many matched, how many are shown and how
to narrow. Tools it shows (and any tool passed to ``describe_tool``) are sent on the model's next
request, so they are callable right after discovery.
"""

from __future__ import annotations

import re
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

from semantic_kernel.functions import kernel_function

from sk_toolfilter.basics.errors import ToolFilterError
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.prerequisites import Provider
from sk_toolfilter.selection.active import active_manager
from sk_toolfilter.selection.manager import ConversationPins, ToolFilterManager

if TYPE_CHECKING:
    from semantic_kernel.contents import ChatHistory

TIERS = ("full", "summary", "names", "counts")


@dataclass(frozen=True)
class FooterWords:
    """How a discovery answer's footer says a tool is used: after tools shown in full or summary
    (``{first}``: "The tools shown" or "The first N tools shown"), and otherwise."""

    shown: str = "{first} can be called on your next step; describe_tool(name) loads any other."
    other: str = "describe_tool(name) loads a tool so you can call it on your next step."


# Upper bounds of each tier by number of matches (beyond the last: per-plugin counts).
TIER_LIMITS = {"full": 5, "summary": 30, "names": 300}

_SENTENCE_END = re.compile(
    "".join(rf"(?<!\b{re.escape(a)})" for a in ("e.g.", "i.e.", "etc.", "vs.", "approx.", "incl.", "no.", "Mr.", "Dr."))
    + r"(?<=[.!?])\s"
)


def one_line_summary(description: str, max_chars: int = 160) -> str:
    """The first sentence of a description (never cut at "e.g." or "i.e."), at most `max_chars`."""
    text = " ".join(description.split())
    if not text:
        return "(no description)"
    match = _SENTENCE_END.search(text)
    sentence = text[: match.start()] if match else text
    return sentence if len(sentence) <= max_chars else sentence[: max_chars - 1].rstrip() + "…"


def signature(tool: ToolMetadata) -> str:
    params = ", ".join(f"{p.name}: {p.type}{'' if p.required else '?'}" for p in tool.parameters)
    return f"{tool.full_name}({params})"


def render_full(tool: ToolMetadata, lookups: Sequence[Provider] = ()) -> str:
    """Signature, description, parameters, and the lookup tools that give its parameters' values."""
    lines = [signature(tool), f"  {' '.join(tool.description.split()) or '(no description)'}"]
    lines += [f"  - {p.name}: {' '.join(p.description.split())}" for p in tool.parameters if p.description]
    lines += [f"  ({p.parameter}: {p.name} looks it up; loaded for your next step too)" for p in lookups]
    return "\n".join(lines)


def coerce_limit(limit: Any, default: int) -> int:
    """Agent-facing numbers arrive as strings too: "5" → 5. Invalid or non-positive → `default`."""
    try:
        value = int(str(limit).strip()) if limit is not None and str(limit).strip() else default
    except ValueError:
        return default
    return value if value > 0 else default


def render_matches(
    matches: Sequence[ToolMetadata],
    query: str,
    detail: str = "auto",
    limit: Any = None,
    max_chars: int = 6000,
    max_loaded: int = 5,
    mark: Callable[[ToolMetadata], str] | None = None,
    words: FooterWords = FooterWords(),
    nearest: Sequence[ToolMetadata] = (),
) -> tuple[str, list[str]]:
    """The tiered answer for `matches` (best first), then the `nearest` others (when few matched), and
    the names it shows.

    The footer says which tools the model can call next: the first `max_loaded` shown in the full
    or summary tier (those are sent on its next request); any other through ``describe_tool``.
    `mark`: a note after a tool's line (e.g. `` [destructive]``), in every tier that lists tools;
    `words`: how the footer says a tool is used (the gateway's differ: its tools run through ``call_tool``).
    """
    total = len(matches)
    tier = (detail or "auto").strip().lower()
    if tier not in TIERS:
        listed = min(total + len(nearest), coerce_limit(limit, total + len(nearest)))  # a limit asks for that many
        tier = next((t for t, bound in TIER_LIMITS.items() if listed <= bound), "counts")
    shown_limit = coerce_limit(limit, TIER_LIMITS.get(tier, total))
    body: list[str] = []
    shown: list[str] = []
    used = 0
    footer_room = 300
    counts = Counter(t.plugin for t in matches)
    if tier == "counts":
        for plugin, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
            line = f"{plugin}: {count} tools"
            if used + len(line) + 1 > max_chars - footer_room:
                break
            body.append(line)
            used += len(line) + 1
    else:
        for tool in [*matches, *nearest][:shown_limit]:
            if tier == "full":
                block = render_full(tool)
            elif tier == "summary":
                block = f"{tool.full_name} — {one_line_summary(tool.description)}"
            else:
                block = tool.full_name
            if mark is not None:
                first, _, rest = block.partition("\n")
                block = first + mark(tool) + ("\n" + rest if rest else "")
            if used + len(block) + 1 > max_chars - footer_room:
                break
            body.append(block)
            shown.append(tool.full_name)
            used += len(block) + 1
    footer = _footer(query, total, tier, shown, len(body), len(counts), max_loaded, words)
    while body and sum(len(line) + 1 for line in body) + len(footer) > max_chars:
        body.pop()  # the footer always fits: the answer never exceeds max_chars
        if len(shown) > len(body):
            shown = shown[: len(body)]
            footer = _footer(query, total, tier, shown, len(body), len(counts), max_loaded, words)
    return bounded("\n".join([*body, footer]), max_chars), shown


def _footer(
    query: str, total: int, tier: str, shown: list[str], lines: int, plugins: int, max_loaded: int, words: FooterWords
) -> str:
    """What a discovery answer ends with: how many matched, what is shown, how to call or load a tool."""
    shown_query = query.strip() if len(query.strip()) <= 60 else query.strip()[:59] + "…"
    what = f"matching {shown_query!r}" if query.strip() else "in the catalog"
    near = max(len(shown) - total, 0)  # shown beyond the matches: the nearest others
    if tier == "counts":
        footer = f"[{total} tools {what}; too many to list: counts for {lines} of {plugins} plugins shown."
    elif near and not total:
        footer = f"[0 tools {what}; showing the {near} nearest ({tier}), none a clear match."
    elif near:
        footer = f"[{total} tools {what}; showing {total} ({tier}), then the {near} nearest without a match."
    else:
        footer = f"[{total} tools {what}; showing {len(shown)} ({tier})."
    if not total and not near:
        footer = f"[0 tools {what}. Try other words, or an empty query to list the catalog."
    elif near:
        footer += " Try other words for a closer match."
    elif len(shown) < total or tier != "full":
        footer += " Narrow with a more specific query, or set detail=full|summary|names and limit=N."
    if shown and tier in ("full", "summary"):
        first = "The tools shown" if len(shown) <= max_loaded else f"The first {max_loaded} tools shown"
        footer += " " + words.shown.format(first=first)
    elif total:
        footer += " " + words.other
    return footer + "]"


def bounded(text: str, max_chars: int) -> str:
    """`text` cut to `max_chars`, saying so."""
    if len(text) <= max_chars:
        return text
    note = f" … [cut: answers are limited to {max_chars} characters]"
    return text[: max(0, max_chars - len(note))] + note


class DiscoveryPlugin:
    """``search_tools`` and ``describe_tool`` over the manager's (visible, searchable) catalog.

    It can be added to a kernel before its manager exists (the manager indexes it); :meth:`bind`
    connects the two.
    """

    def __init__(self, manager: ToolFilterManager | None = None) -> None:
        self._bound: list[weakref.ref[ToolFilterManager]] = []
        if manager is not None:
            self.bind(manager)

    def bind(self, manager: ToolFilterManager) -> None:
        """Answer for `manager` too: inside its requests from its catalog; outside any filtered request
        (a direct ``kernel.invoke``, a scheduled job) only with tools every bound manager may show."""
        managers = self._managers()
        if manager not in managers:
            self._bound = [weakref.ref(m) for m in [*managers, manager]]

    def _managers(self) -> list[ToolFilterManager]:
        return [m for m in (ref() for ref in self._bound) if m is not None]

    def _manager(self) -> tuple[ToolFilterManager, list[ToolFilterManager]]:
        """The manager that answers, and the others whose visibility the answer must also respect:
        the manager of the request in progress alone, else (fail closed) every bound manager."""
        active = active_manager()
        if active is not None:
            return active, []
        managers = self._managers()
        if not managers:
            raise ToolFilterError("the discovery plugin is not bound to a ToolFilterManager (call bind(manager))")
        return managers[0], managers[1:]

    @kernel_function(
        name="search_tools",
        description="Search the full catalog of tools when none of your current tools fits the task. "
        "Any tool listed in the answer can be called on your next step.",
    )
    async def search_tools(
        self,
        query: Annotated[str, "What you want to do, in a few words; empty to list the whole catalog"] = "",
        detail: Annotated[str, "auto (default), full, summary, names or counts"] = "auto",
        limit: Annotated[str, "Maximum number of tools to show, e.g. 5"] = "",
    ) -> str:
        manager, others = self._manager()
        manager.telemetry.discovery_call("search_tools")
        discovery = manager.config.discovery
        found = await manager.search_catalog(query, nearest=discovery.max_loaded)  # never empty while tools remain

        def permitted(tools: list[ToolMetadata]) -> list[ToolMetadata]:
            return [t for t in tools if all(o.find_visible_tool(t.full_name) is not None for o in others)]

        text, _ = render_matches(
            permitted(found.matched), query, detail, limit, discovery.max_chars, discovery.max_loaded,
            nearest=permitted(found.nearest),
        )  # fmt: skip
        return text

    @kernel_function(
        name="describe_tool",
        description="Show the full signature of one tool by name (Plugin-function) and load it for your next step.",
    )
    async def describe_tool(self, name: Annotated[str, "Tool name, e.g. Messaging-send_email"]) -> str:
        manager, others = self._manager()
        manager.telemetry.discovery_call("describe_tool")
        limit = manager.config.discovery.max_chars
        tool = manager.find_visible_tool(name[:200])
        if tool is not None and any(o.find_visible_tool(tool.full_name) is None for o in others):
            tool = None  # outside a request: a tool any agent on this kernel hides is not shown
        if tool is None:
            return bounded(f"No tool named {name[:200]!r}. Use search_tools to find one.", limit)
        return bounded(render_full(tool, visible_lookups(manager, tool.full_name)), limit)


def discovered_in(history: ChatHistory, manager: ToolFilterManager, max_loaded: int) -> list[str]:
    """Tools the model found through discovery in this conversation, to send on its next request.

    The targets of its latest ``describe_tool`` calls, the lookup tools their answers name (what
    gives their parameters' values), and the first `max_loaded` tools of its latest ``search_tools``
    answer (full and summary tiers, in the order shown — what that answer's footer promises); at most
    `max_loaded` of each. (Tools the model called in the current turn stay
    on offer through the manager's agent-loop policy.)
    """
    from semantic_kernel.contents import FunctionCallContent, FunctionResultContent

    plugin = manager.config.discovery.plugin_name
    described: list[str] = []
    searched: list[str] | None = None
    for message in reversed(history.messages):
        for item in message.items:
            if isinstance(item, FunctionResultContent):
                if searched is None and item.plugin_name == plugin and item.function_name == "search_tools":
                    names = re.findall(r"^([\w-]+)(?:\(| — )", str(item.result), flags=re.MULTILINE)
                    searched = [n for n in names if manager.find_visible_tool(n) is not None][:max_loaded]
            elif (
                isinstance(item, FunctionCallContent)
                and item.plugin_name == plugin
                and item.function_name == "describe_tool"
                and item.arguments
            ):
                tool = manager.find_visible_tool(str(item.to_kernel_arguments().get("name", "")))
                if tool is not None:
                    described.append(tool.full_name)
    described = described[:max_loaded]
    lookups = [p.name for name in described for p in visible_lookups(manager, name)][:max_loaded]
    return list(dict.fromkeys([*described, *lookups, *(searched or [])]))


def visible_lookups(manager: ToolFilterManager, name: str) -> list[Provider]:
    """The lookup tools that give `name`'s parameters and that the agent may see (what ``describe_tool``
    names, and loads with it)."""
    return [p for p in manager.index.providers.get(name, ()) if manager.find_visible_tool(p.name) is not None]


def discovery_pins(manager: ToolFilterManager) -> ConversationPins:
    """A conversation-pin source for `manager`: the tools found with discovery (see :func:`discovered_in`)."""

    def found_with_discovery(history: ChatHistory) -> list[tuple[str, str]]:
        if not manager.discovery_names:
            return []
        found = discovered_in(history, manager, manager.config.discovery.max_loaded)
        return [(name, "pinned: found with discovery") for name in found]

    return found_with_discovery
