"""Loading an agent's tool sources into a Semantic Kernel: native plugins, MCP servers, catalogs."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.embedding_generator_base import EmbeddingGeneratorBase
from semantic_kernel.functions import KernelPlugin, kernel_function

from sk_toolfilter.agents.agent_file import (
    AgentSpec,
    CatalogSource,
    MCPSource,
    PluginSource,
    ToolSource,
    VectorstoreSource,
)
from sk_toolfilter.agents.catalog import load_catalog
from sk_toolfilter.agents.json_schema import tool_parameters
from sk_toolfilter.agents.mcp import MCPConnection, build_plugin, keep_kernel_in_step
from sk_toolfilter.agents.tool_names import function_name, warn_renamed
from sk_toolfilter.agents.vectorstore import PLUGIN as VECTORSTORE_PLUGIN, add_vectorstore
from sk_toolfilter.basics.errors import ConfigError, ToolFilterError, ToolSourceError, closest_names
from sk_toolfilter.basics.redaction import library_logger

logger = library_logger(__name__)

VECTORSTORE_OWNER = "the vectorstore tools"

DEFINITION_ONLY = (
    "error: {name} is a definition-only tool from a catalog; it cannot be executed here. "
    "Tell the user which tool you would call and with which arguments."
)


def _import_object(path: str, where: str, base_dir: Path) -> Any:
    """``module:attribute``; a module next to the agent file imports without ``PYTHONPATH``."""
    module_name, _, attribute = path.partition(":")
    try:
        module = _import_module(module_name, base_dir)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing and module_name != missing and not module_name.startswith(f"{missing}."):
            raise ConfigError(
                f"{where}: module {module_name!r} was found, but importing it failed: it imports {missing!r}, "
                "which is not installed in this environment"
            ) from None
        raise ConfigError(
            f"{where}: cannot import module {module_name!r}: no module of that name ({exc}); check the name, or "
            "put the module beside the agent file"
        ) from None
    except SyntaxError as exc:
        raise ConfigError(f"{where}: module {module_name!r} has a syntax error ({exc.filename}:{exc.lineno})") from None
    except Exception as exc:  # the module's own code failed while it was imported
        raise ConfigError(
            f"{where}: module {module_name!r} was found, but importing it failed ({type(exc).__name__}: {exc})"
        ) from None
    if not attribute:
        return module
    target: Any = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            public = [name for name in dir(target) if not name.startswith("_")]
            close = closest_names(part, public, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{where}: module {module_name!r} has no attribute {attribute!r}{hint}")
        target = getattr(target, part)
    return target


def _import_module(module_name: str, base_dir: Path) -> Any:
    """Import `module_name`; when it is not importable but lives in `base_dir` (the agent file's
    folder), that folder joins ``sys.path`` (as a script's folder does for ``python script.py``)."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.split(".")[0]
        folder = str(base_dir.resolve())
        local = (base_dir / f"{top}.py").is_file() or (base_dir / top).is_dir()
        if exc.name != top or not local or folder in sys.path:
            raise
        sys.path.insert(0, folder)
        logger.info("sk-toolfilter: importing %s from the agent file's folder %s", module_name, folder)
        return importlib.import_module(module_name)


def add_native_plugin(kernel: Kernel, source: PluginSource, spec: AgentSpec, where: str) -> KernelPlugin:
    target = _import_object(source.import_path, f"{where}.import", spec.base_dir)
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
    by_plugin: dict[str, list[Any]] = {}
    taken: dict[str, set[str]] = {}
    renamed: list[tuple[str, str]] = []
    for tool, schema in records:
        name = function_name(tool.plugin, tool.name, taken.setdefault(tool.plugin, set()), renamed)

        def definition_only(_name: str = f"{tool.plugin}-{name}", **kwargs: Any) -> str:
            return DEFINITION_ONLY.format(name=_name)

        # The annotations as objects: the decorator's signature would otherwise evaluate their text
        # (this module postpones annotations) for every function of the catalog.
        definition_only.__annotations__ = {"_name": str, "kwargs": Any, "return": str}
        method = kernel_function(name=name, description=tool.description)(definition_only)
        method.__kernel_function_parameters__ = tool_parameters(schema, f"{tool.plugin}-{name}").dicts
        by_plugin.setdefault(tool.plugin, []).append(method)
    warn_renamed(f"catalog {source.path}", renamed)
    # The plugin makes each function from its method (a function made here would be deep-copied).
    return [
        KernelPlugin(name=plugin, description=source.description or None, functions=methods)
        for plugin, methods in by_plugin.items()
    ]


async def add_sources(
    kernel: Kernel,
    spec: AgentSpec,
    stack: contextlib.AsyncExitStack,
    skipped: dict[str, str] | None = None,
    embedding_service: EmbeddingGeneratorBase | None = None,
) -> dict[str, int]:
    """Add every tool source of `spec` to `kernel`; MCP servers are closed when `stack` closes.

    `embedding_service` embeds the passages of ``vectorstore`` tools (default: one created from
    ``tool_filtering.embedding``).

    Returns the number of functions per source. A source that fails is an error naming it — a
    :class:`ConfigError` for what the file says, a :class:`ToolSourceError` for what happened at run
    time — or, when it says ``optional: true``, whatever the failure, is skipped with one warning and
    its error recorded in `skipped` (source name → message).
    """
    counts: dict[str, int] = {}
    skipped = {} if skipped is None else skipped
    owners = {name: "a plugin already on the kernel" for name in kernel.plugins}
    for position, source in enumerate(spec.tools):
        where = f"tools[{position}] ({source.name})"
        try:
            counts[source.name] = await _add_source(kernel, source, spec, stack, where, owners, embedding_service)
        except Exception as exc:
            error = (
                exc if isinstance(exc, ToolFilterError) else ToolSourceError(f"{where}: {type(exc).__name__}: {exc}")
            )
            if not source.optional:
                raise error from None
            skipped[source.name] = str(error)
            logger.warning("sk-toolfilter: skipping optional tool source: %s", error)
    return counts


async def _add_source(
    kernel: Kernel,
    source: ToolSource,
    spec: AgentSpec,
    stack: contextlib.AsyncExitStack,
    where: str,
    owners: dict[str, str],
    embedding_service: EmbeddingGeneratorBase | None = None,
) -> int:
    if isinstance(source, PluginSource):
        _claim(source.name, where, owners)
        return len(add_native_plugin(kernel, source, spec, where).functions)
    if isinstance(source, CatalogSource):
        try:
            plugins = catalog_plugins(source, spec)
        except ConfigError as exc:
            raise ConfigError(f"{where}.path: {exc}") from None
        for plugin in plugins:
            _claim(plugin.name, where, owners)
        for plugin in plugins:
            kernel.add_plugin(plugin)
        return sum(len(p.functions) for p in plugins)
    if isinstance(source, VectorstoreSource):
        _claim(VECTORSTORE_PLUGIN, where, owners, owner=VECTORSTORE_OWNER)
        return await add_vectorstore(kernel, source, spec, where, embedding_service)
    assert isinstance(source, MCPSource)
    _claim(source.name, where, owners)
    connection = MCPConnection(
        source, cwd=spec.resolve(source.cwd or "."), where=where, on_change=keep_kernel_in_step(kernel)
    )
    await connection.start()
    stack.push_async_callback(connection.aclose)
    plugin = build_plugin(connection)
    kernel.add_plugin(plugin)
    return len(plugin.functions)


def _claim(plugin_name: str, where: str, owners: dict[str, str], owner: str | None = None) -> None:
    """Reserve a plugin name for `owner` (default: the source at `where`); a name someone else holds
    is an error (Semantic Kernel would silently replace that plugin). The vectorstore tools share
    one plugin: they claim it under one owner."""
    owner = owner or where
    if owners.setdefault(plugin_name, owner) != owner:
        raise ConfigError(f"{where}: plugin name {plugin_name!r} is already used by {owners[plugin_name]}")
