"""An MCP server's tools (and prompts) as a Semantic Kernel plugin, kept in step with the server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from semantic_kernel import Kernel
from semantic_kernel.functions import KernelFunction, KernelFunctionFromMethod, KernelPlugin, kernel_function
from semantic_kernel.functions.kernel_parameter_metadata import KernelParameterMetadata

from sk_toolfilter.agents.json_schema import safe_parameter_name, tool_parameters
from sk_toolfilter.agents.mcp.connection import MCPConnection, ToolCallError
from sk_toolfilter.agents.mcp.results import ERROR_PREFIX, render_content, render_tool_result
from sk_toolfilter.agents.tool_names import function_name, warn_renamed
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.retrieval.metadata import KEYWORDS_PROPERTY

logger = library_logger(__name__)


PIN = "sk_toolfilter_pin"
"""Set in a function's ``metadata.additional_properties`` when its MCP annotations or load hints ask for a pin."""

DESTRUCTIVE = "sk_toolfilter_destructive"
"""Set in a function's ``metadata.additional_properties`` to the server's ``destructiveHint`` (when it gives one)."""


def annotation_actions(tool: Any, wanted: Mapping[Any, str]) -> set[str]:
    """What the source's ``annotations`` setting does with `tool`: the actions of the hints it sets to true."""
    hints = getattr(tool, "annotations", None)
    return {action for hint, action in wanted.items() if getattr(hints, hint, None) is True}


ALWAYS_LOAD = ("alwaysload", "always_load")
DEFER_LOADING = ("deferloading", "defer_loading")
SEARCH_HINT = ("searchhint", "search_hint")
MAX_HINT_CHARS = 200


def load_hints(tool: Any) -> tuple[bool, list[str]]:
    """(pin?, search words) from the load hints a server puts in a tool's ``_meta``.

    Keys are read by their last ``/``-segment, whatever the vendor prefix: ``alwaysLoad: true``
    (Claude Code's ``anthropic/alwaysLoad``) or ``defer_loading: false`` (``<vendor>/defer_loading``)
    ask for the tool's schema on every turn, which is a pin here; ``searchHint`` (``anthropic/searchHint``)
    is a short phrase that should surface the tool, which ranking matches like a keyword. A deferred
    tool (``defer_loading: true``) is what every tool is here: searchable. Other keys are ignored.
    """
    meta = getattr(tool, "meta", None)
    pin, words = False, []
    for key, value in meta.items() if isinstance(meta, dict) else ():
        hint = str(key).rsplit("/", 1)[-1].lower()
        if (hint in ALWAYS_LOAD and value is True) or (hint in DEFER_LOADING and value is False):
            pin = True
        elif hint in SEARCH_HINT and isinstance(value, str) and value.strip():
            words.append(" ".join(value.split())[:MAX_HINT_CHARS])
    return pin, words


def build_plugin(connection: MCPConnection) -> KernelPlugin:
    """The server's current tools (and prompts, when loaded) as kernel functions.

    Each function calls the server through `connection` and returns the result as compact text; a
    failed or timed-out call returns ``error: …`` for the model instead of ending the turn.
    """
    source = connection.source
    functions: list[KernelFunction] = []
    taken: set[str] = set()
    renamed: list[tuple[str, str]] = []
    for tool in connection.tools:
        actions = annotation_actions(tool, source.annotations)
        if "exclude" in actions:
            continue  # never registered: not sent, listed or run
        name = function_name(source.name, tool.name, taken, renamed)
        params = tool_parameters(tool.inputSchema, where=f"{source.name}-{name}")
        method = kernel_function(name=name, description=tool.description or tool.title or "")(
            _tool_caller(connection, tool.name, params.original_names)
        )
        function = KernelFunctionFromMethod(
            method=method, plugin_name=source.name, parameters=[KernelParameterMetadata(**p) for p in params.dicts]
        )
        hinted_pin, search_words = load_hints(tool) if source.load_hints else (False, [])
        extra: dict[str, Any] = {}
        if "pin" in actions or hinted_pin:
            extra[PIN] = True
        if search_words:
            extra[KEYWORDS_PROPERTY] = search_words
        destructive = getattr(getattr(tool, "annotations", None), "destructiveHint", None)
        if isinstance(destructive, bool):
            extra[DESTRUCTIVE] = destructive
        if extra:
            function.metadata.additional_properties = {**(function.metadata.additional_properties or {}), **extra}
        functions.append(function)
    for prompt in connection.prompts:
        name = function_name(source.name, prompt.name, taken, renamed)
        arguments = prompt.arguments or []
        method = kernel_function(name=name, description=prompt.description or "")(
            _prompt_getter(connection, prompt.name, {safe_parameter_name(a.name): a.name for a in arguments})
        )
        functions.append(
            KernelFunctionFromMethod(
                method=method,
                plugin_name=source.name,
                parameters=[
                    KernelParameterMetadata(
                        name=safe_parameter_name(a.name),
                        description=a.description,
                        is_required=bool(a.required),
                        type="string",
                        schema_data={"type": "string", **({"description": a.description} if a.description else {})},
                    )
                    for a in arguments
                ],
            )
        )
    warn_renamed(f"MCP server {source.name!r}", renamed)
    return KernelPlugin(name=source.name, description=source.description or None, functions=functions)


def keep_kernel_in_step(kernel: Kernel) -> Any:
    """An ``on_change`` callback for :class:`MCPConnection`: swap the server's plugin in `kernel`.

    A new plugin object makes the filter re-index before its next selection (only what changed).
    """

    async def swap(connection: MCPConnection) -> None:
        plugin = build_plugin(connection)
        kernel.plugins[connection.source.name] = plugin
        name, count = connection.source.name, len(plugin.functions)
        logger.info("sk-toolfilter: MCP server %s changed its tools; %d functions now", name, count)

    return swap


def _tool_caller(connection: MCPConnection, tool: str, original_names: dict[str, str]) -> Any:
    async def call(**kwargs: Any) -> str:
        arguments = {original_names.get(k, k): v for k, v in kwargs.items()}
        try:
            result = await connection.call_tool(tool, arguments)
        except ToolCallError as exc:
            logger.warning("sk-toolfilter: %s", exc)
            return f"{ERROR_PREFIX}{exc}"
        return render_tool_result(result)

    return call


def _prompt_getter(connection: MCPConnection, prompt: str, original_names: dict[str, str]) -> Any:
    async def get(**kwargs: Any) -> str:
        arguments = {original_names.get(k, k): str(v) for k, v in kwargs.items()}
        try:
            result = await connection.get_prompt(prompt, arguments)
        except ToolCallError as exc:
            logger.warning("sk-toolfilter: %s", exc)
            return f"{ERROR_PREFIX}{exc}"
        return "\n".join(f"{m.role}: {render_content(m.content)}" for m in result.messages)

    return get
