"""Replaying recorded conversations step by step through the real filtering wrapper.

A *step* is one model request inside a conversation: the OpenAI chat messages before it and the
tool(s) the model calls next (``gold``). Steps of one conversation are replayed in order on one
growing ``ChatHistory``, as a live agent would build it, through :class:`FilteredChatCompletion`
around a real ``OpenAIChatCompletion`` whose HTTP goes to a recording transport. A step passes when
every gold tool is in the ``tools`` of the recorded request; a turn is complete when all its steps
pass. The format is that of ``bfcl_multiturn/dev.jsonl``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
from semantic_kernel.contents import (
    AuthorRole,
    ChatHistory,
    ChatMessageContent,
    FunctionCallContent,
    FunctionResultContent,
)

from sk_toolfilter.agents.agent_file import Framework
from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.basics.input_files import json_lines, json_object
from sk_toolfilter.basics.tokenizer import count_json_tokens
from sk_toolfilter.integration.service import wrap_chat_service
from sk_toolfilter.measure.caching import billed_tool_tokens
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service
from sk_toolfilter.selection.learning import learning_context

if TYPE_CHECKING:
    from semantic_kernel import Kernel

    from sk_toolfilter.basics.progress import ProgressCallback
    from sk_toolfilter.selection.manager import ToolFilterManager


@dataclass(frozen=True)
class ConversationStep:
    """One request of a recorded conversation: the messages before it and the tools called next."""

    id: str
    conversation: str
    turn: int
    step: int
    messages: list[dict[str, Any]]
    gold: list[str]
    category: str = ""


def load_steps(path: str | Path) -> list[ConversationStep]:
    """Steps from a JSON-lines file (``id``, ``entry``, ``turn``, ``step``, ``messages``, ``gold``).

    Errors name the file and line. Steps of a conversation are ordered by (turn, step).
    """
    steps = []
    for where, value in json_lines(path, "conversations"):
        raw = json_object(value, where)
        messages, gold = raw.get("messages"), raw.get("gold")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise ConfigError(f"{where}: 'messages' must be a non-empty list of chat messages")
        if not isinstance(gold, list) or not gold or not all(isinstance(g, str) for g in gold):
            raise ConfigError(f"{where}: 'gold' must be a non-empty list of tool names (Plugin-function)")
        try:
            turn, step = int(raw.get("turn", 0)), int(raw.get("step", 0))
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: 'turn' and 'step' must be integers") from None
        conversation = str(raw.get("entry") or raw.get("conversation") or "")
        step_id = str(raw.get("id") or f"{conversation}/t{turn}/s{step}")
        steps.append(ConversationStep(step_id, conversation, turn, step, messages, gold, str(raw.get("category", ""))))
    if not steps:
        raise ConfigError(f"{path}: no steps")
    return steps


def message_to_content(message: dict[str, Any], call_names: dict[str, str]) -> ChatMessageContent:
    """One OpenAI chat message as Semantic Kernel content (tool calls and results as SK items).

    `call_names` maps tool-call ids to function names, so a tool result knows which function it
    answers; it is filled as assistant tool calls are converted.
    """
    role = message.get("role")
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    if role == "assistant" and message.get("tool_calls"):
        items: list[Any] = []
        for call in message["tool_calls"]:
            function = call.get("function") or {}
            call_names[str(call.get("id"))] = str(function.get("name", ""))
            items.append(
                FunctionCallContent(
                    id=str(call.get("id")), name=str(function.get("name", "")), arguments=function.get("arguments")
                )
            )
        return ChatMessageContent(role=AuthorRole.ASSISTANT, items=items, content=text or None)
    if role == "tool":
        call_id = str(message.get("tool_call_id"))
        result = FunctionResultContent(id=call_id, name=call_names.get(call_id, ""), result=text)
        return ChatMessageContent(role=AuthorRole.TOOL, items=[result])
    roles = {"user": AuthorRole.USER, "assistant": AuthorRole.ASSISTANT, "system": AuthorRole.SYSTEM}
    if role not in roles and role != "developer":
        raise ConfigError(f"unknown chat message role {role!r}")
    return ChatMessageContent(role=roles.get(str(role), AuthorRole.DEVELOPER), content=text)


@dataclass
class StepResult:
    """What the wrapper sent for one step."""

    step: ConversationStep
    sent: list[str]
    tool_tokens: int
    seconds: float

    @property
    def passed(self) -> bool:
        return set(self.step.gold) <= set(self.sent)


@dataclass
class ConversationReplay:
    """Every step's result, with the summary figures of :func:`summarize`."""

    steps: list[StepResult] = field(default_factory=list)

    def summary(self) -> dict[str, float]:
        return summarize(self.steps)

    def by_category(self) -> dict[str, dict[str, float]]:
        groups: dict[str, list[StepResult]] = defaultdict(list)
        for result in self.steps:
            groups[result.step.category or "all"].append(result)
        return {name: summarize(rows) for name, rows in sorted(groups.items())}

    def misses(self) -> list[StepResult]:
        return [r for r in self.steps if not r.passed]


def summarize(results: Sequence[StepResult]) -> dict[str, float]:
    """Step recall (all, first step of a turn, later steps), turn completeness, tools and tokens per
    request, the share of requests whose tools list is the previous request's (a cached prompt
    prefix), and tool tokens per request as billed with OpenAI's prompt caching (:mod:`.caching`)."""
    if not results:
        return {}
    first = [r.passed for r in results if r.step.step == 0]
    later = [r.passed for r in results if r.step.step > 0]
    turns: dict[tuple[str, int], bool] = {}
    for r in results:
        key = (r.step.conversation, r.step.turn)
        turns[key] = turns.get(key, True) and r.passed
    times = sorted(r.seconds for r in results)
    conversations: dict[str, list[StepResult]] = defaultdict(list)
    for r in results:
        conversations[r.step.conversation].append(r)
    billed = sum(
        billed_tool_tokens([r.sent for r in rows], [r.tool_tokens for r in rows]) for rows in conversations.values()
    )
    kept = sum(rows[i].sent == rows[i - 1].sent for rows in conversations.values() for i in range(1, len(rows))) / max(
        sum(len(rows) - 1 for rows in conversations.values()), 1
    )
    return {
        "steps": float(len(results)),
        "step_recall": sum(r.passed for r in results) / len(results),
        "first_step_recall": sum(first) / len(first) if first else float("nan"),
        "later_step_recall": sum(later) / len(later) if later else float("nan"),
        "turn_complete": sum(turns.values()) / len(turns),
        "mean_tools": sum(len(r.sent) for r in results) / len(results),
        "mean_tool_tokens": sum(r.tool_tokens for r in results) / len(results),
        "prefix_kept": kept,
        "mean_billed_tool_tokens": billed / len(results),
        "p50_ms": 1000 * times[len(times) // 2],
        "p95_ms": 1000 * times[min(len(times) - 1, int(len(times) * 0.95))],
    }


ReplayPath = Literal["wrapper", "prepare_execution_settings"]
"""How a Semantic Kernel replay narrows the tools: the chat-service wrapper, or cloned settings."""

CoUsageScope = Literal["agent", "conversation"]
"""How far co-usage reaches in a replay: across the conversations (one agent), or one conversation."""
CO_USAGE_SCOPES: tuple[str, ...] = get_args(CoUsageScope)


async def replay_conversations(
    kernel: Kernel,
    manager: ToolFilterManager,
    steps: Sequence[ConversationStep],
    *,
    encoding: str = "o200k_base",
    progress: ProgressCallback | None = None,
    framework: Framework = "semantic-kernel",
    co_usage_scope: CoUsageScope = "agent",
    via: ReplayPath = "wrapper",
) -> ConversationReplay:
    """Send every step through the filtering wrapper on a recording transport and score what went out.

    Each conversation's steps grow one conversation (a step whose messages do not extend the
    previous step's starts a new one), so per-conversation state (sticky lists, tools of the turn)
    behaves as in a live agent. ``seconds`` is the selection time for the request. With
    ``framework="agent-framework"`` each step goes through Agent Framework's real OpenAI chat client
    and :class:`~sk_toolfilter.agent_framework.ToolFilterMiddleware` instead of the SK wrapper.

    ``via="prepare_execution_settings"`` (Semantic Kernel only) sends each step through SK's plain chat
    service with the settings :meth:`ToolFilterManager.prepare_execution_settings` cloned for the
    conversation, as an application that narrows its own settings does.

    ``co_usage_scope``: with ``"agent"`` co-usage learned in one conversation serves the next ones
    (a long-running agent; a replayed set's twin conversations then help each other); with
    ``"conversation"`` every conversation starts with no co-usage (a new deployment, and an
    estimate no other conversation of the set can leak into).
    """
    unknown = sorted({g for s in steps for g in s.gold if g not in manager.index})
    if unknown:
        raise ConfigError(f"gold tools not in the catalog: {', '.join(unknown[:5])}")
    transport = RecordingTransport()
    if framework == "agent-framework":
        send = _agent_framework_sender(kernel, manager, transport)
    else:
        send = _semantic_kernel_sender(kernel, manager, transport, via)
    ordered = sorted(steps, key=lambda s: (s.conversation, s.turn, s.step))
    replay = ConversationReplay()
    seen, current = 0, ""
    previous: list[dict[str, Any]] = []
    for number, step in enumerate(ordered, 1):
        extends = step.conversation == current and step.messages[:seen] == previous
        if not extends:
            if co_usage_scope == "conversation" and step.conversation != current:
                await manager.learning.settled()  # (what the last conversation's turns teach lands first)
                manager.learning.memory.clear()  # co-usage is a signal of learning's memory
            seen, current = 0, step.conversation
        with learning_context(conversation=step.conversation):  # each replayed conversation is its own
            seconds = await send(step.messages[seen:], not extends)
        seen, previous = len(step.messages), step.messages
        tools = transport.last.get("tools") or []
        sent = [t["function"]["name"] for t in tools]
        tokens = count_json_tokens(tools, encoding) if tools else 0
        replay.steps.append(StepResult(step, sent, tokens, seconds))
        if progress is not None:
            progress(number, len(ordered))
    return replay


Sender = Callable[[list[dict[str, Any]], bool], Awaitable[float]]
"""Adds a step's new messages to the conversation (a new one when the flag says so), sends one model
request through the filter, and returns the request's selection time."""


async def replay_catalog_conversations(
    folder: Path,
    overrides: dict[str, Any],
    *,
    conversations: str = "dev.jsonl",
    limit: int | None = None,
    keep: Callable[[str], bool] | None = None,
    framework: Framework = "semantic-kernel",
    co_usage_scope: CoUsageScope = "agent",
) -> dict[str, dict[str, float]]:
    """Replay a folder's `conversations` file over its catalog (``tools.jsonl``) with one
    ``tool_filtering`` block: ``{"all": summary, category: summary, ...}``. `keep` picks conversations by
    id (cross-validation folds); `limit` keeps the first N conversations."""
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import parse_agent

    steps = load_steps(folder / conversations)
    if keep is not None:
        steps = [s for s in steps if keep(s.conversation)]
    if limit:
        first = set(list(dict.fromkeys(s.conversation for s in steps))[:limit])
        steps = [s for s in steps if s.conversation in first]
    tools = [{"type": "catalog", "name": folder.name, "path": str(folder / "tools.jsonl")}]
    spec = parse_agent({"name": folder.name, "tools": tools, "tool_filtering": overrides}, source="benchmark")
    async with await open_toolset(spec) as toolset:
        replay = await replay_conversations(
            toolset.kernel, toolset.manager, steps, framework=framework, co_usage_scope=co_usage_scope
        )
    return {"all": replay.summary(), **replay.by_category()}


def _semantic_kernel_sender(
    kernel: Kernel, manager: ToolFilterManager, transport: RecordingTransport, via: ReplayPath
) -> Sender:
    plain = offline_chat_service(transport)
    wrapped = wrap_chat_service(plain, manager)
    base = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto(auto_invoke=False))
    state: dict[str, Any] = {"history": ChatHistory(), "names": {}}

    async def send(new: list[dict[str, Any]], fresh: bool) -> float:
        if fresh:
            state["history"], state["names"] = ChatHistory(), {}
        for message in new:
            state["history"].add_message(message_to_content(message, state["names"]))
        if via == "wrapper":
            await wrapped.get_chat_message_contents(state["history"], base, kernel=kernel)
            return wrapped.last_selection_seconds
        started = time.perf_counter()
        settings = await manager.prepare_execution_settings(state["history"], base)
        seconds = time.perf_counter() - started
        await plain.get_chat_message_contents(state["history"], settings, kernel=kernel)
        return seconds

    return send


def _agent_framework_sender(kernel: Kernel, manager: ToolFilterManager, transport: RecordingTransport) -> Sender:
    from sk_toolfilter.agent_framework.messages import from_openai_message
    from sk_toolfilter.agent_framework.setup import kernel_filter
    from sk_toolfilter.measure.wire import offline_agent_framework_client

    tool_filter = kernel_filter(manager, kernel)
    client = offline_agent_framework_client(transport, middleware=[tool_filter.chat_middleware])
    options = {"tools": tool_filter.tools, "tool_choice": "auto"}
    state: dict[str, Any] = {"messages": [], "names": {}}

    async def send(new: list[dict[str, Any]], fresh: bool) -> float:
        if fresh:
            state["messages"], state["names"] = [], {}
        state["messages"] += [from_openai_message(m, state["names"]) for m in new]
        await client.get_response(list(state["messages"]), options=options)
        return tool_filter.chat_middleware.last_selection_seconds

    return send


def render_summary(replay: ConversationReplay, by_category: bool = False) -> str:
    """A plain-text table of the replay's figures (overall, and per category when asked)."""
    columns = (
        "step_recall",
        "first_step_recall",
        "later_step_recall",
        "turn_complete",
        "mean_tools",
        "mean_tool_tokens",
        "prefix_kept",
        "mean_billed_tool_tokens",
        "p50_ms",
        "p95_ms",
    )
    rows = [("all", replay.summary())]
    if by_category:
        rows += list(replay.by_category().items())
    header = f"{'':14}{'steps':>7}" + "".join(f"{c:>19}" for c in columns)
    lines = [header]
    for name, figures in rows:
        lines.append(f"{name[:14]:14}{int(figures['steps']):>7}" + "".join(f"{figures[c]:>19.3f}" for c in columns))
    return "\n".join(lines)
