"""The gateway on the MCP SDK's server API — the one module that uses it (the SDK's 2.x renames its
server class: that move is this file).

Each client session gets its own :class:`~sk_toolfilter.gateway.desk.GatewaySession` (the conversation
its searches and calls are learned in). Over HTTP every request carries its caller (a bearer token of
the callers file): the desk answering it is narrowed to that caller's tools and scope, and a session
answers only the caller that opened it. Arguments are read as given (numbers as strings too); the desk
checks them, so the SDK's schema validation is off.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import weakref
from collections.abc import Iterator
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.models import InitializationOptions

from sk_toolfilter import __version__
from sk_toolfilter.gateway.callers import Caller, Callers, is_loopback
from sk_toolfilter.gateway.desk import CallResult, GatewayDesk, GatewaySession, ListedTool

CALLER_KEY = "sk_toolfilter.caller"
"""Where the HTTP app leaves a request's :class:`Caller` in its ASGI scope."""
SESSION_IDLE_SECONDS = 1800.0
"""An HTTP session with no request for this long is ended (its client initializes a new one)."""
MAX_SESSIONS = 10_000
"""Most HTTP sessions open at once; a request that would open another gets 503."""


def build_server(desk: GatewayDesk, name: str = "sk-toolfilter") -> Server[Any, Any]:
    """An MCP server answering ``tools/list`` and ``tools/call`` from `desk` (narrowed per HTTP caller).
    With ``desk.expose_found``, a change of a session's list is announced with ``list_changed``."""
    server = _GatewayServer(name, announces_list_changes=desk.expose_found)
    sessions: weakref.WeakKeyDictionary[Any, GatewaySession] = weakref.WeakKeyDictionary()

    def current() -> tuple[GatewayDesk, GatewaySession]:
        context = server.request_context
        caller = _caller_of(context.request)
        if context.session not in sessions:
            sessions[context.session] = GatewaySession()
        here = desk if caller is None else desk.narrowed(caller.allowed, caller.scope)
        return here, sessions[context.session]

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        here, session = current()
        return [_tool(t) for t in here.listed(session)]

    @server.call_tool(validate_input=False)
    async def call_tool(name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        arguments = arguments or {}
        (here, session), names = current(), desk.names
        if name == names.search:
            before = here.exposed(session)
            result = CallResult(await here.search(session, arguments.get("query", ""), arguments.get("limit")))
            if here.exposed(session) != before:
                await server.request_context.session.send_tool_list_changed()
        elif name == names.describe:
            result = here.describe(arguments.get("name", ""))
        elif name == names.call:
            result = await here.call(session, arguments.get("name", ""), arguments.get("arguments"))
        elif here.listed_directly(name, session):
            result = await here.call(session, name, arguments)  # a pinned (or exposed) tool, by its own name
        else:
            result = CallResult(f"No tool named {name[:200]!r} here: use {names.search}.", True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=result.text)], isError=result.is_error)

    return server


class _GatewayServer(Server[Any, Any]):
    """The SDK's low-level server, declaring ``tools.listChanged`` when the gateway announces list
    changes (the transports ask for the initialization options with none of their own)."""

    def __init__(self, name: str, *, announces_list_changes: bool) -> None:
        super().__init__(name, version=__version__)
        self.announces_list_changes = announces_list_changes

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        notifications = notification_options or NotificationOptions(tools_changed=self.announces_list_changes)
        return super().create_initialization_options(notifications, experimental_capabilities)


def _tool(tool: ListedTool) -> types.Tool:
    return types.Tool(
        name=tool.name,
        description=tool.description + (" [destructive]" if tool.destructive else ""),
        inputSchema=tool.input_schema,
        annotations=types.ToolAnnotations(destructiveHint=True) if tool.destructive else None,
    )


def _caller_of(request: Any) -> Caller | None:
    scope = getattr(request, "scope", None)  # an HTTP request (Starlette's); None over stdio
    caller = scope.get(CALLER_KEY) if isinstance(scope, dict) else None
    return caller if isinstance(caller, Caller) else None


async def serve_stdio(server: Server[Any, Any]) -> None:
    """Serve over the process's own stdin/stdout (the protocol's bytes, never the CLI's redacting text
    streams, which carry logs) until the client closes them."""
    import io

    import anyio
    from mcp.server.stdio import stdio_server

    stdin = anyio.wrap_file(io.TextIOWrapper(sys.__stdin__.buffer, encoding="utf-8"))  # type: ignore[union-attr]
    stdout = anyio.wrap_file(io.TextIOWrapper(sys.__stdout__.buffer, encoding="utf-8"))  # type: ignore[union-attr]
    async with stdio_server(stdin, stdout) as (read, write):
        await server.run(read, write, server.create_initialization_options())


async def serve_http(
    server: Server[Any, Any], host: str, port: int, callers: Callers | None, scope_header: str | None = None
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted (SIGINT / SIGTERM).

    `callers`: who may connect (``Authorization: Bearer``; anyone else gets 401); None only on a
    loopback address. `scope_header`: a request header whose value, when present, is the learning scope
    of that request (else the caller's own). One stderr line says where it serves once it accepts."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    if callers is None and not is_loopback(host):
        raise ValueError("serve_http: a non-loopback address needs callers (bearer tokens)")
    local = [f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]")] if is_loopback(host) else []
    security = TransportSecuritySettings(  # a loopback server refuses other Host / Origin values (DNS rebinding)
        enable_dns_rebinding_protection=bool(local),
        allowed_hosts=local,
        allowed_origins=[f"http://{h}" for h in local],
    )
    sessions = StreamableHTTPSessionManager(  # (request bodies: the SDK's 4 MiB, 413 above it)
        server, security_settings=security, session_idle_timeout=SESSION_IDLE_SECONDS, max_sessions=MAX_SESSIONS
    )
    app = _authenticating(sessions, callers, scope_header)

    class Announcing(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            """SIGINT / SIGTERM end the serving and return (uvicorn's own raises the signal again once
            stopped, which would kill the process before learning is written)."""
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                shown = f"[{host}]" if ":" in host else host
                print(f"sk-toolfilter: serving MCP on http://{shown}:{port}/mcp", file=sys.stderr, flush=True)

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off", access_log=False)
    async with sessions.run():
        await Announcing(config).serve()


def _authenticating(sessions: Any, callers: Callers | None, scope_header: str | None) -> Any:
    """The ASGI app in front of the SDK's session manager: ``/mcp`` only, each request's caller from its
    bearer token (401 without a known one), its scope from `scope_header` when sent."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
    from mcp.server.auth.provider import AccessToken
    from starlette.datastructures import Headers
    from starlette.responses import PlainTextResponse

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return
        if scope["type"] != "http" or scope["path"].rstrip("/") != "/mcp":
            await PlainTextResponse("Not found: the MCP endpoint is /mcp", 404)(scope, receive, send)
            return
        headers = Headers(scope=scope)
        caller = Caller("local", None, None) if callers is None else callers.identify(headers.get("authorization"))
        if caller is None:
            response = PlainTextResponse("Unauthorized: send Authorization: Bearer <token>", 401)
            response.headers["WWW-Authenticate"] = 'Bearer realm="sk-toolfilter"'
            await response(scope, receive, send)
            return
        wanted_scope = headers.get(scope_header) if scope_header else None
        if wanted_scope:
            caller = Caller(caller.name, caller.allowed, wanted_scope[:200])
        # The SDK binds each session to the caller that opened it (another token gets 404 for it).
        token = AccessToken(token="-", client_id=caller.name, scopes=[])
        await sessions.handle_request({**scope, CALLER_KEY: caller, "user": AuthenticatedUser(token)}, receive, send)

    return app
