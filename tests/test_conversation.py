"""A scripted multi-turn conversation through the real agent: hi → discovery → call → pivot → follow-up."""

import pytest
from semantic_kernel.agents import ChatHistoryAgentThread

from sk_toolfilter.agents.agent import load_agent
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply
from tests.test_agent import spec  # noqa: F401  (fixture)


@pytest.fixture
def transport():
    return RecordingTransport()


async def test_scripted_conversation(spec, transport, tmp_path):  # noqa: F811
    transport.queue(
        text_reply("Hello! What can I do for you?"),  # turn 1
        tool_call_reply(("ToolSearch-search_tools", {"query": "remember a preference", "limit": "3"})),  # turn 2
        tool_call_reply(("Notes-remember_fact", {"key": "colour", "value": "green"})),
        text_reply("I'll remember that."),
        tool_call_reply(("Messaging-post_to_channel", {"channel": "#general", "message": "colour: green"})),  # turn 3
        text_reply("Posted."),
        tool_call_reply(("Messaging-post_to_channel", {"channel": "#random", "message": "colour: green"})),  # turn 4
        text_reply("Posted there too."),
    )
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        thread = ChatHistoryAgentThread()
        for message in [
            "hi",
            "Keep in mind that green is my favourite colour",
            "Now post a summary of that to the #general Slack channel",
            "Do the same for #random",
        ]:
            response = await loaded.agent.get_response(messages=message, thread=thread)
            thread = response.thread

    sent = [transport.tool_names(i) for i in range(len(transport.requests))]
    # Turn 1: only the pinned discovery tools, no error.
    assert sent[0] == ["ToolSearch-describe_tool", "ToolSearch-search_tools"]
    # Turn 2: the model searches; the tool it found is offered in the very next request and runs.
    search_result = transport.requests[2]["messages"][-1]
    assert search_result["role"] == "tool" and "Notes-remember_fact" in search_result["content"]
    assert "Notes-remember_fact" in sent[2]
    assert "remembered colour" in transport.requests[3]["messages"][-1]["content"]
    # Turn 3: the pivot surfaces the messaging tool.
    assert "Messaging-post_to_channel" in sent[4]
    # Turn 4: the follow-up keeps it.
    assert "Messaging-post_to_channel" in sent[6]
    outbox = (tmp_path / "sandbox" / "outbox.jsonl").read_text()
    assert "#general" in outbox and "#random" in outbox
