"""Turning an agent file into a running agent whose every request is filtered: a Semantic Kernel
``ChatCompletionAgent`` (the default) or a Microsoft Agent Framework ``Agent``."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from typing_extensions import Self

from sk_toolfilter.agents.agent_file import AgentSpec, Framework, ModelSpec, VectorstoreSource, load_agent_file
from sk_toolfilter.agents.mcp.plugin import DESTRUCTIVE, PIN
from sk_toolfilter.agents.sources import add_sources
from sk_toolfilter.basics.errors import ConfigError, ToolFilterError, closest_names, install_line, naming
from sk_toolfilter.basics.progress import ProgressCallback
from sk_toolfilter.config import ToolFilterConfig, ToolOverride
from sk_toolfilter.integration.picker_chat import semantic_kernel_picker
from sk_toolfilter.integration.service import FilteredChatCompletion, wrap_chat_service
from sk_toolfilter.integration.setup import create_tool_filter
from sk_toolfilter.retrieval.embeddings import create_embedding_service
from sk_toolfilter.selection.manager import ToolFilterManager
from sk_toolfilter.selection.provider_search import check_mode, check_model, refuse_in_semantic_kernel

if TYPE_CHECKING:
    from semantic_kernel.agents import ChatCompletionAgent

    from sk_toolfilter.agent_framework.setup import AgentFrameworkFilter
    from sk_toolfilter.selection.pipeline import SecondStage


@dataclass
class Toolset:
    """An agent file's tools: the kernel holding them and the filter manager indexing them.

    Use as ``async with await open_toolset(spec) as tools: ...`` (or call :meth:`aclose`) so MCP
    servers are stopped.
    """

    spec: AgentSpec
    kernel: Kernel
    manager: ToolFilterManager
    tool_counts: dict[str, int]
    skipped_sources: dict[str, str] = field(default_factory=dict, kw_only=True)
    """Optional sources that failed to load: name → why."""
    _stack: contextlib.AsyncExitStack = field(repr=False, kw_only=True)

    async def aclose(self) -> None:
        await self._stack.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


@dataclass
class LoadedAgent(Toolset):
    """A :class:`Toolset` plus the filtered chat service and the SK ``ChatCompletionAgent``."""

    service: FilteredChatCompletion = field(kw_only=True)
    agent: ChatCompletionAgent = field(kw_only=True)


@dataclass
class LoadedAgentFrameworkAgent(Toolset):
    """A :class:`Toolset` plus an Agent Framework chat client, the filter's middleware and the ``Agent``.

    The agent's tools are the kernel's functions as Agent Framework tools (``Plugin-function``, the
    names SK sends), ranked by the same manager: an agent file behaves the same in both frameworks.
    """

    client: Any = field(kw_only=True)
    agent: Any = field(kw_only=True)
    tool_filter: AgentFrameworkFilter = field(kw_only=True)


def create_agent_framework_client(model: ModelSpec, http_client: Any = None) -> Any:
    """Agent Framework's OpenAI chat client for a ``model:`` block (chat completions, like the SK path)."""
    try:
        from agent_framework.openai import OpenAIChatCompletionClient
    except ImportError:
        raise ToolFilterError(
            f"Agent Framework's OpenAI client is not installed: {install_line('agent-framework')}"
        ) from None

    return OpenAIChatCompletionClient(model=model.name, async_client=openai_client(model, http_client))


def openai_client(model: ModelSpec, http_client: Any = None) -> Any:
    """The ``openai`` client a ``model:`` block describes (keys from the block or the environment)."""
    from openai import AsyncAzureOpenAI, AsyncOpenAI

    api_key = model.api_key.get_secret_value() if model.api_key else None
    if model.provider == "azure_openai":
        endpoint = server_url(model)
        api_key = api_key or os.environ.get("AZURE_OPENAI_API_KEY")
        if endpoint:
            check_url(endpoint, "model.endpoint" if model.endpoint else "AZURE_OPENAI_ENDPOINT")
        if not endpoint or not api_key:
            raise ConfigError(
                model.unset_variable("endpoint" if not endpoint else "api_key")
                or "model: provider 'azure_openai' needs 'endpoint' and 'api_key' (or AZURE_OPENAI_* variables)"
            )
        return AsyncAzureOpenAI(
            azure_endpoint=endpoint,
            api_key=api_key,
            api_version=model.api_version or "2024-10-21",
            http_client=http_client,
        )
    api_key = api_key or os.environ.get("OPENAI_API_KEY")
    base_url = server_url(model)
    if base_url is not None:
        check_url(base_url, "model.base_url" if model.base_url else "OPENAI_BASE_URL")
    if not api_key and not base_url:
        raise ConfigError(
            model.unset_variable("api_key")
            or "model: no API key — set OPENAI_API_KEY, or model.api_key, or model.base_url for a local "
            "OpenAI-compatible server"
        )
    return AsyncOpenAI(api_key=api_key or "not-needed", base_url=base_url, http_client=http_client)


def server_url(model: ModelSpec) -> str | None:
    """The server a ``model:`` block's client talks to: ``base_url`` (else ``OPENAI_BASE_URL``), or for
    Azure ``endpoint`` (else ``AZURE_OPENAI_ENDPOINT``); None for OpenAI's own API."""
    if model.provider == "azure_openai":
        return model.endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT") or None
    return model.base_url or os.environ.get("OPENAI_BASE_URL") or None


def check_url(url: str, where: str) -> None:
    """A ConfigError naming `where` unless `url` is an http(s) URL with a host."""
    from urllib.parse import urlparse

    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(f"{where}: {url!r} is not an http(s) URL (e.g. http://localhost:11434/v1)")


def create_chat_service(model: ModelSpec, http_client: Any = None) -> ChatCompletionClientBase:
    """The chat service a ``model:`` block describes (``http_client`` lets tests and reports go offline)."""
    from semantic_kernel.connectors.ai.open_ai import AzureChatCompletion, OpenAIChatCompletion

    client = openai_client(model, http_client)
    if model.provider == "azure_openai":
        return AzureChatCompletion(deployment_name=model.name, async_client=client)
    return OpenAIChatCompletion(ai_model_id=model.name, async_client=client)


def _only_named(spec: AgentSpec, given: list[str]) -> ToolFilterConfig:
    """The filter config, with the caller's functions that ``spec.functions`` does not name hidden."""
    if not spec.functions:
        return spec.tool_filtering
    for name in spec.functions:
        if name not in given:
            close = ", ".join(n.replace("-", ".", 1) for n in closest_names(name, given)) or "none"
            raise ConfigError(
                f"tools: function {name.replace('-', '.', 1)!r} is not in the kernel given to load_agent "
                f"(pass kernel=... with its plugin); closest: {close}"
            )
    hidden = [name for name in given if name not in spec.functions]
    return spec.tool_filtering.updated(exclude=[*spec.tool_filtering.exclude, *hidden])


def _with_source_rules(spec: AgentSpec, kernel: Kernel, config: ToolFilterConfig) -> ToolFilterConfig:
    """The filter config with each tool source's ``allowed_tools`` (as ``allow``), and the tools of
    ``always_include`` sources and those MCP annotations pin (as ``tools_overrides`` with
    ``always_include``; the file's own overrides win)."""
    allow = dict(config.allow)
    for source in spec.tools:
        allowed = getattr(source, "allowed_tools", None)
        if allowed is not None:
            allow[source.name] = list(allowed)
    whole = {source.name for source in spec.tools if getattr(source, "always_include", False)}
    overrides: dict[str, ToolOverride] = {}
    for name, plugin in kernel.plugins.items():
        for f in plugin:
            properties = f.metadata.additional_properties or {}
            destructive = properties.get(DESTRUCTIVE)  # the server's destructiveHint, when it gave one
            if name in whole:
                by = f"tool source {name!r} (always_include: true)"
            elif properties.get(PIN):
                by = f"MCP server {name!r} (a load hint in the tool's _meta)"
            elif isinstance(destructive, bool):
                overrides[f.fully_qualified_name] = ToolOverride(destructive=destructive)
                continue
            else:
                continue
            overrides[f.fully_qualified_name] = ToolOverride(
                always_include=True, pinned_by=by, destructive=destructive if isinstance(destructive, bool) else None
            )
    overrides.update(config.tools_overrides)
    if allow == config.allow and overrides == config.tools_overrides:
        return config
    return config.updated(allow=allow, tools_overrides=overrides)


def _with_catalog_name(spec: AgentSpec, config: ToolFilterConfig) -> ToolFilterConfig:
    """The agent's name names its catalog in a shared store unless ``index.catalog`` does. Learning from
    use keeps the identity code gives the same tools (``learning.catalog``, else ``index.catalog`` as
    set, else ``default``): an app and an agent file over the same tools share what they learn."""
    if "catalog" in config.index.model_fields_set:
        return config
    learning = config.learning
    if learning.catalog is None:
        learning = learning.model_copy(update={"catalog": config.index.catalog})
    return config.updated(index=config.index.model_copy(update={"catalog": spec.name}), learning=learning)


def _tool_picker(spec: AgentSpec, kernel: Kernel, chat_service: Any) -> SecondStage | None:
    """The picker ``rerank: {type: llm}`` asks for (None for other second stages)."""
    rerank = spec.tool_filtering.rerank
    if rerank.type != "llm":
        return None
    if chat_service is not None and not isinstance(chat_service, ChatCompletionClientBase):
        from sk_toolfilter.agent_framework.picker_chat import agent_framework_picker

        return agent_framework_picker(rerank, chat_service)
    if chat_service is None and rerank.service_id is None:
        try:
            chat_service = create_chat_service(spec.model)
        except ConfigError as exc:
            raise ConfigError(f"tool_filtering.rerank: type llm picks with the agent's model, and {exc}") from None
    return semantic_kernel_picker(rerank, kernel, chat_service)


def execution_settings(spec: AgentSpec, service: ChatCompletionClientBase) -> Any:
    """The agent's own execution settings: ``model.options`` plus automatic function calling."""
    settings_class = service.get_prompt_execution_settings_class()
    try:
        return settings_class(**spec.model.options, function_choice_behavior=FunctionChoiceBehavior.Auto())
    except Exception as exc:
        raise ConfigError(f"model.options: {exc}") from None


async def open_toolset(
    path: str | Path | AgentSpec,
    *,
    kernel: Kernel | None = None,
    progress: ProgressCallback | None = None,
    embed: bool = True,
    wait: bool = True,
    chat_service: Any = None,
) -> Toolset:
    """Load an agent file's tool sources into a kernel and index them (no chat model needed).
    ``embed=False``: nothing is embedded (tools without a cached or stored vector rank with BM25).
    ``wait`` (default): return once every tool has its vector, also for a catalog larger than
    ``embedding.background_above`` (whose vectors build in the background, reported through
    `progress`, and fill the embedding cache: the next run starts warm). ``wait=False`` returns at
    once: such a catalog ranks with BM25 until its vectors are ready (a server's instant start).

    With `kernel`, its plugins (the ones an SK declarative spec's ``type: function`` tools name) are
    the agent's too; when the file names ``functions``, the kernel's other functions are hidden.

    ``rerank: {type: llm}`` picks with `chat_service` (an SK chat service or an Agent Framework chat
    client), else the kernel's service ``rerank.service_id`` names, else the ``model:`` block's model.
    """
    spec = path if isinstance(path, AgentSpec) else load_agent_file(path)
    stack = contextlib.AsyncExitStack()
    try:
        kernel = kernel if kernel is not None else Kernel()
        given = [f.fully_qualified_name for plugin in kernel.plugins.values() for f in plugin]
        # One embedding service for the filter and the vectorstore tools (the local model loads once).
        config = spec.tool_filtering
        needs_service = config.search_method != "bm25" or any(isinstance(s, VectorstoreSource) for s in spec.tools)
        service = create_embedding_service(config.embedding) if needs_service else None
        skipped: dict[str, str] = {}
        counts = await add_sources(kernel, spec, stack, skipped, service)
        manager = await create_tool_filter(
            kernel,
            _with_source_rules(spec, kernel, _with_catalog_name(spec, _only_named(spec, given))),
            embedding_service=service if config.search_method != "bm25" else None,
            progress=progress,
            embed=embed,
            second_stage=_tool_picker(spec, kernel, chat_service),
        )
        stack.push_async_callback(manager.aclose)
        if wait and embed:
            await manager.vectors_ready()
    except ToolFilterError as exc:
        await stack.aclose()
        raise naming(exc, spec.source) from exc.__cause__  # every error names the agent file
    except BaseException:
        await stack.aclose()
        raise
    return Toolset(spec, kernel, manager, counts, skipped_sources=skipped, _stack=stack)


@overload
async def load_agent(
    path: str | Path | AgentSpec,
    *,
    chat_service: Any = None,
    kernel: Kernel | None = None,
    progress: ProgressCallback | None = None,
    framework: Literal["semantic-kernel"],
) -> LoadedAgent: ...


@overload
async def load_agent(
    path: str | Path | AgentSpec,
    *,
    chat_service: Any = None,
    kernel: Kernel | None = None,
    progress: ProgressCallback | None = None,
    framework: Literal["agent-framework"],
) -> LoadedAgentFrameworkAgent: ...


@overload
async def load_agent(
    path: str | Path | AgentSpec,
    *,
    chat_service: Any = None,
    kernel: Kernel | None = None,
    progress: ProgressCallback | None = None,
    framework: None = None,
) -> LoadedAgent | LoadedAgentFrameworkAgent: ...


async def load_agent(
    path: str | Path | AgentSpec,
    *,
    chat_service: Any = None,
    kernel: Kernel | None = None,
    progress: ProgressCallback | None = None,
    framework: Framework | None = None,
) -> LoadedAgent | LoadedAgentFrameworkAgent:
    """Load an agent file — this library's format, HoloDeck's, or an SK declarative spec — and return
    a ready agent: a :class:`LoadedAgent` (``.agent`` is the SK agent) or, with
    ``framework="agent-framework"`` (or ``framework: agent-framework`` in the file), a
    :class:`LoadedAgentFrameworkAgent` (``.agent`` is an Agent Framework ``Agent``).

    `chat_service` replaces the one the ``model:`` block describes (e.g. on a test transport): an SK
    chat service, or an Agent Framework chat client. `kernel` brings plugins given in code (an SK
    spec's ``type: function`` tools name them). Filtering applies to the agent's first request, every
    request of the function-calling loop and streaming, and never changes the agent's settings.
    """
    spec = path if isinstance(path, AgentSpec) else load_agent_file(path)
    chosen = framework or spec.framework
    try:
        check_at_start(spec, chosen, chat_service)
    except ToolFilterError as exc:
        raise naming(exc, spec.source) from exc.__cause__
    rerank = spec.tool_filtering.rerank
    if chat_service is None and rerank.type == "llm" and rerank.service_id is None:
        # The picker and the agent share the agent's model (one client).
        agent_framework = chosen == "agent-framework"
        chat_service = create_agent_framework_client(spec.model) if agent_framework else create_chat_service(spec.model)
    tools = await open_toolset(spec, kernel=kernel, progress=progress, chat_service=chat_service)
    try:
        if chosen == "agent-framework":
            return _agent_framework_agent(tools, chat_service)
        return _semantic_kernel_agent(tools, chat_service)
    except ToolFilterError as exc:
        await tools.aclose()
        raise naming(exc, tools.spec.source) from exc.__cause__
    except BaseException:
        await tools.aclose()
        raise


def check_at_start(spec: AgentSpec, framework: Framework | None = None, chat_service: Any = None) -> None:
    """What :func:`load_agent` checks before anything starts, none of it needing a credential or a network
    (``sk-toolfilter validate`` runs the same): provider search for the framework, the provider and the
    model (``tool_filtering.provider_search``), the framework's extra, and ``model.options`` for SK's
    execution settings. A :class:`ConfigError` (or :class:`ToolFilterError` naming the extra) otherwise."""
    chosen = framework or spec.framework
    search = spec.tool_filtering.provider_search
    if chosen == "agent-framework":
        from sk_toolfilter.agent_framework.setup import kernel_filter  # noqa: F401  (names the extra when missing)
    elif search.enabled:
        refuse_in_semantic_kernel(search)
    if search.enabled and chat_service is None:  # the model block's client: OpenAI Responses
        if search.provider == "anthropic":
            raise ConfigError(
                "tool_filtering.provider_search.provider is 'anthropic', but the model block's client is OpenAI's: "
                "pass a ToolSearchAnthropicClient as load_agent's chat_service, or set provider: openai (or auto)"
            )
        check_model("openai", spec.model.name, assumed=search.model_supports_tool_search)
    if search.enabled:
        check_mode(search.provider, search.unit)
    if chosen == "semantic-kernel" and chat_service is None:
        from semantic_kernel.connectors.ai.open_ai import (
            AzureChatPromptExecutionSettings,
            OpenAIChatPromptExecutionSettings,
        )

        azure = spec.model.provider == "azure_openai"
        settings_class = AzureChatPromptExecutionSettings if azure else OpenAIChatPromptExecutionSettings
        try:
            settings_class(**spec.model.options)
        except Exception as exc:
            raise ConfigError(f"model.options: {exc}") from None


def _semantic_kernel_agent(tools: Toolset, chat_service: ChatCompletionClientBase | None) -> LoadedAgent:
    from semantic_kernel.agents import ChatCompletionAgent
    from semantic_kernel.functions import KernelArguments

    spec = tools.spec
    service = wrap_chat_service(chat_service or create_chat_service(spec.model), tools.manager)
    agent = ChatCompletionAgent(
        kernel=tools.kernel,
        service=service,
        name=spec.name,
        description=spec.description or None,
        instructions=spec.instructions_text(),
        arguments=KernelArguments(settings=execution_settings(spec, service)),
    )
    return LoadedAgent(
        spec,
        tools.kernel,
        tools.manager,
        tools.tool_counts,
        skipped_sources=tools.skipped_sources,
        _stack=tools._stack,
        service=service,
        agent=agent,
    )


def _agent_framework_agent(tools: Toolset, chat_client: Any) -> LoadedAgentFrameworkAgent:
    from sk_toolfilter.agent_framework.setup import kernel_filter  # first: names the extra when missing

    from agent_framework import Agent  # isort: skip

    spec = tools.spec
    search = tools.manager.config.provider_search
    if search.enabled:  # at load, not at the first request
        from sk_toolfilter.agent_framework.provider_search import ToolSearchOpenAIChatClient, check_client

        if chat_client is None:  # the model block's OpenAI endpoint, on the Responses API
            chat_client = ToolSearchOpenAIChatClient(
                model=spec.model.name,
                async_client=openai_client(spec.model),
                model_supports_tool_search=search.model_supports_tool_search,
            )
        check_client(chat_client, provider=search.provider, unit=search.unit, assumed=search.model_supports_tool_search)
    client = chat_client or create_agent_framework_client(spec.model)
    tool_filter = kernel_filter(tools.manager, tools.kernel)
    agent = Agent(
        client=client,
        instructions=spec.instructions_text() or None,
        name=spec.name,
        description=spec.description or None,
        tools=tool_filter.tools,
        default_options=dict(spec.model.options) or None,
        middleware=tool_filter.middleware,
    )
    return LoadedAgentFrameworkAgent(
        spec,
        tools.kernel,
        tools.manager,
        tools.tool_counts,
        skipped_sources=tools.skipped_sources,
        _stack=tools._stack,
        client=client,
        agent=agent,
        tool_filter=tool_filter,
    )
