"""What an MCP client sees through the gateway, independent of the MCP SDK: the tools it lists, a
search of the whole catalog, a tool's schema, and a call proxied to the real tool — each under the
agent file's visibility (an excluded, disabled or not-allowed tool is never listed, found, described
or run) and learning from use (a session's search, then a call of a tool it found, is learned; the
session is the conversation).
"""

from __future__ import annotations

import json
import uuid
from collections import OrderedDict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from sk_toolfilter.agents.mcp.results import ERROR_PREFIX
from sk_toolfilter.retrieval.metadata import ToolMetadata, openai_tool_definition
from sk_toolfilter.selection.discovery import (
    FooterWords,
    bounded,
    coerce_limit,
    render_full,
    render_matches,
    visible_lookups,
)
from sk_toolfilter.selection.learning import learning_context
from sk_toolfilter.selection.manager import ToolFilterManager

MAX_QUERY_CHARS = 2000
"""A search reads at most this much of its query (a pasted document is not a query)."""
MAX_FOUND_PER_SESSION = 256
"""Tools a session remembers having found (what a later call of one of them learns from)."""
MAX_ARGUMENTS_CHARS = 100_000
"""A call's arguments, as JSON, at most this long."""
MAX_RESULT_CHARS = 200_000
"""A tool's result, as the client receives it, at most this long (the rest cut, saying so)."""
MAX_EXPOSED = 32
"""With ``expose_found``, the most tools a session's searches add to its ``tools/list`` (the latest found)."""


@dataclass(frozen=True)
class GatewayNames:
    """The gateway's own tool names (configurable: a client may already have a ``search_tools``)."""

    search: str = "search_tools"
    describe: str = "describe_tool"
    call: str = "call_tool"


@dataclass(frozen=True)
class ListedTool:
    """One entry of ``tools/list``: its name, description and JSON input schema."""

    name: str
    description: str
    input_schema: dict[str, Any]
    destructive: bool = False


@dataclass(frozen=True)
class CallResult:
    """What a call returns: text for the client, and whether it is an error (the tool did not run, or failed)."""

    text: str
    is_error: bool = False


@dataclass
class GatewaySession:
    """One client session: the conversation its searches and calls belong to, and what its searches found."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    found: OrderedDict[str, str] = field(default_factory=OrderedDict)
    """Tool → the query of the search that last found it (bounded by :data:`MAX_FOUND_PER_SESSION`)."""

    def remember(self, query: str, names: Collection[str]) -> None:
        for name in names:
            self.found[name] = query
            self.found.move_to_end(name)
        while len(self.found) > MAX_FOUND_PER_SESSION:
            self.found.popitem(last=False)


class GatewayDesk:
    """The gateway's answers for one agent file's tools (`manager` ranks and decides visibility,
    `kernel` runs them: native plugins and the agent's MCP servers alike).

    `allowed`: the tools this caller may see and run (None: every visible tool); `scope`: whose
    learning this caller's sessions read and write (``learning.scope``'s value; None: the shared one);
    `expose_found`: the tools a session's searches found join its ``tools/list`` (at most
    :data:`MAX_EXPOSED`, the latest), callable by their own names.
    """

    def __init__(
        self,
        manager: ToolFilterManager,
        kernel: Any,
        names: GatewayNames | None = None,
        *,
        allowed: Collection[str] | None = None,
        scope: str | None = None,
        expose_found: bool = False,
    ) -> None:
        self.manager, self.kernel, self.names = manager, kernel, names or GatewayNames()
        self.allowed = None if allowed is None else frozenset(allowed)
        self.scope, self.expose_found = scope, expose_found
        run, describe = f"{self.names.call}(name, arguments)", f"{self.names.describe}(name)"
        self._footer_words = FooterWords(  # any tool runs through the call tool, not on a next step
            f"The tools shown can be run with {run}; {describe} gives any tool's schema.",
            f"{describe} gives a tool's schema; {run} runs it.",
        )

    def narrowed(self, allowed: Collection[str] | None, scope: str | None) -> GatewayDesk:
        """This desk for a caller that may see only `allowed` (within this desk's own) in `scope`."""
        mine = self.allowed if allowed is None else frozenset(allowed)
        if mine is not None and self.allowed is not None:
            mine &= self.allowed  # never wider than this desk's own (an empty one included)
        return GatewayDesk(
            self.manager,
            self.kernel,
            self.names,
            allowed=mine,
            scope=scope or self.scope,
            expose_found=self.expose_found,
        )

    def visible(self, name: str) -> ToolMetadata | None:
        """The tool `name` (near-miss names resolved as the discovery tool resolves them) when this caller
        may see and run it, else None."""
        tool = self.manager.find_visible_tool(str(name)[:200])
        if tool is None or (self.allowed is not None and tool.full_name not in self.allowed):
            return None
        return tool

    def exposed(self, session: GatewaySession) -> tuple[str, ...]:
        """The found tools `session`'s ``tools/list`` holds: the latest :data:`MAX_EXPOSED`, in the order
        found (none without ``expose_found``)."""
        if not self.expose_found:
            return ()
        return tuple(name for name in session.found if self.visible(name) is not None)[-MAX_EXPOSED:]

    def listed_directly(self, name: str, session: GatewaySession) -> bool:
        """Whether `name` is in `session`'s ``tools/list`` beside the gateway's own (pinned or exposed)."""
        return any(tool.name == name for tool in self.listed(session)[3:])

    def listed(self, session: GatewaySession | None = None) -> list[ListedTool]:
        """``tools/list``: the three gateway tools, then the pinned tools (``always_include``) and, with
        ``expose_found``, the tools `session` found, each by its own schema."""
        names = self.names
        tools = [
            ListedTool(
                names.search,
                "Search every tool behind this gateway by what you want to do. Answers in tiers (full "
                "signatures for a few matches, one-line summaries, names, per-source counts) and ends with how "
                "many matched, how many are shown and how to narrow.",
                _schema(
                    query=("string", "What you want to do, in a few words; empty lists the catalog"),
                    limit=("integer", "Most tools to show (default: as many as fit)"),
                ),
            ),
            ListedTool(
                names.describe,
                "The full schema of one tool by its name (e.g. Math-convert_units), to call it with call_tool.",
                _schema(name=("string", "The tool's name, as search_tools shows it"), required=["name"]),
            ),
            ListedTool(
                names.call,
                "Run one tool by its name with its arguments (an object, as its schema says).",
                _schema(
                    name=("string", "The tool's name, as search_tools shows it"),
                    arguments=("object", "The tool's arguments"),
                    required=["name"],
                ),
            ),
        ]
        direct = [*self.manager.config.always_include, *(self.exposed(session) if session is not None else ())]
        for name in dict.fromkeys(direct):
            tool = self.visible(name)
            if tool is not None and tool.full_name not in {t.name for t in tools}:
                definition = openai_tool_definition(tool)["function"]
                destructive = self.manager.policy.is_destructive(tool.full_name)
                tools.append(ListedTool(tool.full_name, tool.description, definition["parameters"], destructive))
        return tools

    async def search(self, session: GatewaySession, query: object, limit: object = None) -> str:
        """The filter's ranking of the whole catalog for `query` (learning from use read in this caller's
        scope and session), tiered under the discovery size cap, destructive tools marked. With
        telemetry on, one span (``gateway search``): the tools shown, how many matched."""
        text = str(query or "")[:MAX_QUERY_CHARS]
        config = self.manager.config.discovery
        with self.manager.telemetry.gateway("search") as span:
            with learning_context(scope=self.scope, conversation=session.id):
                found = await self.manager.search_catalog(
                    text, learned=True, nearest=coerce_limit(limit, config.max_loaded)
                )  # the matches, then the nearest others when few match: never empty while tools remain
            matches, nearest = self._permitted(found.matched), self._permitted(found.nearest)
            is_destructive = self.manager.policy.is_destructive
            answer, shown = render_matches(
                matches,
                text,
                limit=coerce_limit(limit, 0) or None,
                max_chars=config.max_chars,
                max_loaded=config.max_loaded,
                mark=lambda t: " [destructive]" if is_destructive(t.full_name) else "",
                words=self._footer_words,
                nearest=nearest,
            )
            span.update({"sk_toolfilter.tools.shown": list(shown), "sk_toolfilter.tools.matched": len(matches)})
            span["sk_toolfilter.query"] = text
        if text.strip():
            session.remember(text, shown)
        return answer

    def _permitted(self, tools: list[ToolMetadata]) -> list[ToolMetadata]:
        """`tools` this caller may see (the manager's search already returns only visible tools)."""
        return tools if self.allowed is None else [t for t in tools if t.full_name in self.allowed]

    def describe(self, name: object) -> CallResult:
        """One tool's full schema (its signature, description, parameters and lookups, then the JSON schema)."""
        tool = self.visible(str(name))
        if tool is None:
            return CallResult(f"No tool named {str(name)[:200]!r}. Use {self.names.search} to find one.", True)
        definition = openai_tool_definition(tool)["function"]
        note = " [destructive]" if self.manager.policy.is_destructive(tool.full_name) else ""
        text = render_full(tool, visible_lookups(self.manager, tool.full_name)) + note
        schema = json.dumps(definition["parameters"], ensure_ascii=False)
        return CallResult(bounded(f"{text}\ninput schema: {schema}", self.manager.config.discovery.max_chars))

    async def call(self, session: GatewaySession, name: object, arguments: object) -> CallResult:
        """Run the tool `name` with `arguments` through the agent's kernel (a native function, or the call
        proxied to its MCP server with that server's bounds); a tool this caller may not see never runs.
        A call of a tool this session's search found is learned (the search's query, the tool). With
        telemetry on, one span (``gateway call``): the tool, whether it ran, failed or was learned."""
        with self.manager.telemetry.gateway("call") as span:
            tool = self.visible(str(name))
            span["sk_toolfilter.tool.name"] = tool.full_name if tool is not None else "(not available)"
            result = await self._run(tool, name, arguments)
            span.update({"sk_toolfilter.gateway.error": result.is_error, "sk_toolfilter.learned": False})
            found = None if tool is None or result.is_error else session.found.get(tool.full_name)
            if tool is not None and found is not None:
                with learning_context(scope=self.scope, conversation=session.id):
                    await self.manager.record(found, [tool.full_name])
                span["sk_toolfilter.learned"] = True
        return result

    async def _run(self, tool: ToolMetadata | None, name: object, arguments: object) -> CallResult:
        if tool is None:
            return CallResult(f"No tool named {str(name)[:200]!r} is available here: it was not run.", True)
        checked = _arguments(arguments)
        if isinstance(checked, CallResult):
            return checked
        function = self.kernel.get_function(tool.plugin, tool.name)
        from semantic_kernel.functions import KernelArguments

        given = KernelArguments()  # (KernelArguments(**checked) would take a parameter named `settings`
        given.update(checked)  # for execution settings)
        try:
            result = await function.invoke(self.kernel, given)
        except Exception as exc:  # the tool's own failure goes back to the client, never up the server
            return CallResult(f"{tool.full_name} failed: {type(exc).__name__}: {exc}", True)
        text = _text_of(result)  # an MCP server's failure (timeout, exit, its own isError) reads "error: …"
        if len(text) > MAX_RESULT_CHARS:  # a flood stops here, not in the client's context
            text = f"{text[:MAX_RESULT_CHARS]}\n[result cut at {MAX_RESULT_CHARS:,} of {len(text):,} characters]"
        return CallResult(text, text.startswith(ERROR_PREFIX))


def _schema(required: list[str] | None = None, **properties: tuple[str, str]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: {"type": kind, "description": why} for name, (kind, why) in properties.items()},
    }
    if required:
        schema["required"] = required
    return schema


def _arguments(arguments: object) -> dict[str, Any] | CallResult:
    """The call's arguments as a mapping (a JSON object given as a string too), within bounds."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENTS_CHARS:
            return CallResult(f"arguments longer than {MAX_ARGUMENTS_CHARS:,} characters: not run", True)
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            return CallResult("arguments must be a JSON object: not run", True)
    if not isinstance(arguments, Mapping):
        return CallResult("arguments must be an object: not run", True)
    try:
        size = len(json.dumps(arguments, default=str))
    except (ValueError, RecursionError):
        return CallResult("arguments must be plain JSON: not run", True)
    if size > MAX_ARGUMENTS_CHARS:
        return CallResult(f"arguments longer than {MAX_ARGUMENTS_CHARS:,} characters: not run", True)
    return {str(k): v for k, v in arguments.items()}


def _text_of(result: Any) -> str:
    """A kernel function's result as text (an MCP server's content is already compact text)."""
    value = getattr(result, "value", result)
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(str(getattr(v, "text", v)) for v in value)
    return str(value)
