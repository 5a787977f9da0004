"""Microsoft Agent Framework integration: the same filter, as a chat middleware.

Install with ``pip install "sk-toolfilter[agent-framework]"``. One chat middleware narrows the tools
of every model call (each call of Agent Framework's function loop, streaming included) with the
same manager, agent-loop policy, discovery tools and sticky lists as the Semantic Kernel wrapper;
a function middleware refuses tools the agent may not see or was not offered.

    tool_filter = await create_agent_framework_filter(tools, config)
    agent = Agent(client=client, tools=tool_filter.tools, middleware=tool_filter.middleware)

Tools are read from Agent Framework's own objects (``FunctionTool``, MCP tools) into the
framework-neutral :class:`~sk_toolfilter.retrieval.metadata.ToolMetadata` the index crawls.
"""

from __future__ import annotations

try:
    import agent_framework as _agent_framework  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without the extra
    from sk_toolfilter.basics.errors import ToolFilterError, install_line

    raise ToolFilterError(f"Agent Framework is not installed: {install_line('agent-framework')}") from exc

from sk_toolfilter.agent_framework.middleware import ToolFilterMiddleware, ToolGuardMiddleware
from sk_toolfilter.agent_framework.picker_chat import agent_framework_picker_chat
from sk_toolfilter.agent_framework.provider_search import ToolSearchOpenAIChatClient
from sk_toolfilter.agent_framework.setup import AgentFrameworkFilter, create_agent_framework_filter
from sk_toolfilter.agent_framework.tools import (
    AgentFrameworkTools,
    kernel_function_tool,
    plugin_tools,
    tool_from_agent_framework,
)

__all__ = [
    "AgentFrameworkFilter",
    "AgentFrameworkTools",
    "ToolFilterMiddleware",
    "ToolGuardMiddleware",
    "ToolSearchOpenAIChatClient",
    "agent_framework_picker_chat",
    "create_agent_framework_filter",
    "kernel_function_tool",
    "plugin_tools",
    "tool_from_agent_framework",
]
