"""Learning from use where users are: a turn is learned when its tool calls are seen — a stateless
endpoint, the last turn of a conversation, streaming, manual calling, Agent Framework runs — and what
the memory holds is visible (``sk-toolfilter learned``, ``learn``, ``explain``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
from semantic_kernel.contents import ChatHistory

from sk_toolfilter import ToolFilterConfig, create_tool_filter, wrap_chat_service
from sk_toolfilter.cli import main
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply

ROOT = Path(__file__).resolve().parents[1]

# Seven requests, each answered by one call of one tool (the scripted model), then a text answer.
SEVEN = [
    ("what time is it in Tokyo right now?", ("Time-current_time", {"timezone": "Asia/Tokyo"})),
    ("add 17 and 25 for me", ("Math-add", {"a": 17, "b": 25})),
    ("how many words are in 'the quick brown fox'?", ("Text-count_words", {"text": "the quick brown fox"})),
    ("list my saved notes", ("Notes-list_notes", {})),
    ("what is the square root of 144?", ("Math-square_root", {"x": 144})),
    ("which day of the week is 2026-12-25?", ("Time-day_of_week", {"day": "2026-12-25"})),
    ("turn 'hello world' into a url slug", ("Text-slugify", {"text": "hello world"})),
]


def seven_replies() -> list[dict]:
    replies = []
    for _, call in SEVEN:
        replies += [tool_call_reply(call), text_reply("Done.")]
    return replies


@pytest.fixture
def learning_agent(tmp_path) -> Path:
    text = (ROOT / "agent.yaml").read_text().replace("root: sandbox", f"root: {tmp_path / 'sandbox'}")
    spec = yaml.safe_load(text)
    spec["tool_filtering"]["learning"] = {"file": "learned.npz"}
    spec["instructions"] = "Be helpful."
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


async def serve(agent: Path, stateless: bool, streaming: bool = False) -> None:
    """The bundled agent's tools behind the real OpenAIChatCompletion (scripted HTTP): seven requests,
    each in a fresh history (a stateless endpoint) or all in one (a chat app)."""
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file

    async with await open_toolset(load_agent_file(agent)) as tools:
        service = wrap_chat_service(offline_chat_service(RecordingTransport(seven_replies())), tools.manager)
        settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
        history = ChatHistory()
        for request, _ in SEVEN:
            if stateless:
                history = ChatHistory()
            history.add_user_message(request)
            if streaming:
                async for _ in service.get_streaming_chat_message_contents(history, settings, kernel=tools.kernel):
                    pass
            else:
                [answer] = await service.get_chat_message_contents(history, settings, kernel=tools.kernel)
                history.add_message(answer)
        await tools.manager.learning.settled()


@pytest.mark.parametrize(
    ("stateless", "streaming"), [(True, False), (False, False), (True, True)], ids=["stateless", "chat", "streamed"]
)
def test_every_request_that_called_a_tool_is_remembered_and_read_back_by_learned(
    learning_agent, capsys, stateless, streaming
):
    import asyncio

    asyncio.run(serve(learning_agent, stateless, streaming))
    capsys.readouterr()
    assert main(["learned", str(learning_agent), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["requests"] == 7 and summary["tools"] == 7  # the last turn included, none twice
    assert summary["conversations"] == (7 if stateless else 1)
    assert {"trust", "where", "oldest", "newest"} <= set(summary)
    assert any("learned.npz" in where for where in summary["where"])
    assert main(["learned", str(learning_agent)]) == 0
    assert "7 requests remembered" in capsys.readouterr().out


async def test_a_turn_seen_when_called_and_again_in_the_next_history_is_one_row_with_its_calls(demo_kernel):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig())
    calls = [tool_call_reply(("Time-current_time", {})), tool_call_reply(("Time-day_of_week", {"day": "2026-12-25"}))]
    transport = RecordingTransport([*calls, text_reply("Friday."), text_reply("You are welcome.")])
    service = wrap_chat_service(offline_chat_service(transport), manager)
    settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    history = ChatHistory()
    history.add_user_message("what day of the week is Christmas this year?")
    [answer] = await service.get_chat_message_contents(history, settings, kernel=demo_kernel)
    history.add_message(answer)
    await manager.learning.settled()
    assert [row.tools for row in manager.learning.memory.rows()] == [("Time-current_time", "Time-day_of_week")]
    version = manager.learning.memory.version
    history.add_user_message("thanks")
    await service.get_chat_message_contents(history, settings, kernel=demo_kernel)
    await manager.learning.settled()
    assert manager.learning.memory.version == version  # the next request showed the same turn: nothing new


async def test_an_app_that_calls_the_model_itself_records_what_it_called(demo_kernel):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig())
    history = ChatHistory()
    history.add_user_message("post 'deploy done' to #ops")
    assert await manager.record(history, ["Messaging-post_to_channel", "Nope-unknown"]) == 1
    assert await manager.record("send a direct message to Ana", ["Messaging-send_direct_message"]) == 1
    assert await manager.record(history, ["Messaging-post_to_channel"]) == 0  # known already
    assert await manager.record("x", ["Messaging-send_email"], allowed={"Time-today"}) == 0  # not allowed
    assert sorted(row.tools for row in manager.learning.memory.rows()) == [
        ("Messaging-post_to_channel",),
        ("Messaging-send_direct_message",),
    ]


async def test_a_scope_and_conversation_from_the_kernel_arguments_are_used(demo_kernel):
    from semantic_kernel.functions import KernelArguments

    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(learning={"scope": "tenant_id"}))
    transport = RecordingTransport([tool_call_reply(("Time-current_time", {})), text_reply("Noon.")] * 2)
    service = wrap_chat_service(offline_chat_service(transport), manager)
    settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    for tenant, thread in (("acme", "t-1"), ("globex", "t-2")):
        history = ChatHistory()
        history.add_user_message("what time is it?")
        arguments = KernelArguments(tenant_id=tenant, conversation_id=thread)
        await service.get_chat_message_contents(history, settings, kernel=demo_kernel, arguments=arguments)
    await manager.learning.settled()
    rows = manager.learning.memory.rows()
    assert len(rows) == 2 and len({row.scope for row in rows}) == 2 and len({row.conversation for row in rows}) == 2
    assert "acme" not in repr(rows) and "t-1" not in repr(rows)  # fingerprints, never the values


def test_learn_and_explain_say_why_learning_does_not_act_yet(learning_agent, tmp_path, capsys):
    calls = tmp_path / "calls.jsonl"
    lines = [{"query": "is nginx running on web01?", "tools": ["Notes-list_notes"]}]
    lines += [{"query": q, "tools": [call[0]]} for q, call in SEVEN]
    calls.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["learn", str(learning_agent), "--calls", str(calls)]) == 0
    out = capsys.readouterr().out
    assert "trust 0.00" in out and "only near-copies act yet" in out
    assert main(["search", str(learning_agent), "is nginx running on web09?", "--explain"]) == 0
    out = capsys.readouterr().out
    assert "learned: not applied: 1 similar past request" in out and "in 1 conversation called Notes-list_notes" in out


async def test_an_agent_framework_run_learns_its_last_turn_when_the_run_ends():
    from tests.test_agent_framework import THREE_STEPS, filtered_agent

    replies = [tool_call_reply(THREE_STEPS[0]), text_reply("It arrives Friday.")]
    agent, tool_filter, _ = await filtered_agent(ToolFilterConfig(top_k=4), replies)
    await agent.run("Where is my package 1Z999?")  # one run, no later request
    await tool_filter.manager.learning.settled()
    assert [row.tools for row in tool_filter.manager.learning.memory.rows()] == [("track_package",)]


async def test_a_streamed_agent_framework_run_learns_when_the_stream_is_finalized():
    from tests.test_agent_framework import THREE_STEPS, filtered_agent

    replies = [tool_call_reply(THREE_STEPS[0]), text_reply("It arrives Friday.")]
    agent, tool_filter, _ = await filtered_agent(ToolFilterConfig(top_k=4), replies)
    updates = agent.run("Where is my package 1Z999?", stream=True)
    async for _ in updates:
        pass
    await updates.get_final_response()
    await tool_filter.manager.learning.settled()
    assert [row.tools for row in tool_filter.manager.learning.memory.rows()] == [("track_package",)]


async def test_an_agent_framework_run_argument_scopes_what_it_learns():
    from tests.test_agent_framework import THREE_STEPS, filtered_agent

    replies = [tool_call_reply(THREE_STEPS[0]), text_reply("It arrives Friday.")] * 2
    agent, tool_filter, transport = await filtered_agent(
        ToolFilterConfig(top_k=4, learning={"scope": "tenant_id"}), replies
    )
    for tenant in ("acme", "globex"):
        await agent.run("Where is my package 1Z999?", client_kwargs={"tenant_id": tenant})
    await tool_filter.manager.learning.settled()
    rows = tool_filter.manager.learning.memory.rows()
    assert len(rows) == 2 and len({row.scope for row in rows}) == 2
    assert "acme" not in json.dumps(transport.requests)  # read by the filter, never sent to the model
