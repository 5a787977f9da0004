"""Provider tool search, framework-neutral: which tools go on the wire loaded, which deferred, and
which models the provider documents tool search for (``tool_filtering.provider_search``).

The ranking decides what is loaded up front; every other tool this agent may use goes deferred
(``defer_loading: true``) beside the provider's search tool, so a tool the ranking missed is one
server-side search away instead of lost: :func:`~sk_toolfilter.selection.offer.search_offer` makes the
:class:`~sk_toolfilter.selection.offer.Offer`, and :mod:`sk_toolfilter.provider_wire` applies it to the
request on the wire.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sk_toolfilter.basics.errors import ConfigError

if TYPE_CHECKING:
    from sk_toolfilter.config.provider_search import ProviderSearchConfig


class AgentTools(Protocol):
    """What the wire plan reads of the manager: the discovery tools and who may never be sent."""

    @property
    def discovery_names(self) -> list[str]: ...

    def is_hidden(self, full_name: str) -> bool: ...


SEARCH_TOOL_NAME = "tool_search"
"""The filter's search tool's name on the wire (Anthropic's custom tool; OpenAI names its own ``tool_search``)."""

OPENAI_SEARCH_TOOL: dict[str, str] = {"type": "tool_search"}
"""The Responses API's hosted tool search (never deferred itself)."""

OPENAI_MINIMUM = (5, 4)
"""OpenAI documents tool search for gpt-5.4 and later."""

_OPENAI_MODEL = re.compile(r"^(?:openai/)?gpt-(\d+)(?:\.(\d+))?(?:[-.].*)?$", re.IGNORECASE)

ANTHROPIC_SEARCH_TOOL: dict[str, str] = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
"""Anthropic's server-side tool search (BM25 variant; never deferred itself)."""

ANTHROPIC_MINIMUM = (4, 5)
"""Anthropic documents tool search for Claude 4.5 models and later."""

_CLAUDE_MODEL = re.compile(
    r"^(?:anthropic/)?claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?:-\d{8})?(?:-latest)?$", re.IGNORECASE
)


def openai_supports_tool_search(model: str | None) -> bool:
    """True for the OpenAI models documented with tool search (gpt-5.4, gpt-5.4-mini, gpt-5.5, gpt-6, …).
    An Azure deployment is checked by its name, so it must be named after its model."""
    found = _OPENAI_MODEL.match((model or "").strip())
    if found is None:
        return False
    return (int(found.group(1)), int(found.group(2) or 0)) >= OPENAI_MINIMUM


def anthropic_supports_tool_search(model: str | None) -> bool:
    """True for the Claude models documented with tool search (claude-sonnet-4-5, claude-opus-4-5-20251101,
    claude-haiku-4-5, claude-opus-4-6, …); Claude 3.x and 4.0 / 4.1 have none."""
    found = _CLAUDE_MODEL.match((model or "").strip())
    if found is None:
        return False
    return (int(found.group(1)), int(found.group(2) or 0)) >= ANTHROPIC_MINIMUM


_DOCUMENTED = {
    "openai": (openai_supports_tool_search, "gpt-5.4 and later on the Responses API; an Azure deployment must be "
               "named after its model"),
    "anthropic": (anthropic_supports_tool_search, "Claude 4.5 models and later (claude-sonnet-4-5, claude-opus-4-5, "
                  "claude-haiku-4-5, …)"),
}  # fmt: skip


def check_model(provider: str, model: str | None, *, assumed: bool = False) -> None:
    """A :class:`ConfigError` naming `model` unless `provider` documents tool search for it, or the user
    says the model behind that name supports it (`assumed`: ``provider_search.model_supports_tool_search``,
    a proxy's alias or an Azure deployment name)."""
    supports, which = _DOCUMENTED[provider]
    if not assumed and not supports(model):
        raise ConfigError(
            f"tool_filtering.provider_search: model {model!r} has no tool search ({provider} documents it for "
            f"{which}). Use such a model, turn provider search off (provider_search.enabled: false), or — a proxy "
            "or Azure deployment name for such a model — set provider_search.model_supports_tool_search: true "
            "(model_supports_tool_search=True on the client)"
        )


def with_deferred(tools: Sequence[Any], deferred: Collection[str], kind: str, search_tool: dict[str, Any]) -> list[Any]:
    """A request's tool entries with ``defer_loading: true`` on the entries of type `kind` (``function``
    for OpenAI, ``custom`` for Anthropic) named in `deferred`, then the provider's `search_tool` — only
    when something is deferred (a search tool with nothing to find is refused by the providers)."""
    marked = [
        {**t, "defer_loading": True}
        if isinstance(t, dict) and t.get("type") == kind and t.get("name") in deferred
        else t
        for t in tools
    ]
    if not any(isinstance(t, dict) and t.get("defer_loading") for t in marked):
        return marked
    return [*marked, dict(search_tool)]


def unit_for(provider: str, unit: str) -> str:
    """What `unit` means for `provider`: ``auto`` is ``plugin`` (namespaces) with OpenAI, ``tool`` with Claude."""
    if unit == "auto":
        return "plugin" if provider == "openai" else "tool"
    return unit


def check_mode(provider: str, unit: str) -> None:
    """A :class:`ConfigError` for a way of deferring `provider` does not have (namespaces are OpenAI's)."""
    if unit == "plugin" and provider == "anthropic":
        raise ConfigError(
            "tool_filtering.provider_search.unit: plugin defers each plugin as one OpenAI namespace; Claude has no "
            "namespaces: set unit: tool, or use an OpenAI Responses client"
        )


def check_tool_names(provider: str, search: str, names: Collection[str]) -> None:
    """A :class:`ConfigError` when one of the agent's tools is named like the search tool the filter adds
    (Claude's custom ``tool_search`` with ``search: filter``): the model's call to it would be taken as a
    search and the agent's tool would never run."""
    if provider == "anthropic" and search == "filter" and SEARCH_TOOL_NAME in names:
        raise ConfigError(
            f"tool_filtering.provider_search.search: filter adds Claude's custom search tool {SEARCH_TOOL_NAME!r}, "
            f"and one of the agent's tools has that name: rename the tool, or set search: provider"
        )


def refuse_in_semantic_kernel(config: ProviderSearchConfig) -> None:
    """A :class:`ConfigError` when provider search is on for a Semantic Kernel request path (its chat
    completion connector has no deferred tools: docs/integrations/semantic-kernel.md)."""
    if config.enabled:
        raise ConfigError(
            "tool_filtering.provider_search needs the OpenAI Responses API or Claude: Semantic Kernel's chat "
            "completion connector sends no deferred tools. Set provider_search.enabled: false, use SK's "
            "OpenAIResponsesAgent with sk_toolfilter.integration.responses_agent.invoke_with_provider_search, or "
            "Agent Framework (sk_toolfilter.agent_framework.ToolSearchOpenAIChatClient)"
        )
