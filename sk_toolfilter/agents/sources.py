"""Loading an agent's tool sources into a Semantic Kernel: native plugins, MCP servers, catalogs."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import logging
import os
import re
import sys
import unicodedata
from functools import partial
from typing import Any

from semantic_kernel import Kernel
from semantic_kernel.connectors.mcp import MCPStdioPlugin
from semantic_kernel.functions import KernelFunctionFromMethod, KernelPlugin, kernel_function

from sk_toolfilter.agents.agent_file import AgentSpec, CatalogSource, MCPSource, PluginSource, ToolSource
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.errors import ConfigError, ToolFilterError

logger = logging.getLogger(__name__)

_MCP_SAFE = re.compile(r"[^A-Za-z0-9_-]")

DEFINITION_ONLY = (
    "error: {name} is a definition-only tool from a catalog; it cannot be executed here. "
    "Tell the user which tool you would call and with which arguments."
)


class SafeMCPStdioPlugin(MCPStdioPlugin):
    """``MCPStdioPlugin`` that survives tool names SK rejects.

    SK keeps "." in local names, and a single dotted tool name then makes ``add_plugin`` fail for
    the whole server; here every character outside ``[A-Za-z0-9_-]`` becomes "_", and pydantic's
    ``title`` keys (tokens the model gains nothing from) are dropped from parameter schemas.
    """

    def get_mcp_client(self) -> Any:
        """SK's stdio client, with the server's stderr going to ours when ours is a real file
        (under capture, e.g. in tests, it has no file descriptor: then to /dev/null)."""
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params: dict[str, Any] = {"command": self.command, "args": self.args, "env": self.env}
        if self.encoding:
            params["encoding"] = self.encoding
        params.update(self._client_kwargs or {})
        try:
            sys.stderr.fileno()
            errlog: Any = sys.stderr
        except (AttributeError, OSError, ValueError):
            errlog = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the server process
        return stdio_client(server=StdioServerParameters(**params), errlog=errlog)

    async def load_tools(self) -> None:
        from semantic_kernel.connectors.mcp import _get_parameter_dicts_from_mcp_tool

        if self.session is None:
            raise ToolFilterError(f"MCP server {self.name}: load_tools() before the session was opened")
        try:
            tool_list = await self.session.list_tools()
        except Exception as exc:
            logger.warning("sk-toolfilter: MCP server %s did not list its tools: %s", self.name, exc)
            return
        for tool in tool_list.tools:
            local_name = _MCP_SAFE.sub("_", tool.name)
            if self._is_mcp_local_name_taken("tool", tool.name, local_name):
                continue
            if self._has_mcp_function_name_conflict("tool", tool.name, local_name):
                continue
            self._mcp_registered_names[local_name] = ("tool", tool.name)
            func = kernel_function(name=local_name, description=tool.description)(partial(self.call_tool, tool.name))
            params = _get_parameter_dicts_from_mcp_tool(tool)
            for param in params:
                if isinstance(param.get("schema_data"), dict):
                    param["schema_data"] = {k: v for k, v in param["schema_data"].items() if k != "title"}
            func.__kernel_function_parameters__ = params
            setattr(self, local_name, func)


def _safe_parameter_name(name: str) -> str:
    """SK accepts parameter names of ``[0-9A-Za-z_-]`` only: fold accents, replace the rest by "_"."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return re.sub(r"[^0-9A-Za-z_-]", "_", folded) or "param"


def _import_object(path: str, where: str) -> Any:
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{where}: cannot import module {module_name!r} ({exc})") from None
    if not attribute:
        return module
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ConfigError(f"{where}: module {module_name!r} has no attribute {attribute!r}")
        target = getattr(target, part)
    return target


def add_native_plugin(kernel: Kernel, source: PluginSource, spec: AgentSpec, where: str) -> KernelPlugin:
    target = _import_object(source.import_path, f"{where}.import")
    if inspect.isclass(target):
        init = {
            k: str(spec.resolve(v)) if k in ("root", "path", "folder") and isinstance(v, str) else v
            for k, v in source.init.items()
        }
        try:
            target = target(**init)
        except TypeError as exc:
            raise ConfigError(f"{where}.init: cannot create {source.import_path}: {exc}") from None
    plugin = kernel.add_plugin(target, source.name, description=source.description or None)
    if not plugin.functions:
        raise ConfigError(f"{where}: {source.import_path} has no @kernel_function methods")
    return plugin


def catalog_plugins(source: CatalogSource, spec: AgentSpec) -> list[KernelPlugin]:
    """Definition-only kernel functions with the catalog's names, descriptions and JSON schemas.

    Records that name their own ``plugin`` go to that plugin; the others to the source's name.
    """
    records = load_catalog(spec.resolve(source.path), default_plugin=source.name)
    by_plugin: dict[str, list[KernelFunctionFromMethod]] = {}
    for tool, _schema in records:

        @kernel_function(name=tool.name, description=tool.description)
        def definition_only(_name: str = tool.full_name, **kwargs: Any) -> str:
            return DEFINITION_ONLY.format(name=_name)

        definition_only.__kernel_function_parameters__ = [
            {
                "name": _safe_parameter_name(p.name),
                "is_required": p.required,
                "type": p.schema.get("type", "string") if p.schema else "string",
                "description": p.description,
                "schema_data": p.schema,
            }
            for p in tool.parameters
        ]
        by_plugin.setdefault(tool.plugin, []).append(
            KernelFunctionFromMethod(method=definition_only, plugin_name=tool.plugin)
        )
    return [
        KernelPlugin(name=plugin, description=source.description or None, functions=functions)
        for plugin, functions in by_plugin.items()
    ]


async def add_sources(kernel: Kernel, spec: AgentSpec, stack: contextlib.AsyncExitStack) -> dict[str, int]:
    """Add every tool source of `spec` to `kernel`; MCP servers are closed when `stack` closes.

    Returns the number of functions per source. A source that fails is an error naming it, or is
    skipped with a warning when it says ``optional: true``.
    """
    counts: dict[str, int] = {}
    for position, source in enumerate(spec.tools):
        where = f"tools[{position}] ({source.name})"
        try:
            counts[source.name] = await _add_source(kernel, source, spec, stack, where)
        except ConfigError as exc:
            if not source.optional:
                raise
            logger.warning("sk-toolfilter: skipping optional tool source: %s", exc)
    return counts


async def _add_source(
    kernel: Kernel, source: ToolSource, spec: AgentSpec, stack: contextlib.AsyncExitStack, where: str
) -> int:
    if isinstance(source, PluginSource):
        return len(add_native_plugin(kernel, source, spec, where).functions)
    if isinstance(source, CatalogSource):
        plugins = catalog_plugins(source, spec)
        for plugin in plugins:
            kernel.add_plugin(plugin)
        return sum(len(p.functions) for p in plugins)
    assert isinstance(source, MCPSource)
    # "python" means this interpreter, so a Python MCP server runs with the packages installed here.
    command = sys.executable if source.command in ("python", "python3") else source.command
    mcp = SafeMCPStdioPlugin(
        name=source.name,
        description=source.description or None,
        command=command,
        args=source.args,
        env=source.env,
        load_prompts=source.load_prompts,
        cwd=str(spec.resolve(source.cwd or ".")),
    )
    failure: BaseException | None = None
    try:
        await asyncio.wait_for(mcp.connect(), timeout=source.startup_timeout_seconds)
    except asyncio.TimeoutError:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(mcp.close(), timeout=5)
        raise ConfigError(
            f"{where}: MCP server {source.command!r} did not answer within {source.startup_timeout_seconds:g}s "
            "(does it start? are its arguments right? paths are relative to the agent file's folder)"
        ) from None
    except Exception as exc:  # the MCP client raises ExceptionGroups
        failure = exc
    if failure is None and mcp.session is None:
        # SK reports a failed start only when the plugin is closed: collect the error now.
        try:
            await mcp.close()
        except Exception as exc:
            failure = exc
        failure = failure or RuntimeError("no session")
    if failure is not None:
        raise ConfigError(f"{where}: MCP server {source.command!r} failed to start: {_root_cause(failure)}") from None
    stack.push_async_callback(mcp.close)
    plugin = kernel.add_plugin(mcp, source.name, description=source.description or None)
    return len(plugin.functions)


def _root_cause(exc: BaseException) -> str:
    while getattr(exc, "exceptions", None):  # ExceptionGroup (no builtin name before Python 3.11)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    while exc.__cause__ is not None:
        exc = exc.__cause__
    return f"{type(exc).__name__}: {exc}"
