"""The token-savings report: the exact request the framework's OpenAI client sends with filtering off vs on.

Each query goes through the real OpenAI client twice — SK's ``OpenAIChatCompletion`` unfiltered and
through the filtering wrapper, or Agent Framework's chat client without and with the chat
middleware — on an HTTP transport that records the body and answers with a canned reply
(no network). Tokens are counted on the recorded body with the model's tokenizer.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sk_toolfilter._compat import moved_attributes
from sk_toolfilter.agents.agent_file import AgentSpec, Framework, SampleQuery
from sk_toolfilter.basics.display import number, shorten
from sk_toolfilter.basics.errors import UnknownToolError
from sk_toolfilter.basics.progress import ProgressCallback
from sk_toolfilter.basics.tokenizer import count_json_tokens, count_tokens
from sk_toolfilter.integration.service import FilteredChatCompletion, wrap_chat_service
from sk_toolfilter.measure.provider_search_tokens import conversation_cache, provider_search_tokens
from sk_toolfilter.measure.report_html import render_chart_svg, render_html, share_percent
from sk_toolfilter.measure.token_report import (
    ConversationReport,
    QueryReport,
    TokenReport,
    caching_line,
    methods_used,
    picker_line,
    plural,
    provider_search_line,
)
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service
from sk_toolfilter.selection.offer import search_offer
from sk_toolfilter.selection.visibility import NameResolver

if TYPE_CHECKING:
    from semantic_kernel import Kernel

    from sk_toolfilter.selection.manager import Selection, ToolFilterManager


def resolve_expected(queries: Sequence[SampleQuery], full_names: Sequence[str]) -> list[SampleQuery]:
    """`queries` with every expected tool spelled as its full name (bare and near spellings resolve);
    one that names no tool of the agent is a :class:`UnknownToolError` naming the closest."""
    resolver = NameResolver(full_names)
    resolved = []
    for position, item in enumerate(queries):
        names = []
        for name in item.expect:
            key = item.expect_key(position)
            full = resolver.resolve(name, key)
            if full not in resolver.known:
                raise UnknownToolError(key, name, full_names)
            names.append(full)
        resolved.append(item.model_copy(update={"expect": names}))
    return resolved


Offered = Callable[[], "Selection | None"]
"""The selection behind the latest filtered ("on") request."""

Send = Callable[[str, list[tuple[str, str]]], Awaitable[str]]
"""``send(how, messages)``: one request for a conversation of ``(role, text)`` messages ("user",
"assistant"; the agent's instructions come first), ``how`` being "off", "on" (filtered on the last
message) or "conversation" (filtered on the whole conversation); returns the reply's text."""


async def build_token_report(
    spec: AgentSpec,
    kernel: Kernel,
    manager: ToolFilterManager,
    queries: list[SampleQuery],
    encoding: str = "o200k_base",
    conversation: list[str] | None = None,
    framework: Framework = "semantic-kernel",
    progress: ProgressCallback | None = None,
    provider_search: bool = False,
) -> TokenReport:
    """Send every query unfiltered and filtered through the framework's real OpenAI client; count tokens.
    `progress(done, total)` is called after each query (see :class:`sk_toolfilter.basics.progress.Progress`).

    `conversation` (user turns) is also played as one conversation through the filter, with a canned
    assistant reply per turn, to measure how stable the tool list stays. `framework` picks SK's
    ``OpenAIChatCompletion`` and the filtering wrapper, or Agent Framework's OpenAI chat client and
    its chat middleware. `provider_search` adds each request's estimated tool tokens with provider tool
    search (:mod:`sk_toolfilter.measure.provider_search_tokens`).
    """
    transport = RecordingTransport()
    if framework == "agent-framework":
        send, offered = _agent_framework_send(spec, kernel, manager, transport)
    else:
        send, offered = _semantic_kernel_send(spec, kernel, manager, transport)
    queries = resolve_expected(queries, [t.full_name for t in manager.index.tools])
    rows = []
    for done, item in enumerate(queries, 1):
        rows.append(await _query_report(item, send, offered, transport, encoding))
        if provider_search:
            _estimate_provider_search(rows[-1], transport.requests[-2], manager, encoding)
        if progress is not None:
            progress(done, len(queries))
    played = await _play_conversation(conversation, send, transport, encoding) if conversation else None
    if played is not None and provider_search and rows:
        every_tool = transport.requests[0].get("tools") or []  # the first query's unfiltered request
        played.wire_modes = conversation_cache(
            manager,
            every_tool,
            played.tools_per_request,
            played.tools_tokens_per_request,
            manager.config.provider_search,
            encoding,
        )
    return TokenReport(
        agent=spec.name,
        model=spec.model.name,
        encoding=encoding,
        catalog_size=manager.catalog_size,
        search_method=manager.config.search_method,
        queries=rows,
        conversation=played,
        selection_mode=manager.config.selection_mode,
        framework=framework,
    )


async def _query_report(
    item: SampleQuery, send: Send, offered: Offered, transport: RecordingTransport, encoding: str
) -> QueryReport:
    """One query sent unfiltered and filtered: what each request carried, and why."""
    bodies = []
    for how in ("off", "on"):
        await send(how, [("user", item.query)])
        bodies.append((transport.requests[-1], transport.raw_bodies[-1].decode("utf-8")))
    (off, off_raw), (on, on_raw) = bodies
    selected = [t["function"]["name"] for t in on.get("tools") or []]
    selection = offered()  # the selection behind what was sent (no second selection, no second pick)
    return QueryReport(
        query=item.query,
        tools_off=len(off.get("tools") or []),
        tools_on=len(selected),
        tools_tokens_off=count_json_tokens(off["tools"], encoding) if off.get("tools") else 0,
        tools_tokens_on=count_json_tokens(on["tools"], encoding) if on.get("tools") else 0,
        body_tokens_off=count_tokens(off_raw, encoding),
        body_tokens_on=count_tokens(on_raw, encoding),
        selected=selected,
        expected=item.expect,
        expected_sent=set(item.expect) <= set(selected) if item.expect else None,
        **_selection_fields(selection),
    )


def _estimate_provider_search(row: QueryReport, off: dict[str, Any], manager: ToolFilterManager, encoding: str) -> None:
    """The row's tool tokens with provider tool search: the offer of the filtered request's selection over
    the unfiltered request's tools (:func:`~sk_toolfilter.selection.offer.search_offer`)."""
    every_tool = off.get("tools") or []
    names = [t["function"]["name"] for t in every_tool]
    offer = search_offer(manager, names, row.selected, manager.config.provider_search)
    row.tools_tokens_provider_search, row.tools_tokens_provider_search_claude = provider_search_tokens(
        every_tool, offer, encoding
    )
    row.tools_tokens_provider_search_plugin = provider_search_tokens(every_tool, offer, encoding, unit="plugin")[0]
    row.tools_tokens_filter_search = provider_search_tokens(every_tool, offer, encoding, answered=True)[0]
    row.tools_deferred = len(offer.deferred)


async def _play_conversation(
    conversation: list[str], send: Send, transport: RecordingTransport, encoding: str
) -> ConversationReport:
    """The sample conversation, turn by turn through the filter (a canned reply per turn)."""
    lists, counts = [], []
    messages: list[tuple[str, str]] = []
    for turn in conversation:
        messages.append(("user", turn))
        messages.append(("assistant", await send("conversation", messages)))
        tools = transport.requests[-1].get("tools") or []
        lists.append([t["function"]["name"] for t in tools])
        counts.append(count_json_tokens(tools, encoding) if tools else 0)
    return ConversationReport(list(conversation), lists, counts)


def _selection_fields(selection: Selection | None) -> dict[str, Any]:
    """A query row's method and second-stage figures, read from the selection behind what was sent."""
    if selection is None:
        return {}
    ranking = selection.ranking
    method = ranking.method + (f" (fallback: {ranking.fallback_reason})" if ranking.fallback_reason else "")
    for step, note in ranking.steps.items():  # each reordering that ran, by name: never read from its text
        if note.reordered:
            method += f" + {step}"
        elif step != "learning from use":  # learning that moved nothing ranks as the first stage did
            method += f" ({step} failed: the first stage's order)"
    stage = selection.second_stage
    if stage is not None and stage.attempted:
        method += " + llm pick" if stage.picked is not None else f" (llm pick fell back: {stage.fallback})"
    fields: dict[str, Any] = {"method": method}
    if stage is not None:
        fields["picker"] = stage.note
        fields["picker_tried"] = stage.attempted
        fields["picker_fallback"] = stage.fallback or ""
        fields["picker_input_tokens"] = int(stage.cost.get("input_tokens", 0))
        fields["picker_output_tokens"] = int(stage.cost.get("output_tokens", 0))
        fields["picker_seconds"] = float(stage.cost.get("seconds", 0.0))
    return fields


def _semantic_kernel_send(
    spec: AgentSpec, kernel: Kernel, manager: ToolFilterManager, transport: RecordingTransport
) -> tuple[Send, Offered]:
    from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
    from semantic_kernel.contents import AuthorRole, ChatHistory, ChatMessageContent

    from sk_toolfilter.agents.agent import execution_settings

    plain = offline_chat_service(transport, model=spec.model.name)
    settings = execution_settings(spec, plain)
    # Filtering off = the app without sk-toolfilter: no discovery plugin either.
    unfiltered_settings = settings.model_copy(
        update={
            "function_choice_behavior": FunctionChoiceBehavior.Auto(
                filters={"excluded_plugins": [manager.config.discovery.plugin_name]}
            )
        }
    )
    services = {
        "off": (plain, unfiltered_settings),
        "on": (wrap_chat_service(plain, manager, "last_message"), settings),
        "conversation": (wrap_chat_service(plain, manager), settings),
    }
    instructions = spec.instructions_text()

    async def send(how: str, messages: list[tuple[str, str]]) -> str:
        service, request_settings = services[how]
        history = ChatHistory(system_message=instructions) if instructions else ChatHistory()
        for role, text in messages:
            history.add_message(ChatMessageContent(role=AuthorRole(role), content=text))
        reply = await service.get_chat_message_contents(history, request_settings, kernel=kernel)
        return str(reply[0].content or "")

    on = services["on"][0]
    assert isinstance(on, FilteredChatCompletion)
    return send, lambda: on.last_offer.selection if on.last_offer is not None else None


def _agent_framework_send(
    spec: AgentSpec, kernel: Kernel, manager: ToolFilterManager, transport: RecordingTransport
) -> tuple[Send, Offered]:
    from agent_framework import Message

    from sk_toolfilter.agent_framework.middleware import ToolFilterMiddleware
    from sk_toolfilter.agent_framework.setup import kernel_filter
    from sk_toolfilter.measure.wire import offline_agent_framework_client

    tool_filter = kernel_filter(manager, kernel)
    discovery = f"{manager.config.discovery.plugin_name}-"
    everything = [t for t in tool_filter.tools if not t.name.startswith(discovery)]
    model = spec.model.name
    on = ToolFilterMiddleware(manager, "last_message")
    clients = {
        "off": (offline_agent_framework_client(transport, model), everything),
        "on": (offline_agent_framework_client(transport, model, [on]), tool_filter.tools),
        "conversation": (
            offline_agent_framework_client(transport, model, [tool_filter.chat_middleware]),
            tool_filter.tools,
        ),
    }
    instructions = spec.instructions_text()

    async def send(how: str, messages: list[tuple[str, str]]) -> str:
        client, tools = clients[how]
        prompt = [("system", instructions)] if instructions else []
        sent = [Message(role=role, contents=[text]) for role, text in [*prompt, *messages]]
        response = await client.get_response(sent, options={**spec.model.options, "tools": tools})
        return response.text or ""

    return send, lambda: on.last_offer.selection if on.last_offer is not None else None


_CLIENTS = {
    "semantic-kernel": "SK's OpenAI connector",
    "agent-framework": "Agent Framework's OpenAI chat client",
}


def render_terminal(report: TokenReport) -> str:
    lines = [f"{'query':44} {'tools off':>9} {'tools on':>8} {'tok off':>8} {'tok on':>7}  selected"]
    for q in report.queries:
        mark = {True: "✓ ", False: "✗ ", None: "  "}[q.expected_sent]
        lines.append(
            f"{shorten(q.query, 44):44} {q.tools_off:>9} {q.tools_on:>8} {q.tools_tokens_off:>8} "
            f"{q.tools_tokens_on:>7}  {mark}{', '.join(q.selected) or '(none)'}"
        )
    t = report.totals
    nothing_to_save = bool(report.queries) and all(q.tools_on == q.tools_off for q in report.queries)
    lines.append(
        f"\nTools tokens: {t['tools_tokens_off']:,} off → {t['tools_tokens_on']:,} on "
        f"({t['saved_percent']:.1f}% saved); whole request: {t['body_tokens_off']:,} → {t['body_tokens_on']:,} "
        f"({t['body_saved_percent']:.1f}% saved); mean tools sent {number(t['mean_tools_on'])} of "
        f"{report.catalog_size} ({'' if nothing_to_save else 'discovery tools included; '}"
        f"{_CLIENTS.get(report.framework, report.framework)})"
    )
    if nothing_to_save:
        lines.append(
            f"Nothing to save: all {report.catalog_size} {plural(report.catalog_size, 'tool')} fit the budget of every "
            "request, so filtering sends exactly what plain Semantic Kernel sends (no discovery tools either)"
        )
    lines.append(f"Ranked with: {methods_used(report)}")
    if (picked := picker_line(report)) is not None:
        lines.append(picked)
    if (searched := provider_search_line(report)) is not None:
        lines.append(searched)
    if t["expected_tool_sent"]:
        lines.append(f"Expected tool sent: {t['expected_tool_sent']} queries")
    if report.conversation:
        share = report.conversation.prefix_stable_share
        lines.append(
            f"Sample conversation ({len(report.conversation.turns)} turns, selection_mode={report.selection_mode}): "
            f"tools prefix unchanged from the previous request in {share_percent(share)} of requests"
        )
        lines.append(caching_line(report))
    return "\n".join(lines)


def render_markdown(report: TokenReport) -> str:
    t = report.totals
    out = [
        f"# Token-savings report: {report.agent}",
        "",
        f"Model `{report.model}`, tokenizer `{report.encoding}`, "
        f"{report.catalog_size} {plural(report.catalog_size, 'tool')}, "
        f"search method `{report.search_method}` (ranked with: {methods_used(report)}). "
        "Tool tokens are counted on the `tools` array of the "
        f"request body {_CLIENTS.get(report.framework, report.framework)} sent (compact JSON, as on the wire).",
        "",
        "| | filtering off | filtering on | saved |",
        "|---|---|---|---|",
        f"| tools tokens | {t['tools_tokens_off']:,} | {t['tools_tokens_on']:,} | {t['saved_percent']:.1f}% |",
        f"| whole request tokens | {t['body_tokens_off']:,} | {t['body_tokens_on']:,} "
        f"| {t['body_saved_percent']:.1f}% |",
        f"| mean tools sent | {number(t['mean_tools_off'])} | {number(t['mean_tools_on'])} | |",
        "",
    ]
    if (picked := picker_line(report)) is not None:
        out += [picked + ".", ""]
    if (searched := provider_search_line(report)) is not None:
        out += [searched + ".", ""]
    if t["expected_tool_sent"]:
        out += [f"Expected tool sent for {t['expected_tool_sent']} queries.", ""]
    if report.conversation:
        out += _conversation_markdown(report)
    return "\n".join([*out, *_queries_markdown(report)]) + "\n"


def _conversation_markdown(report: TokenReport) -> list[str]:
    """The sample conversation's section of report.md."""
    assert report.conversation is not None
    conversation = report.conversation
    rows = zip(conversation.turns, conversation.tools_per_request, conversation.tools_tokens_per_request, strict=True)
    return [
        f"Sample conversation, `selection_mode: {report.selection_mode}`: the tools prefix is unchanged from "
        f"the previous request in {share_percent(conversation.prefix_stable_share)} of requests "
        "(providers cache the prompt prefix).",
        "",
        caching_line(report),
        "",
        "| turn | tools sent | tools tokens |",
        "|---|---|---|",
        *(f"| {turn.replace('|', '/')} | {', '.join(tools) or '(none)'} | {tokens} |" for turn, tools, tokens in rows),
        "",
    ]


def _queries_markdown(report: TokenReport) -> list[str]:
    """report.md's table of queries (with the picker's tokens when a picker ran)."""
    picker = any(q.picker for q in report.queries)
    cost_head = " picker tokens |" if picker else ""
    out = [
        f"| query | tools off | tools on | tokens off | tokens on |{cost_head} expected sent | selected |",
        "|---|---|---|---|---|---|---|" + ("---|" if picker else ""),
    ]
    for q in report.queries:
        expected = {True: "yes", False: "**no**", None: ""}[q.expected_sent]
        selected = ", ".join(f"`{s}`" for s in q.selected) or "(none)"
        query = q.query.replace("|", "\\|")
        cost = f"{q.picker_tokens} | " if picker else ""
        out.append(
            f"| {query} | {q.tools_off} | {q.tools_on} | {q.tools_tokens_off} | {q.tools_tokens_on} | "
            f"{cost}{expected} | {selected} |"
        )
    return out


def write_report(report: TokenReport, out_dir: str | Path) -> dict[str, Path]:
    """Write report.json, report.md, chart.svg and report.html (summary cards, chart, tables) to `out_dir`."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    svg = render_chart_svg(report)  # the chart alone, with its title (report.html embeds it too)
    paths = {
        "json": out / "report.json",
        "markdown": out / "report.md",
        "chart": out / "chart.svg",
        "html": out / "report.html",
    }
    paths["json"].write_text(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    paths["markdown"].write_text(render_markdown(report), encoding="utf-8")
    paths["chart"].write_text(svg, encoding="utf-8")
    paths["html"].write_text(render_html(report), encoding="utf-8")
    return paths


__getattr__ = moved_attributes(__name__)
