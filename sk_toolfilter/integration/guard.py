"""The execution guard: a model's call to a function it was not offered, or may never use, is refused.

Semantic Kernel already refuses calls outside the request's ``included_functions``; this guard
does not rely on it. It is an auto-function-invocation filter that checks every call against the
agent's visibility rules and the functions offered in that very request, and answers the model
with an explanation instead of running the function.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from semantic_kernel import Kernel

    from sk_toolfilter.selection.manager import ToolFilterManager

logger = logging.getLogger(__name__)


def refusal_reason(manager: ToolFilterManager, full_name: str, settings: Any) -> str | None:
    """Why a call must be refused, or None when it may run."""
    if manager.is_hidden(full_name):
        return f"{full_name} is not available to this agent"
    behavior = getattr(settings, "function_choice_behavior", None)
    filters = getattr(behavior, "filters", None) or {}
    offered = filters.get("included_functions")
    if offered and full_name not in offered:
        return f"{full_name} was not offered in this request; use one of the tools you were given"
    return None


def attach_execution_guard(kernel: Kernel, manager: ToolFilterManager) -> None:
    """Register the guard on `kernel` (once per manager)."""
    from semantic_kernel.functions import FunctionResult

    async def guard_tool_call(context: Any, next: Callable[[Any], Awaitable[None]]) -> None:
        name = context.function.fully_qualified_name
        reason = refusal_reason(manager, name, context.execution_settings)
        if reason is None:
            await next(context)
            return
        logger.warning("sk-toolfilter: refused a call to %s: %s", name, reason)
        context.function_result = FunctionResult(function=context.function.metadata, value=f"error: {reason}.")

    guard_tool_call.__sk_toolfilter_guard__ = id(manager)  # type: ignore[attr-defined]
    existing = [f for _, f in kernel.auto_function_invocation_filters]
    if any(getattr(f, "__sk_toolfilter_guard__", None) == id(manager) for f in existing):
        return
    # The guard runs first, before usage counting, so a refused call is never counted.
    kernel.auto_function_invocation_filters.insert(0, (id(guard_tool_call), guard_tool_call))
