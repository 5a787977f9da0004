"""A YAML agent as a real SK ChatCompletionAgent, every request filtered, on an offline transport."""

from pathlib import Path

import pytest
import yaml

from sk_toolfilter import ConfigError
from sk_toolfilter.agents.agent import load_agent
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def spec(tmp_path):
    data = yaml.safe_load((ROOT / "agent.yaml").read_text())
    data["tool_filtering"]["search_method"] = "bm25"  # fast; the local model is tested elsewhere
    for source in data["tools"]:
        if "init" in source:
            source["init"]["root"] = str(tmp_path / "sandbox")
    return parse_agent(data, base_dir=ROOT)


async def test_agent_turn_calls_a_selected_tool_and_sk_runs_it(spec, tmp_path):
    transport = RecordingTransport(
        [tool_call_reply(("Files-write_file", {"path": "todo.txt", "content": "buy milk"})), text_reply("Saved.")]
    )
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        response = await loaded.agent.get_response(messages="Save 'buy milk' to the file todo.txt")
    assert str(response.message.content) == "Saved."
    assert (tmp_path / "sandbox" / "todo.txt").read_text() == "buy milk"
    first, second = transport.requests
    assert "Files-write_file" in transport.tool_names(0)
    ranked = [n for n in transport.tool_names(0) if not n.startswith("ToolSearch-")]
    assert len(ranked) <= spec.tool_filtering.top_k
    assert first["messages"][0]["role"] == "system" and "Atlas" in first["messages"][0]["content"]
    assert second["messages"][-1]["role"] == "tool"
    assert loaded.manager.usage.count("Files-write_file") == 1


async def test_one_filtered_call_does_not_leak_into_the_next(spec):
    transport = RecordingTransport()
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        own_settings = loaded.agent.arguments.execution_settings
        before = {k: v.model_dump() for k, v in own_settings.items()}
        await loaded.agent.get_response(messages="Send an email to bob@example.com")
        await loaded.agent.get_response(messages="What is the square root of 81?")
        after = {k: v.model_dump() for k, v in own_settings.items()}
    assert before == after
    assert all(v.function_choice_behavior.filters is None for v in own_settings.values())
    first, second = transport.tool_names(0), transport.tool_names(1)
    assert "Messaging-send_email" in first and "Messaging-send_email" not in second
    assert "Math-square_root" in second
    assert transport.requests[1]["temperature"] == 0.2


async def test_a_vague_first_request_sends_only_the_discovery_tools(spec):
    transport = RecordingTransport()
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        await loaded.agent.get_response(messages="hi there")
    assert transport.tool_names(0) == ["ToolSearch-describe_tool", "ToolSearch-search_tools"]


async def test_without_discovery_a_vague_request_sends_no_tools(spec):
    spec.tool_filtering.discovery.enabled = False
    transport = RecordingTransport()
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        await loaded.agent.get_response(messages="hi there")
    assert "tools" not in transport.requests[0] and "tool_choice" not in transport.requests[0]


async def test_streaming_requests_are_filtered_too(spec):
    transport = RecordingTransport([text_reply("streamed")])
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        chunks = [str(c.message.content) async for c in loaded.agent.invoke_stream(messages="convert 5 km to miles")]
    assert "".join(chunks) == "streamed"
    assert transport.requests[0]["stream"] is True
    assert "Math-convert_units" in transport.tool_names(0)
    assert len(transport.tool_names(0)) <= 5 + 2  # top_k + the discovery tools


async def test_a_call_to_a_function_not_offered_is_refused(spec, tmp_path):
    transport = RecordingTransport([tool_call_reply(("Files-delete_file", {"path": "keep.txt"})), text_reply("done")])
    (tmp_path / "sandbox").mkdir(exist_ok=True)
    (tmp_path / "sandbox" / "keep.txt").write_text("precious")
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        await loaded.agent.get_response(messages="multiply 3 by 4")
    assert "Files-delete_file" not in transport.tool_names(0)
    assert (tmp_path / "sandbox" / "keep.txt").read_text() == "precious"
    assert transport.requests[1]["messages"][-1]["role"] == "tool"


async def test_no_api_key_is_a_one_line_config_error(spec, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="no API key"):
        await load_agent(spec)
