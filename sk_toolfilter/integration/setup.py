"""Composition: a kernel, its manager, the discovery plugin, the execution guard and the wrapper.

The layers below each do one thing — the manager selects, the discovery plugin searches, the guard
refuses, the wrapper narrows each request. This module is the one place that wires them onto a
kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.config import ToolFilterConfig
from sk_toolfilter.integration.guard import attach_execution_guard
from sk_toolfilter.integration.picker_chat import semantic_kernel_picker
from sk_toolfilter.integration.service import FilteredChatCompletion, wrap_chat_service
from sk_toolfilter.selection.discovery import DiscoveryPlugin, discovery_pins
from sk_toolfilter.selection.manager import ToolFilterManager

if TYPE_CHECKING:
    from semantic_kernel import Kernel
    from semantic_kernel.connectors.ai.embedding_generator_base import EmbeddingGeneratorBase
    from semantic_kernel.functions import KernelPlugin

    from sk_toolfilter.basics.progress import ProgressCallback
    from sk_toolfilter.selection.pipeline import SecondStage


async def create_tool_filter(
    kernel: Kernel,
    config: ToolFilterConfig | None = None,
    *,
    embedding_service: EmbeddingGeneratorBase | None = None,
    progress: ProgressCallback | None = None,
    embed: bool = True,
    second_stage: SecondStage | None = None,
) -> ToolFilterManager:
    """Index `kernel` and make it ready for filtered requests; returns the manager.
    ``embed=False`` embeds nothing: tools without a cached or stored vector are ranked with BM25
    (what a read-only look at a catalog needs, e.g. ``sk-toolfilter index status``).

    Adds the discovery plugin (``config.discovery``) before indexing, so it is pinned on every
    request; registers the execution guard and usage counting on `kernel`. Wrap chat services with
    :func:`wrap_chat_service` or :func:`enable_tool_filtering`.

    ``rerank: {type: llm}``: `second_stage` picks (e.g. an :class:`~sk_toolfilter.LLMToolPicker`), else
    the kernel's chat service ``rerank.service_id`` names (else its default chat service); a kernel
    with none is a :class:`ConfigError` naming the key.
    """
    config = config or ToolFilterConfig()
    plugin = _add_discovery_plugin(kernel, config)
    manager = await ToolFilterManager.from_kernel(
        kernel, config, embedding_service=embedding_service, progress=progress, embed=embed
    )
    if plugin is not None:
        plugin.bind(manager)
    if config.rerank.type == "llm":
        try:
            manager.set_second_stage(second_stage or semantic_kernel_picker(config.rerank, kernel))
        except BaseException:
            await manager.aclose()
            raise
    elif second_stage is not None:
        manager.set_second_stage(second_stage)
    attach_to_kernel(kernel, manager)
    return manager


def attach_to_kernel(kernel: Kernel, manager: ToolFilterManager) -> None:
    """Register `manager`'s discovery plugin (when enabled and missing), the tools found with it,
    the execution guard and usage counting on `kernel`. Idempotent."""
    plugin = _add_discovery_plugin(kernel, manager.config)
    if plugin is not None:
        plugin.bind(manager)  # the manager indexes it on its next selection (it follows the kernel)
    manager.set_conversation_pins("discovery", discovery_pins(manager))
    manager.usage.attach(kernel)
    attach_execution_guard(kernel, manager)


def enable_tool_filtering(kernel: Kernel, manager: ToolFilterManager) -> list[str]:
    """Drop-in: replace every chat service registered on `kernel` by its filtered wrapper.

    Existing invoke code (``kernel.invoke_prompt``, agents, direct service calls through the kernel)
    is unchanged; discovery, the execution guard and usage counting are registered on `kernel` too
    (see :func:`attach_to_kernel`). Returns the wrapped service ids. A kernel with no chat service
    is a :class:`ConfigError` (the filter would otherwise never run).
    """
    chat_services = [(i, s) for i, s in kernel.services.items() if isinstance(s, ChatCompletionClientBase)]
    if not chat_services:
        # Nothing to wrap would mean every tool goes on the wire with no word: say so instead.
        raise ConfigError(
            "enable_tool_filtering: the kernel has no chat completion service yet, so no request would be "
            "filtered; call kernel.add_service(...) first, or wrap a service yourself with "
            "wrap_chat_service(service, manager)"
        )
    wrapped = []
    for service_id, service in chat_services:
        if not isinstance(service, FilteredChatCompletion):
            kernel.services[service_id] = wrap_chat_service(service, manager)
            wrapped.append(service_id)
    attach_to_kernel(kernel, manager)
    return wrapped


def _add_discovery_plugin(kernel: Kernel, config: ToolFilterConfig) -> DiscoveryPlugin | None:
    """The kernel's discovery plugin (added when missing; every manager on the kernel binds to it),
    or None when discovery is disabled."""
    if not (config.enabled and config.discovery.enabled):
        return None
    existing = kernel.plugins.get(config.discovery.plugin_name)
    if existing is not None:
        instance = _discovery_instance(existing)
        if instance is None:
            raise ConfigError(
                f"tool_filtering.discovery.plugin_name: {config.discovery.plugin_name!r} is already the name of "
                "a plugin of the kernel (one of the agent's tools); choose another name"
            )
        return instance
    plugin = DiscoveryPlugin()
    kernel.add_plugin(plugin, config.discovery.plugin_name)
    return plugin


def _discovery_instance(plugin: KernelPlugin) -> DiscoveryPlugin | None:
    for function in plugin:
        owner = getattr(getattr(function, "method", None), "__self__", None)
        if isinstance(owner, DiscoveryPlugin):
            return owner
    return None
