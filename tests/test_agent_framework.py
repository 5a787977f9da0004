"""Microsoft Agent Framework: the same filter as a chat middleware and a function middleware.

Real ``agent_framework.Agent`` and Agent Framework's real ``OpenAIChatCompletionClient`` on a real
``AsyncOpenAI`` client whose HTTP goes to a recording transport; the offline embedding model;
canned model replies. Agent Framework's own function-calling loop runs the tools.
"""

import logging
import os
import re
import shutil
from pathlib import Path

import pytest
from agent_framework import Agent, tool

from sk_toolfilter import ToolFilterConfig
from sk_toolfilter.agent_framework import (
    AgentFrameworkTools,
    create_agent_framework_filter,
    kernel_function_tool,
)
from sk_toolfilter.agents.agent import LoadedAgentFrameworkAgent, load_agent, open_toolset
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.measure.report import build_token_report
from sk_toolfilter.measure.wire import RecordingTransport, offline_agent_framework_client, text_reply, tool_call_reply
from sk_toolfilter.retrieval.metadata import openai_tool_definition, tool_from_function
from tests.conftest import require_server

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT.parent / "shared" / "benchmarks"
ran: list[str] = []


@tool
def track_package(tracking_number: str) -> str:
    """Track a package by its tracking number and return where it is and when it arrives."""
    ran.append("track_package")
    return '{"status": "in transit", "arrives": "Friday 10:00"}'


@tool
def list_events(day: str) -> str:
    """List the calendar events of a day."""
    ran.append("list_events")
    return '[{"id": "e1", "title": "Dentist", "time": "Friday 10:00"}]'


@tool
def reschedule_event(event_id: str, new_time: str) -> str:
    """Move a calendar event to a new date and time."""
    ran.append("reschedule_event")
    return "rescheduled"


@tool
def delete_all_files(folder: str) -> str:
    """Delete every file of a folder."""
    ran.append("delete_all_files")
    return "deleted"


def spreadsheet_tool(number: int):
    @tool(name=f"column_statistic_{number}", description=f"Compute statistic number {number} of a spreadsheet column")
    def statistic(column: str) -> str:
        ran.append(f"column_statistic_{number}")
        return "1"

    return statistic


TOOLS = [track_package, list_events, reschedule_event, delete_all_files, *(spreadsheet_tool(n) for n in range(24))]


@pytest.fixture(autouse=True)
def clear_ran():
    ran.clear()


def names_sent(transport: RecordingTransport) -> list[list[str]]:
    return [transport.tool_names(i) for i in range(len(transport.requests))]


async def filtered_agent(config: ToolFilterConfig, replies, tools=TOOLS):
    tool_filter = await create_agent_framework_filter(list(tools), config)
    transport = RecordingTransport(replies)
    agent = Agent(
        client=offline_agent_framework_client(transport),
        instructions="You are a helpful assistant.",
        tools=tool_filter.tools,
        middleware=tool_filter.middleware,
    )
    return agent, tool_filter, transport


THREE_STEPS = [
    ("track_package", {"tracking_number": "1Z999"}),
    ("list_events", {"day": "Friday"}),
    ("reschedule_event", {"event_id": "e1", "new_time": "Monday 09:00"}),
]
REQUEST = "Where is my package 1Z999? If it arrives Friday, move my Friday calendar event to Monday."


@pytest.mark.parametrize("stream", [False, True], ids=["run", "streaming"])
async def test_every_model_call_of_the_function_loop_is_narrowed(stream):
    config = ToolFilterConfig(top_k=4)
    replies = [*(tool_call_reply(step) for step in THREE_STEPS), text_reply("All done.")]
    agent, tool_filter, transport = await filtered_agent(config, replies)
    if stream:
        updates = agent.run(REQUEST, stream=True)
        async for _ in updates:
            pass
        response = await updates.get_final_response()
    else:
        response = await agent.run(REQUEST)

    assert response.text == "All done."
    assert len(transport.requests) == 4  # the first call and one per tool result: each went through the middleware
    sent = names_sent(transport)
    catalog = len(TOOLS) + 2  # the discovery tools
    for names in sent:
        assert 2 < len(names) < catalog / 2
        assert {"ToolSearch-search_tools", "ToolSearch-describe_tool"} <= set(names)
    assert "track_package" in sent[0]
    # The loop's later calls keep the turn's tools and the request's parts: each step was on offer.
    assert "list_events" in sent[1] and "reschedule_event" in sent[2]
    assert ran == ["track_package", "list_events", "reschedule_event"]
    # The agent's own tool list is untouched: every model call started from all of it.
    assert len(tool_filter.tools) == catalog
    assert tool_filter.chat_middleware.last_selection == sent[-1]


async def test_a_hidden_tool_never_runs_and_an_unoffered_one_is_loaded_for_the_next_call(caplog):
    config = ToolFilterConfig(top_k=3, exclude=["delete_all_files"])
    replies = [
        tool_call_reply(("delete_all_files", {"folder": "/"})),
        tool_call_reply(("column_statistic_7", {"column": "B"})),
        text_reply("done"),
    ]
    agent, tool_filter, transport = await filtered_agent(config, replies)
    with caplog.at_level(logging.INFO, logger="sk_toolfilter"):
        await agent.run("track my package 1Z999")

    assert ran == []  # neither call ran
    results = [m["content"] for body in transport.requests for m in body["messages"] if m.get("role") == "tool"]
    assert "error: delete_all_files is not available to this agent." in results
    assert any("column_statistic_7 was not among the tools loaded for this step" in r for r in results)
    sent = names_sent(transport)
    assert all("delete_all_files" not in names for names in sent)
    assert "column_statistic_7" not in sent[1] and "column_statistic_7" in sent[2]  # loaded once named
    assert "did not run delete_all_files" in caplog.text
    # Calls that did not run are not counted as use.
    assert tool_filter.manager.usage.count("column_statistic_7") == 0


async def test_tools_found_with_discovery_are_offered_on_the_next_call():
    config = ToolFilterConfig(top_k=2)
    replies = [
        tool_call_reply(("ToolSearch-search_tools", {"query": "statistic of a spreadsheet column"})),
        text_reply("found them"),
    ]
    agent, _, transport = await filtered_agent(config, replies)
    await agent.run("hello")

    found = next(m["content"] for m in transport.requests[1]["messages"] if m.get("role") == "tool")
    first_found = re.search(r"^(column_statistic_\d+)\b", found, flags=re.MULTILINE).group(1)
    assert first_found not in names_sent(transport)[0]
    assert first_found in names_sent(transport)[1]


async def test_disabled_filtering_offers_every_visible_tool():
    config = ToolFilterConfig(enabled=False, exclude=["delete_all_files"])
    agent, _, transport = await filtered_agent(config, [text_reply("hi")])
    await agent.run("hello")
    assert sorted(names_sent(transport)[0]) == sorted(t.name for t in TOOLS if t.name != "delete_all_files")


async def test_tools_given_to_one_run_stay_on_offer():
    @tool
    def one_off(text: str) -> str:
        """Shout the text."""
        return text.upper()

    agent, _, transport = await filtered_agent(ToolFilterConfig(top_k=2), [text_reply("ok")])
    await agent.run("track my package 1Z999", tools=[one_off])
    assert "one_off" in names_sent(transport)[0] and "track_package" in names_sent(transport)[0]


async def test_tools_appended_to_the_agent_list_are_indexed_before_the_next_call():
    tools = [track_package, list_events]
    tool_filter = await create_agent_framework_filter(tools, ToolFilterConfig(top_k=1, discovery={"enabled": False}))
    assert "reschedule_event" not in tool_filter.manager.index
    tool_filter.tools.append(reschedule_event)
    selection = await tool_filter.manager.select("move a calendar event to a new time")
    assert selection.names == ["reschedule_event"]


async def test_an_sk_function_and_its_agent_framework_tool_are_ranked_and_sent_alike():
    """Read through either framework, a tool has the same names, ranking texts and wire schema."""
    async with await open_toolset(ROOT / "agent.yaml") as toolset:
        functions = [f for plugin in toolset.kernel.plugins.values() for f in plugin]
        source = AgentFrameworkTools([kernel_function_tool(f, toolset.kernel) for f in functions])
        for function, from_af in zip(functions, source.crawl(), strict=True):
            from_sk = tool_from_function(function)
            assert (from_af.plugin, from_af.name, from_af.full_name) == (
                from_sk.plugin,
                from_sk.name,
                from_sk.full_name,
            )
            assert from_af.lexical_fields() == from_sk.lexical_fields()
            assert from_af.embedding_text() == from_sk.embedding_text()
            assert openai_tool_definition(from_af) == openai_tool_definition(from_sk)
            assert from_af.keywords == from_sk.keywords


async def test_the_bundled_agent_file_runs_a_filtered_multi_step_turn_in_agent_framework():
    transport = RecordingTransport(
        [
            tool_call_reply(("Time-current_time", {})),
            tool_call_reply(("Math-calculate", {"expression": "2 + 3"})),
            text_reply("It is late and 2 + 3 = 5."),
        ]
    )
    loaded = await load_agent(
        ROOT / "agent.yaml", chat_service=offline_agent_framework_client(transport), framework="agent-framework"
    )
    async with loaded:
        assert isinstance(loaded, LoadedAgentFrameworkAgent)
        response = await loaded.agent.run("What time is it, and what is 2 + 3?")
    assert response.text == "It is late and 2 + 3 = 5."
    sent = names_sent(transport)
    catalog = len(loaded.manager.index)
    assert len(sent) == 3 and all(0 < len(names) < catalog / 2 for names in sent)
    assert "Time-current_time" in sent[0] and "Math-calculate" in sent[1]
    results = [m["content"] for m in transport.requests[2]["messages"] if m.get("role") == "tool"]
    assert results[1] == "5"  # the kernel function ran through its Agent Framework tool


async def test_framework_in_the_agent_file_picks_agent_framework(tmp_path):
    shutil.copytree(ROOT / "instructions", tmp_path / "instructions")
    text = (ROOT / "agent.yaml").read_text().replace("name: ", "framework: agent-framework\nname: ", 1)
    (tmp_path / "agent.yaml").write_text(text)
    transport = RecordingTransport([text_reply("hello")])
    loaded = await load_agent(tmp_path / "agent.yaml", chat_service=offline_agent_framework_client(transport))
    async with loaded:
        assert isinstance(loaded, LoadedAgentFrameworkAgent)
        assert (await loaded.agent.run("what is 2 + 3?")).text == "hello"
    assert "Math-calculate" in names_sent(transport)[0]


async def test_the_token_report_is_the_same_in_both_frameworks():
    async with await open_toolset(ROOT / "agent.yaml") as toolset:
        spec = toolset.spec
        reports = [
            await build_token_report(
                spec,
                toolset.kernel,
                toolset.manager,
                spec.sample_queries,
                conversation=spec.sample_conversation,
                framework=framework,
            )
            for framework in ("semantic-kernel", "agent-framework")
        ]
    sk, af = reports
    assert af.framework == "agent-framework"
    assert [q.selected for q in af.queries] == [q.selected for q in sk.queries]
    assert [q.tools_tokens_on for q in af.queries] == [q.tools_tokens_on for q in sk.queries]
    assert [q.tools_tokens_off for q in af.queries] == [q.tools_tokens_off for q in sk.queries]
    assert af.totals["saved_percent"] > 50
    assert af.conversation is not None and af.conversation.tools_per_request == sk.conversation.tools_per_request


async def test_an_mcp_server_of_an_agent_file_runs_in_agent_framework(tmp_path):
    """MCP sources run on the library's MCP connection in both frameworks (Agent Framework's own MCP
    tools need mcp 2.x, which Semantic Kernel 1.x excludes)."""
    servers = os.environ.get("SK_TOOLFILTER_MCP_SERVERS", "")
    command = require_server(
        str(Path(servers, "npm/node_modules/.bin/mcp-server-memory")) if servers else None,
        "mcp-server-memory",
        "run .ci/install-mcp-servers DIR and set SK_TOOLFILTER_MCP_SERVERS=DIR",
    )
    spec = parse_agent(
        {
            "name": "memory_agent",
            "framework": "agent-framework",
            "tools": [
                {
                    "type": "mcp",
                    "name": "Memory",
                    "command": command,
                    "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
                },
                {"type": "plugin", "name": "Math", "import": "sk_toolfilter.demo:MathPlugin"},
                {"type": "plugin", "name": "Time", "import": "sk_toolfilter.demo:TimePlugin"},
            ],
            "tool_filtering": {"top_k": 3},
        },
        source="test",
    )
    entity = {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}]}
    transport = RecordingTransport([tool_call_reply(("Memory-create_entities", entity)), text_reply("saved")])
    loaded = await load_agent(spec, chat_service=offline_agent_framework_client(transport))
    async with loaded:
        assert isinstance(loaded, LoadedAgentFrameworkAgent)
        await loaded.agent.run("create an entity in the knowledge graph for Ada, a person")
        catalog = len(loaded.manager.index)
    first = names_sent(transport)[0]
    assert "Memory-create_entities" in first and len(first) < catalog / 2
    result = next(m["content"] for m in transport.requests[1]["messages"] if m.get("role") == "tool")
    assert '"name":"Ada"' in result
    assert "Ada" in (tmp_path / "memory.jsonl").read_text()


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (["hello"], "tools[0]: str 'hello' is not an Agent Framework tool"),
        ([track_package, 42], "tools[1]: int '42' is not an Agent Framework tool"),
        ([track_package, track_package], "more than one tool is named 'track_package'"),
        (
            [tool(lambda text: text, name="ToolSearch-search_tools", description="mine")],
            "discovery.plugin_name: 'ToolSearch' is already used by the agent's tools",
        ),
    ],
    ids=["string", "number", "repeated name", "discovery name taken"],
)
async def test_what_is_no_usable_tool_list_is_named(tools, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        await create_agent_framework_filter(tools, ToolFilterConfig())


async def test_a_finished_turn_is_learned_from_the_middleware_without_its_text():
    replies = [tool_call_reply(THREE_STEPS[0]), text_reply("It arrives Friday."), text_reply("You are welcome.")]
    agent, tool_filter, _ = await filtered_agent(ToolFilterConfig(top_k=4), replies)
    session = agent.create_session()
    await agent.run("Where is my package 1Z999?", session=session)
    await agent.run("Thanks!", session=session)  # the first turn is complete now: the filter sees it answered
    await tool_filter.manager.learning.settled()  # learned beside the request, not in it
    rows = tool_filter.manager.learning.memory.rows()
    assert [row.tools for row in rows] == [("track_package",)]
    assert "1Z999" not in repr(rows)
