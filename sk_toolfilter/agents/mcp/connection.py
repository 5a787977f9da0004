"""One MCP server session: started, watched, bounded, restarted and stopped on the raw MCP SDK.

Why not Semantic Kernel's ``MCPStdioPlugin``: it awaits a tool reload inside the session's receive
loop when the server says ``notifications/tools/list_changed`` (a deadlock when that happens during
start-up), opens the transport in one task and closes it in another (cancel-scope errors), reports
a server that exited only when its start-up timeout ends, has no per-call timeout and never
restarts. Here:

- the session lives in one background task, from opening the transport to closing it;
- notifications are handled without blocking the receive loop; a tool-list change re-lists the
  tools in a task of its own and tells the owner (which swaps the kernel plugin: the filter
  re-indexes before its next selection);
- a relay between transport and session sees the server go away at once: start-up fails within
  moments of a crash, naming what was observed and the last lines of the server's stderr;
- each call is bounded by ``request_timeout_seconds``; a server found dead is restarted on the next
  call (once per call); failures come back as :class:`ToolCallError` with a message for the model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import ClientSession, McpError, types
from mcp.shared.message import SessionMessage

from sk_toolfilter.agents.agent_file import MCPSource
from sk_toolfilter.basics.errors import ToolFilterError, ToolSourceError
from sk_toolfilter.basics.redaction import library_logger, redact_url

logger = library_logger(__name__)

STOP_TIMEOUT_SECONDS = 5.0
"""How long closing waits for a server to exit on its own before it is killed."""
STDERR_TAIL_CHARS = 1500
REQUEST_TIMEOUT = 408
"""The error code the MCP SDK gives a request that timed out."""
MAX_LIST_PAGES = 100


class ToolCallError(ToolFilterError):
    """A tool call that did not produce a result (timeout, server gone, protocol error)."""


class MCPConnection:
    """A running MCP server, its tools and prompts.

    ``await start()`` connects (or raises :class:`ToolSourceError` saying what was observed);
    ``await call_tool(name, arguments)`` calls one tool; ``await aclose()`` stops the server.
    `on_change` is awaited after the server's tool or prompt list changed and was re-read.
    """

    def __init__(
        self,
        source: MCPSource,
        *,
        cwd: Path,
        where: str,
        on_change: Callable[[MCPConnection], Awaitable[None]] | None = None,
    ) -> None:
        self.source = source
        self.where = where
        self.cwd = cwd
        self.on_change = on_change
        self.command = resolve_command(source.command) if source.command else None
        self.tools: list[types.Tool] = []
        self.prompts: list[types.Prompt] = []
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._scope: anyio.CancelScope | None = None
        self._stop = asyncio.Event()
        self._gone = asyncio.Event()
        self._stderr: TextIO | None = None
        self._phase = "not started"
        self._received = 0
        self._noise = 0
        self._noise_sample = ""
        self._lost_reason = ""
        self._reload: asyncio.Task[None] | None = None
        self._reload_again = False
        self._restart_lock = asyncio.Lock()

    # ------------------------------------------------------------------ lifecycle

    @property
    def target(self) -> str:
        """What runs the server, for messages: the command line or the URL (without credentials)."""
        if self.source.url:
            return redact_url(self.source.url)
        return " ".join([self.source.command or "", *self.source.args]).strip()

    @property
    def alive(self) -> bool:
        return self._session is not None and not self._gone.is_set()

    async def start(self) -> None:
        """Start the server, initialize the session and list its tools (and prompts).

        Bounded by ``startup_timeout_seconds``; a server that exits or fails meanwhile is reported as
        soon as that is seen. Raises :class:`ToolSourceError` naming the source, the command or URL,
        what was observed and the tail of the server's stderr.
        """
        if self._task is not None and not self._task.done():
            raise ToolFilterError(f"{self.where}: MCP server already running")
        self._stop, self._gone = asyncio.Event(), asyncio.Event()
        self._received = self._noise = 0
        self._noise_sample = self._lost_reason = ""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())  # read even after a timeout
        self._task = asyncio.create_task(self._run(ready), name=f"mcp:{self.source.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout=self.source.startup_timeout_seconds)
        except asyncio.TimeoutError:
            phase = self._phase
            await self._halt()
            raise ToolSourceError(self._timeout_message(phase)) from None
        except asyncio.CancelledError:
            await self._halt()
            raise
        except Exception as exc:
            await self._halt()
            raise ToolSourceError(self._failure_message(exc)) from None

    async def aclose(self) -> None:
        """Stop the server (stdin closed, then terminated, then killed) and forget its session."""
        if self._reload is not None:
            self._reload.cancel()
        await self._halt()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    async def _halt(self) -> None:
        task = self._task
        if task is None:
            return
        self._stop.set()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), timeout=0 if not self._session else STOP_TIMEOUT_SECONDS)
        if not task.done() and self._scope is not None:
            self._scope.cancel()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), timeout=STOP_TIMEOUT_SECONDS)
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._task = None

    async def _run(self, ready: asyncio.Future[None]) -> None:
        """The session's whole life, in one task (the MCP SDK's cancel scopes must open and close in one)."""
        self._phase = "transport"
        try:
            with anyio.CancelScope() as self._scope:
                async with self._transport() as (read, write), anyio.create_task_group() as group:
                    session_read_send, session_read = anyio.create_memory_object_stream[SessionMessage | Exception](0)
                    group.start_soon(self._relay, read, session_read_send)
                    self._phase = "initialize"
                    async with ClientSession(
                        session_read,
                        write,
                        message_handler=self._on_message,
                        logging_callback=self._on_log,
                    ) as session:
                        init = await session.initialize()
                        self._phase = "tools"
                        self.tools = await _list_tools(session)
                        if self.source.load_prompts and init.capabilities.prompts is not None:
                            self.prompts = await _list_prompts(session)
                        self._session, self._phase = session, "running"
                        ready.set_result(None)
                        await _first(self._stop, self._gone)
                    group.cancel_scope.cancel()
        except BaseException as exc:  # reported to whoever waits on `ready`, or logged
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError(str(exc) or "cancelled"))
            elif not self._stop.is_set():
                self._lost_reason = _root_cause(exc)
                logger.warning("sk-toolfilter: MCP server %s stopped: %s", self.source.name, self._lost_reason)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._session = None
            self._gone.set()
            if not ready.done():
                ready.set_exception(ConnectionError(self._lost_reason or "the connection closed"))

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        source = self.source
        if source.kind == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            assert self.command is not None
            if self._stderr is None:
                # A real file (the child writes to its descriptor); read back with pread, never seek.
                self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
            params = StdioServerParameters(command=self.command, args=source.args, env=source.env, cwd=self.cwd)
            async with stdio_client(params, errlog=self._stderr) as (read, write):
                yield read, write
            return
        from mcp.shared._httpx_utils import create_mcp_http_client

        assert source.url is not None
        if source.kind == "sse":
            from mcp.client.sse import sse_client

            async with sse_client(source.url, headers=source.headers, timeout=source.startup_timeout_seconds) as (
                read,
                write,
            ):
                yield read, write
            return
        from mcp.client.streamable_http import streamable_http_client

        client = create_mcp_http_client(headers=source.headers)
        async with client, streamable_http_client(source.url, http_client=client) as (read, write, _session_id):
            yield read, write

    async def _relay(self, read: Any, sink: Any) -> None:
        """Transport → session, counting what arrives; the end of the transport ends the session."""
        async with sink:
            try:
                async for message in read:
                    if isinstance(message, Exception) and self.source.kind != "stdio":
                        self._lost_reason = _root_cause(message)  # an HTTP transport error ends the session
                        break
                    if isinstance(message, Exception):
                        self._noise += 1
                        self._noise_sample = self._noise_sample or _unparsed_line(message)
                    else:
                        self._received += 1
                    await sink.send(message)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
        if not self._stop.is_set():
            self._lost_reason = self._lost_reason or "the server closed the connection"
        self._gone.set()

    # ------------------------------------------------------------------ messages from the server

    async def _on_message(self, message: Any) -> None:
        """Never blocks the receive loop: list changes are re-read in a task of their own."""
        if isinstance(message, Exception):
            if self._noise <= 1:
                logger.warning(
                    "sk-toolfilter: MCP server %s wrote a line that is not JSON-RPC on stdout (ignored): %r",
                    self.source.name,
                    _unparsed_line(message),
                )
            return
        if not isinstance(message, types.ServerNotification):
            return
        if isinstance(message.root, types.ToolListChangedNotification | types.PromptListChangedNotification):
            if self._phase != "running":
                return  # the start-up listing happens after this message: it already sees the change
            if self._reload is not None and not self._reload.done():
                self._reload_again = True
                return
            self._reload = asyncio.get_running_loop().create_task(self._reload_lists())

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        level = {"debug": logging.DEBUG, "info": logging.DEBUG, "notice": logging.INFO, "warning": logging.INFO}
        logger.log(level.get(params.level, logging.WARNING), "MCP server %s: %s", self.source.name, params.data)

    async def _reload_lists(self) -> None:
        while True:
            self._reload_again = False
            session = self._session
            if session is None:
                return
            try:
                tools = await asyncio.wait_for(_list_tools(session), self.source.request_timeout_seconds)
                prompts = self.prompts
                if self.source.load_prompts:
                    prompts = await asyncio.wait_for(_list_prompts(session), self.source.request_timeout_seconds)
            except Exception as exc:
                logger.warning(
                    "sk-toolfilter: MCP server %s changed its tools but did not list them: %s",
                    self.source.name,
                    _root_cause(exc),
                )
                return
            changed = _signature(tools, prompts) != _signature(self.tools, self.prompts)
            self.tools, self.prompts = tools, prompts
            if changed and self.on_change is not None:
                await self.on_change(self)
            if not self._reload_again:
                return

    # ------------------------------------------------------------------ calls

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call one tool, bounded by ``request_timeout_seconds``; raises :class:`ToolCallError`."""
        session = await self._live_session(f"tool {name!r}")
        timeout = self.source.request_timeout_seconds
        try:
            return await asyncio.wait_for(
                session.call_tool(name, arguments, read_timeout_seconds=timedelta(seconds=timeout)),
                timeout=timeout + 1,
            )
        except asyncio.TimeoutError:
            raise ToolCallError(self._timeout_text(f"tool {name!r}")) from None
        except McpError as exc:
            if exc.error.code == REQUEST_TIMEOUT:
                raise ToolCallError(self._timeout_text(f"tool {name!r}")) from None
            raise ToolCallError(self._call_failed_text(f"tool {name!r}", exc.error.message)) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError) as exc:
            raise ToolCallError(self._call_failed_text(f"tool {name!r}", _root_cause(exc))) from None

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> types.GetPromptResult:
        """Fetch one prompt, bounded like a tool call."""
        session = await self._live_session(f"prompt {name!r}")
        try:
            return await asyncio.wait_for(session.get_prompt(name, arguments), self.source.request_timeout_seconds)
        except asyncio.TimeoutError:
            raise ToolCallError(self._timeout_text(f"prompt {name!r}")) from None
        except (McpError, anyio.ClosedResourceError, anyio.BrokenResourceError, ConnectionError) as exc:
            message = exc.error.message if isinstance(exc, McpError) else _root_cause(exc)
            raise ToolCallError(self._call_failed_text(f"prompt {name!r}", message)) from None

    async def _live_session(self, what: str) -> ClientSession:
        """The session, after restarting a server that went away (one attempt per call)."""
        async with self._restart_lock:
            if not self.alive:
                reason = self._lost_reason or "it stopped"
                logger.warning("sk-toolfilter: restarting MCP server %s (%s)", self.source.name, reason)
                before = _signature(self.tools, self.prompts)
                await self._halt()
                try:
                    await self.start()
                except ToolSourceError as exc:
                    raise ToolCallError(
                        f"MCP server {self.source.name} stopped ({reason}) and could not be restarted, so {what} "
                        f"did not run: {exc}"
                    ) from None
                if before != _signature(self.tools, self.prompts) and self.on_change is not None:
                    await self.on_change(self)
        session = self._session
        if session is None:
            raise ToolCallError(f"MCP server {self.source.name} is not running, so {what} did not run")
        return session

    def _timeout_text(self, what: str) -> str:
        return (
            f"MCP server {self.source.name} did not answer {what} within "
            f"{self.source.request_timeout_seconds:g}s (request_timeout_seconds)"
        )

    def _call_failed_text(self, what: str, reason: str) -> str:
        if self._gone.is_set():
            name = self.source.name
            return f"MCP server {name} stopped while running {what} ({reason}); it restarts on the next call"
        return f"MCP server {self.source.name} failed {what}: {reason}"

    # ------------------------------------------------------------------ messages for people

    def stderr_tail(self, limit: int = STDERR_TAIL_CHARS) -> str:
        """The last lines the server wrote on stderr (stdio servers only)."""
        handle = self._stderr
        if handle is None or not hasattr(os, "pread"):
            return ""
        try:
            size = os.fstat(handle.fileno()).st_size
            data = os.pread(handle.fileno(), limit, max(0, size - limit))
        except (OSError, ValueError):
            return ""
        lines = data.decode("utf-8", errors="replace").splitlines()
        if size > limit and len(lines) > 1:
            lines = lines[1:]  # drop the partial first line
        return "\n".join([line for line in lines if line.strip()][-12:])

    def _observed(self) -> str:
        seen = []
        if self._received:
            seen.append(f"{self._received} JSON-RPC message(s) received")
        if self._noise:
            seen.append(f"{self._noise} line(s) on stdout that are not JSON-RPC, first: {self._noise_sample!r}")
        if not self._received and not self._noise:
            seen.append("nothing received" if self.source.kind != "stdio" else "no output on stdout")
        stderr = self.stderr_tail()
        if self.source.kind == "stdio":
            seen.append(f"its stderr ends with:\n{_indent(stderr)}" if stderr else "nothing on stderr")
        return "; ".join(seen)

    def _timeout_message(self, phase: str) -> str:
        waited = f"{self.source.startup_timeout_seconds:g}s"
        step = {
            "initialize": f"did not answer 'initialize' within {waited}",
            "tools": f"answered 'initialize' but did not list its tools within {waited}",
        }.get(phase, f"did not start within {waited}")
        return f"{self.where}: MCP server {self.target!r} {step} (startup_timeout_seconds); {self._observed()}"

    def _failure_message(self, exc: BaseException) -> str:
        cause = _root_cause(exc)
        if isinstance(exc, FileNotFoundError | PermissionError) or "No such file" in cause:
            return f"{self.where}: MCP server command {self.source.command!r} cannot be run: {cause}"
        if self._gone.is_set() and self.source.kind == "stdio":
            return f"{self.where}: MCP server {self.target!r} exited during start-up; {self._observed()}"
        return f"{self.where}: MCP server {self.target!r} failed to start: {cause}; {self._observed()}"


def resolve_command(command: str) -> str:
    """``python`` is this interpreter; a command missing from ``PATH`` is looked up beside it."""
    if command in ("python", "python3"):
        return sys.executable
    if os.sep in command or shutil.which(command):
        return command
    beside = Path(sys.executable).parent / command
    return str(beside) if beside.exists() else command


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    return await _all_pages(session.list_tools, "tools")


async def _list_prompts(session: ClientSession) -> list[types.Prompt]:
    return await _all_pages(session.list_prompts, "prompts")


async def _all_pages(fetch: Callable[[str | None], Awaitable[Any]], field: str) -> list[Any]:
    """Every item of a paginated MCP list (bounded by :data:`MAX_LIST_PAGES`)."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = await fetch(cursor)
        items += getattr(page, field)
        cursor = page.nextCursor
        if not cursor:
            break
    return items


def _signature(tools: list[types.Tool], prompts: list[types.Prompt]) -> tuple[Any, ...]:
    return (
        tuple((t.name, t.description, repr(t.inputSchema)) for t in tools),
        tuple((p.name, p.description, repr(p.arguments)) for p in prompts),
    )


async def _first(*events: asyncio.Event) -> None:
    """Return when any of `events` is set."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


def _root_cause(exc: BaseException) -> str:
    while getattr(exc, "exceptions", None):  # ExceptionGroup
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    while exc.__cause__ is not None:
        exc = exc.__cause__
    if isinstance(exc, McpError):
        return exc.error.message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _unparsed_line(exc: Exception) -> str:
    """The stdout line behind a parse error from the stdio transport (pydantic keeps it as the input)."""
    errors = getattr(exc, "errors", None)
    try:
        value = errors()[0].get("input") if callable(errors) else None
    except Exception:
        value = None
    return _first_line(value if isinstance(value, str) else str(exc))


def _first_line(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _indent(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())
