"""Agent Framework tools as framework-neutral tool descriptions, and SK functions as AF tools.

An Agent Framework ``FunctionTool`` gives its name, description and JSON-schema parameters. A tool
named ``Plugin-function`` that this library made (from a Semantic Kernel function or the discovery
plugin) says its plugin in ``additional_properties``, so it is described exactly as the SK kernel
describes it: the same ranking either way.

Agent Framework's own MCP tools need mcp 2.x, which Semantic Kernel 1.x excludes: the MCP servers of
an agent file run on this library's MCP connection and reach Agent Framework as ``FunctionTool``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from agent_framework import FunctionTool

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.retrieval.metadata import (
    KEYWORDS_PROPERTY,
    ToolMetadata,
    openai_tool_definition,
    tool_from_function,
    tool_from_schema,
)

PLUGIN_PROPERTY = "sk_toolfilter_plugin"
"""``additional_properties`` entry of a tool: its plugin (the part of ``Plugin-function`` before the dash)."""


def function_tools(tools: Iterable[Any]) -> list[tuple[FunctionTool, str]]:
    """Every ``FunctionTool`` of a tool list, with its group (its plugin when this library made it).
    Other entries (hosted tools, raw dicts) are not functions the filter can rank and are left out."""
    return [
        (tool, str((tool.additional_properties or {}).get(PLUGIN_PROPERTY) or ""))
        for tool in tools
        if isinstance(tool, FunctionTool)
    ]


def tool_from_agent_framework(tool: FunctionTool, plugin: str = "") -> ToolMetadata:
    """The tool description of one Agent Framework ``FunctionTool`` (its name is what the model calls)."""
    extra = tool.additional_properties or {}
    name = tool.name
    if extra.get(PLUGIN_PROPERTY) and name.startswith(f"{extra[PLUGIN_PROPERTY]}-"):
        plugin, name = str(extra[PLUGIN_PROPERTY]), name.split("-", 1)[1]
    try:
        schema = tool.parameters()
    except Exception:  # a tool whose schema cannot be built is still ranked by its name and description
        schema = {}
    keywords = extra.get(KEYWORDS_PROPERTY, ())
    return tool_from_schema(name, tool.description or "", schema, plugin=plugin, full_name=tool.name, keywords=keywords)


class AgentFrameworkTools:
    """A list of Agent Framework tools as a :class:`~sk_toolfilter.selection.tool_source.ToolSource`.

    The list is followed, not copied: tools appended or removed later are re-indexed, and removed
    ones never offered, from the next selection on.
    """

    def __init__(self, tools: Sequence[Any]) -> None:
        self.tools = tools
        self._present: frozenset[str] | None = None

    def _functions(self) -> list[tuple[FunctionTool, str]]:
        return function_tools(self.tools)

    def fingerprint(self, previous: tuple[Any, ...] | None) -> tuple[Any, ...]:
        functions = self._functions()
        # The names as of this check (made before every selection): `exists` answers from them, so a
        # selection does not walk the list once per ranked tool.
        self._present = frozenset(f.name for f, _ in functions)
        return tuple((id(f), f.name, group) for f, group in functions)

    def crawl(self) -> list[ToolMetadata]:
        return [tool_from_agent_framework(f, group) for f, group in self._functions()]

    def names(self) -> list[str]:
        return [f.name for f, _ in self._functions()]

    def exists(self, full_name: str) -> bool:
        present = self._present if self._present is not None else frozenset(self.names())
        return full_name in present


def plugin_tools(plugin: str, tools: Iterable[Any]) -> list[FunctionTool]:
    """Agent Framework tools as the functions of one plugin, named as an agent file or Semantic Kernel
    names them (``Ops-service_status`` for a tool ``service_status`` of plugin ``Ops``)::

        tool_filter = await create_agent_framework_filter(plugin_tools("Ops", [service_status, restart]), config)

    The same functions in an agent file's plugin ``Ops`` and here are then one catalog: the same tool
    names (what learning from use remembers, what ``exclude`` and ``tools_overrides`` name), the same
    ranking, and one learning file read by both. Each tool keeps its function, schema, description and
    settings; plain callables and ``@tool`` functions are accepted (hosted tools are not functions: a
    ConfigError names them)."""
    if not plugin or "-" in plugin:
        raise ConfigError(f"plugin_tools: plugin name {plugin!r} must be non-empty and without '-'")
    named = []
    for item in tools:
        found = item if isinstance(item, FunctionTool) else _as_function_tool(item)
        extra = {**(found.additional_properties or {}), PLUGIN_PROPERTY: plugin}
        named.append(
            FunctionTool(
                name=f"{plugin}-{found.name}",
                description=found.description,
                approval_mode=found.approval_mode,
                max_invocations=found.max_invocations,
                max_invocation_exceptions=found.max_invocation_exceptions,
                additional_properties=extra,
                func=found.func,
                input_model=found.parameters(),
            )
        )
    return named


def _as_function_tool(item: Any) -> FunctionTool:
    from agent_framework import tool

    if not callable(item):
        raise ConfigError(f"plugin_tools: {type(item).__name__} {str(item)[:60]!r} is not a function tool")
    return tool(item)


def kernel_function_tool(function: Any, kernel: Any) -> FunctionTool:
    """A Semantic Kernel ``KernelFunction`` as an Agent Framework tool named ``Plugin-function``.

    The model sees the same name, description and parameter schema as through SK; calling it runs
    the kernel function (plugins, MCP servers and vectorstores of an agent file work unchanged).
    """
    from semantic_kernel.functions import KernelArguments

    described = tool_from_function(function)
    # Exactly the parameters SK's OpenAI connector sends for the function.
    schema = openai_tool_definition(described)["function"]["parameters"]

    async def run(**arguments: Any) -> str:
        given = KernelArguments()  # (KernelArguments(**arguments) would take a parameter named `settings`
        given.update(arguments)  # for execution settings)
        result = await function.invoke(kernel, given)
        return "" if result is None or result.value is None else str(result.value)

    return FunctionTool(
        name=described.full_name,
        description=described.description,
        func=run,
        input_model=schema,
        additional_properties={PLUGIN_PROPERTY: described.plugin, KEYWORDS_PROPERTY: list(described.keywords)},
    )
