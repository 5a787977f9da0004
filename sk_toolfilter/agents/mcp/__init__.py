"""MCP servers as tool sources: the session (:mod:`.connection`), the kernel plugin (:mod:`.plugin`)
and compact results (:mod:`.results`)."""

from sk_toolfilter.agents.mcp.connection import MCPConnection, ToolCallError
from sk_toolfilter.agents.mcp.plugin import build_plugin, keep_kernel_in_step

__all__ = ["MCPConnection", "ToolCallError", "build_plugin", "keep_kernel_in_step"]
