"""When a tool call must not run, and what the model and the log are told (every framework's guard).

A call is refused when the tool is hidden from this agent (excluded or disabled), or when it was
not among the tools sent with the request that called it. The framework's guard asks
:func:`refusal`, and on a refusal gives the model the answer and calls :func:`report_refusal`.
"""

from __future__ import annotations

import logging
from collections.abc import Container
from typing import TYPE_CHECKING

from sk_toolfilter.basics.redaction import library_logger

if TYPE_CHECKING:
    from sk_toolfilter.selection.manager import ToolFilterManager

logger = library_logger(__name__)


def not_available(full_name: str) -> str:
    """The answer to a call of a tool this agent may never use (excluded or disabled)."""
    return f"error: {full_name} is not available to this agent."


def not_offered(full_name: str) -> str:
    """The answer to a call of a visible tool that was not sent with the request that called it."""
    return (
        f"{full_name} was not among the tools loaded for this step, so it did not run. "
        "It is loaded now: call it again if you still need it."
    )


def refusal(manager: ToolFilterManager, full_name: str, offered: Container[str] | None) -> tuple[str, int] | None:
    """(answer to the model, log level) when a call must not run; None when it may. `offered`: the
    tools sent with the request that called it (None when unknown: only visibility is checked)."""
    if manager.is_hidden(full_name):
        return not_available(full_name), logging.WARNING
    if offered is not None and full_name not in offered:
        return not_offered(full_name), logging.INFO
    return None


def report_refusal(manager: ToolFilterManager, full_name: str, answer: str, level: int) -> None:
    """One log line and the ``unoffered_tool.calls`` metric for a call that did not run."""
    logger.log(level, "sk-toolfilter: did not run %s: %s", full_name, answer)
    manager.telemetry.unoffered_call("loaded" if level == logging.INFO else "refused")
