"""The execution guard: what happens when the model calls a function it was not offered.

An auto-function-invocation filter that sees every call the model makes, before it runs:
- a function this agent may never use (excluded or disabled) is refused, with a warning;
- a visible function that was not among the tools sent with that very request (the model
  remembered it from earlier, or guessed it) does not run either: the model gets one clear result
  saying so and that the tool is loaded now, and the log gets one INFO line. The call stays in the
  conversation, so the agent-loop policy offers that tool on the next request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sk_toolfilter.selection.active import active_manager
from sk_toolfilter.selection.refusals import refusal as refused, report_refusal
from sk_toolfilter.selection.settings import tool_names

if TYPE_CHECKING:
    from semantic_kernel import Kernel

    from sk_toolfilter.selection.manager import ToolFilterManager


def offered_in(settings: Any) -> set[str] | None:
    """The functions sent with the request these settings made (None when unknown: nothing is checked)."""
    tools = getattr(settings, "tools", None)
    if tools:
        return set(tool_names(tools))
    behavior = getattr(settings, "function_choice_behavior", None)
    filters = getattr(behavior, "filters", None) or {}
    included = filters.get("included_functions")
    return set(included) if included else None


def refusal(manager: ToolFilterManager, full_name: str, settings: Any) -> tuple[str, int] | None:
    """(answer to the model, log level) when a call made with `settings` must not run; None when it may."""
    return refused(manager, full_name, offered_in(settings))


def refusal_reason(manager: ToolFilterManager, full_name: str, settings: Any) -> str | None:
    """0.1's name: why a call made with `settings` must not run, or None (:func:`refusal` gives the log
    level too). Goes away in 0.4."""
    outcome = refusal(manager, full_name, settings)
    return None if outcome is None else outcome[0]


def attach_execution_guard(kernel: Kernel, manager: ToolFilterManager) -> None:
    """Register the guard on `kernel` (once per manager)."""
    from semantic_kernel.functions import FunctionResult

    async def guard_tool_call(context: Any, next: Callable[[Any], Awaitable[None]]) -> None:
        active = active_manager()
        if active is not None and active is not manager:  # another agent's request on a shared kernel
            await next(context)
            return
        name = context.function.fully_qualified_name
        outcome = refusal(manager, name, context.execution_settings)
        if outcome is None:
            await next(context)
            return
        answer, level = outcome
        report_refusal(manager, name, answer, level)
        context.function_result = FunctionResult(function=context.function.metadata, value=answer)

    guard_tool_call.__sk_toolfilter_guard__ = id(manager)  # type: ignore[attr-defined]
    existing = [f for _, f in kernel.auto_function_invocation_filters]
    if any(getattr(f, "__sk_toolfilter_guard__", None) == id(manager) for f in existing):
        return
    # The guard runs first, before usage counting, so a call that does not run is never counted.
    kernel.auto_function_invocation_filters.insert(0, (id(guard_tool_call), guard_tool_call))
