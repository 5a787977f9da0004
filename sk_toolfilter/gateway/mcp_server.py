"""The gateway on the MCP SDK's server API — the one module that uses it (the SDK's 2.x renames its
server class: that move is this file).

Each client session gets its own :class:`~sk_toolfilter.gateway.desk.GatewaySession` (the conversation
its searches and calls are learned in). Arguments are read as given (numbers as strings too); the
desk checks them, so the SDK's schema validation is off.
"""

from __future__ import annotations

import weakref
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server

from sk_toolfilter import __version__
from sk_toolfilter.gateway.desk import CallResult, GatewayDesk, GatewaySession


def build_server(desk: GatewayDesk, name: str = "sk-toolfilter") -> Server[Any, Any]:
    """An MCP server answering ``tools/list`` and ``tools/call`` from `desk`."""
    server: Server[Any, Any] = Server(name, version=__version__)
    sessions: weakref.WeakKeyDictionary[Any, GatewaySession] = weakref.WeakKeyDictionary()

    def session_of() -> GatewaySession:
        client = server.request_context.session
        if client not in sessions:
            sessions[client] = GatewaySession()
        return sessions[client]

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(
                name=t.name,
                description=t.description + (" [destructive]" if t.destructive else ""),
                inputSchema=t.input_schema,
                annotations=types.ToolAnnotations(destructiveHint=True) if t.destructive else None,
            )
            for t in desk.listed()
        ]

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        arguments = arguments or {}
        session, names = session_of(), desk.names
        if name == names.search:
            result = CallResult(await desk.search(session, arguments.get("query", ""), arguments.get("limit")))
        elif name == names.describe:
            result = desk.describe(arguments.get("name", ""))
        elif name == names.call:
            result = await desk.call(session, arguments.get("name", ""), arguments.get("arguments"))
        elif desk.visible(name) is not None and name in desk.manager.config.always_include:
            result = await desk.call(session, name, arguments)  # a pinned tool, listed and called directly
        else:
            result = CallResult(f"No tool named {name[:200]!r} here: use {names.search}.", True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=result.text)], isError=result.is_error)

    return server


async def serve_stdio(server: Server[Any, Any]) -> None:
    """Serve over the process's own stdin/stdout (the protocol's bytes, never the CLI's redacting text
    streams, which carry logs) until the client closes them."""
    import io
    import sys

    import anyio
    from mcp.server.stdio import stdio_server

    stdin = anyio.wrap_file(io.TextIOWrapper(sys.__stdin__.buffer, encoding="utf-8"))  # type: ignore[union-attr]
    stdout = anyio.wrap_file(io.TextIOWrapper(sys.__stdout__.buffer, encoding="utf-8"))  # type: ignore[union-attr]
    async with stdio_server(stdin, stdout) as (read, write):
        await server.run(read, write, server.create_initialization_options())
