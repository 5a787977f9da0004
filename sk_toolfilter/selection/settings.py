"""Cloning execution settings so that a request carries only the selected functions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior

FilterKey = Literal["excluded_plugins", "included_plugins", "excluded_functions", "included_functions"]

if TYPE_CHECKING:
    from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings

SettingsT = TypeVar("SettingsT", bound="PromptExecutionSettings")


def allowed_by_behavior(behavior: FunctionChoiceBehavior | None, full_names: Iterable[str]) -> set[str] | None:
    """The names the caller's own behaviour filters allow, or None when it sets no filter.

    Same semantics as Semantic Kernel: included plugins/functions narrow, excluded ones remove.
    """
    filters = (behavior.filters if behavior is not None else None) or {}
    if not any(filters.get(key) for key in filters):
        return None
    included_plugins = set(filters.get("included_plugins") or [])
    excluded_plugins = set(filters.get("excluded_plugins") or [])
    included_functions = set(filters.get("included_functions") or [])
    excluded_functions = set(filters.get("excluded_functions") or [])
    allowed = set()
    for name in full_names:
        plugin = name.split("-", 1)[0] if "-" in name else ""
        if included_plugins and plugin not in included_plugins:
            continue
        if plugin in excluded_plugins or name in excluded_functions:
            continue
        if included_functions and name not in included_functions:
            continue
        allowed.add(name)
    return allowed


def clone_with_functions(base: SettingsT, names: list[str]) -> SettingsT:
    """A copy of `base` whose function choice behaviour offers exactly `names`; `base` is untouched.

    An empty selection sends no tools at all (SK reads ``included_functions: []`` as *every*
    function, so the clone drops the behaviour instead). The base behaviour's kind (auto, required)
    and auto-invoke settings are kept; every other setting (temperature, service_id, …) survives.
    """
    if not names:
        return base.model_copy(update={"function_choice_behavior": None})
    behavior = base.function_choice_behavior
    filters: dict[FilterKey, list[str]] = {"included_functions": list(names)}
    if behavior is None:
        new_behavior = FunctionChoiceBehavior.Auto(filters=filters)
    else:
        new_behavior = behavior.model_copy(deep=True, update={"filters": filters})
    return base.model_copy(update={"function_choice_behavior": new_behavior})


def tool_name(tool: Any) -> str | None:
    """The function name of one entry of ``settings.tools`` (OpenAI-style dicts), if it has one."""
    if isinstance(tool, dict):
        function = tool.get("function")
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            return function["name"]
        if isinstance(tool.get("name"), str):
            return tool["name"]
    return None


def tool_names(tools: Any) -> list[str]:
    """The function names of ``settings.tools`` entries that have one, in order (empty for None)."""
    return [name for name in (tool_name(t) for t in tools or []) if name]
