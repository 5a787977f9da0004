"""Composition for Agent Framework: a tool list, its manager, the discovery tools and the middleware."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_framework import FunctionTool, normalize_tools

from sk_toolfilter.agent_framework.middleware import ToolFilterMiddleware, ToolGuardMiddleware
from sk_toolfilter.agent_framework.picker_chat import agent_framework_picker
from sk_toolfilter.agent_framework.provider_search import check_client
from sk_toolfilter.agent_framework.tools import AgentFrameworkTools, function_tools, kernel_function_tool
from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.selection.discovery import DiscoveryPlugin, discovery_pins
from sk_toolfilter.selection.manager import ToolFilterManager
from sk_toolfilter.selection.provider_search import check_tool_names

if TYPE_CHECKING:
    from sk_toolfilter.basics.progress import ProgressCallback
    from sk_toolfilter.retrieval.encoders import EmbeddingService


@dataclass
class AgentFrameworkFilter:
    """What an Agent Framework agent needs: ``Agent(..., tools=f.tools, middleware=f.middleware)``."""

    manager: ToolFilterManager
    tools: list[Any]
    """The agent's tools plus the discovery tools (when ``discovery`` is enabled)."""
    chat_middleware: ToolFilterMiddleware = field(init=False)
    guard: ToolGuardMiddleware = field(init=False)

    def __post_init__(self) -> None:
        self.chat_middleware = ToolFilterMiddleware(self.manager)
        self.guard = ToolGuardMiddleware(self.manager)

    @property
    def middleware(self) -> list[Any]:
        """The chat middleware (narrows each model call) and the function middleware (the guard)."""
        return [self.chat_middleware, self.guard]

    async def aclose(self) -> None:
        """Write what co-usage learned and release the shared store (see ``ToolFilterManager.aclose``)."""
        await self.manager.aclose()


def discovery_tools(config: ToolFilterConfig, taken: Sequence[str]) -> tuple[DiscoveryPlugin, list[Any]]:
    """The discovery plugin and its two functions as Agent Framework tools (``<plugin>-search_tools``,
    ``<plugin>-describe_tool``: the names the SK path gives them)."""
    from semantic_kernel import Kernel
    from semantic_kernel.functions import KernelPlugin

    plugin_name = config.discovery.plugin_name
    if any(name.startswith(f"{plugin_name}-") for name in taken):
        raise ConfigError(
            f"tool_filtering.discovery.plugin_name: {plugin_name!r} is already used by the agent's tools; "
            "choose another name"
        )
    plugin = DiscoveryPlugin()
    kernel = Kernel()
    return plugin, [kernel_function_tool(f, kernel) for f in KernelPlugin.from_object(plugin_name, plugin)]


async def create_agent_framework_filter(
    tools: Any,
    config: ToolFilterConfig | None = None,
    *,
    embedding_service: EmbeddingService | None = None,
    progress: ProgressCallback | None = None,
    chat_client: Any = None,
    agent_client: Any = None,
) -> AgentFrameworkFilter:
    """Index Agent Framework tools (``FunctionTool``, ``@tool`` functions, plain callables, connected
    MCP tools) and return the filter to give an ``Agent``: its ``tools`` (plus the discovery tools)
    and its ``middleware``. The manager follows the returned tool list.

    ``rerank: {type: llm}`` picks with `chat_client` (an Agent Framework chat client: a cheap model
    beside the agent's, or the agent's own); without one it is a :class:`ConfigError`.
    ``provider_search`` checks `agent_client` (the agent's own client) here, at start, when given: it
    must be a :class:`~sk_toolfilter.agent_framework.provider_search.ToolSearchOpenAIChatClient` for a
    model with tool search (else every model call checks it before anything is sent)."""
    config = config or ToolFilterConfig()
    if config.provider_search.enabled and agent_client is not None:
        search = config.provider_search
        check_client(agent_client, provider=search.provider, assumed=search.model_supports_tool_search)
    if config.rerank.type == "llm" and chat_client is None:
        raise ConfigError(
            "tool_filtering.rerank: type llm needs a chat client to pick with: "
            "create_agent_framework_filter(tools, config, chat_client=client)"
        )
    given = list(normalize_tools(tools))
    for position, item in enumerate(given):
        if not isinstance(item, FunctionTool | Mapping):  # a hosted tool is a mapping; the rest is no tool
            raise ConfigError(
                f"tools[{position}]: {type(item).__name__} {str(item)[:60]!r} is not an Agent Framework tool "
                "(a FunctionTool, a @tool function, a callable or a hosted tool)"
            )
    names = [f.name for f, _ in function_tools(given)]
    if config.provider_search.enabled and agent_client is not None:
        check_tool_names(getattr(agent_client, "tool_search_provider", ""), config.provider_search.search, names)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(
            f"tools: more than one tool is named {', '.join(map(repr, repeated))} (the model calls tools by name)"
        )
    plugin = None
    # With provider search the provider finds the tools not loaded: one way to find tools, not two.
    if config.enabled and config.discovery.enabled and not config.provider_search.enabled:
        plugin, found = discovery_tools(config, [f.name for f, _ in function_tools(given)])
        given += found
    manager = await ToolFilterManager.from_source(
        AgentFrameworkTools(given), config, embedding_service=embedding_service, progress=progress
    )
    if plugin is not None:
        plugin.bind(manager)
        manager.set_conversation_pins("discovery", discovery_pins(manager))
    if config.rerank.type == "llm":
        manager.set_second_stage(agent_framework_picker(config.rerank, chat_client))
    return AgentFrameworkFilter(manager, given)


def kernel_filter(manager: ToolFilterManager, kernel: Any) -> AgentFrameworkFilter:
    """The filter for an Agent Framework agent over a kernel an SK manager already indexes (an agent
    file's tools): every kernel function as an AF tool named ``Plugin-function``, the same manager.
    Discovery comes with the manager (``create_tool_filter`` put its plugin on the kernel and
    registered the tools found with it)."""
    tools = [kernel_function_tool(f, kernel) for plugin in kernel.plugins.values() for f in plugin]
    return AgentFrameworkFilter(manager, tools)
