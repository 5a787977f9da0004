"""Conventions users bring from other tool selectors: an allow-list per tool source (OpenAI Agents SDK
``allowed_tools``, fast-agent), and MCP annotation hints that exclude or pin tools."""

import logging
from pathlib import Path

from sk_toolfilter.agents.agent import open_toolset
from sk_toolfilter.agents.agent_file import parse_agent

FIXTURES = Path(__file__).parent / "fixtures"
SERVER = FIXTURES / "mcp_annotated_server.py"
TIME = "sk_toolfilter.demo:TimePlugin"


def agent(tmp_path, **mcp):
    return parse_agent(
        {
            "name": "files",
            "instructions": "Help with files.",
            "tools": [
                {"type": "mcp", "name": "fs", "command": "python", "args": [str(SERVER)], **mcp},
                {"type": "plugin", "name": "Time", "import": TIME, "allowed_tools": ["now", "to*"]},
            ],
            "tool_filtering": {"search_method": "bm25", "discovery": {"enabled": False}},
        },
        base_dir=tmp_path,
    )


async def visible(spec) -> tuple[list[str], list[str], object]:
    async with await open_toolset(spec) as tools:
        manager = tools.manager
        names = sorted(manager.index.names)
        pinned = sorted(name for name, _ in manager.policy.pinned())
        hidden_call = manager.is_hidden("fs-write_file")
    return names, pinned, hidden_call


async def test_only_the_allowed_tools_of_a_source_are_seen_and_run(tmp_path):
    names, _, write_hidden = await visible(agent(tmp_path, allowed_tools=["read_file", "list_directory"]))
    assert [n for n in names if n.startswith("fs-")] == ["fs-list_directory", "fs-read_file"]
    assert write_hidden  # the guard refuses a call to it too
    time_tools = [n for n in names if n.startswith("Time-")]
    assert time_tools and all(n in ("Time-now",) or n.startswith("Time-to") for n in time_tools)


async def test_mcp_annotations_exclude_destructive_tools_and_pin_read_only_ones(tmp_path):
    spec = agent(tmp_path, annotations={"destructiveHint": "exclude", "readOnlyHint": "pin"}, load_hints=False)
    names, pinned, _ = await visible(spec)
    assert "fs-delete_file" not in names and {"fs-write_file", "fs-move_file"} <= set(names)
    assert [n for n in pinned if n.startswith("fs-")] == ["fs-list_directory", "fs-read_file"]
    async with await open_toolset(spec) as tools:
        sent = await tools.manager.filter_tools("what time is it now?")
    assert {"fs-read_file", "fs-list_directory"} <= set(sent)


async def test_mcp_meta_load_hints_pin_always_loaded_tools_and_search_hints_reach_ranking(tmp_path):
    names, pinned, _ = await visible(agent(tmp_path))
    assert [n for n in pinned if n.startswith("fs-")] == ["fs-stat_path", "fs-tail_log"]  # hash_file: deferred
    assert "fs-hash_file" in names
    async with await open_toolset(agent(tmp_path)) as tools:
        sent = await tools.manager.filter_tools("compress this into an archive")
        described = tools.manager.index.get("fs-zip_folder")
    assert sent[0] == "fs-zip_folder"  # only its search hint shares a word with the request
    assert described.keywords == ("compress archive",)


async def test_mcp_meta_load_hints_can_be_ignored(tmp_path):
    _, pinned, _ = await visible(agent(tmp_path, load_hints=False))
    assert [n for n in pinned if n.startswith("fs-")] == []


async def test_an_allowed_tool_that_matches_nothing_is_named_with_the_closest_names(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="sk_toolfilter"):
        await visible(agent(tmp_path, allowed_tools=["read_files"]))
    assert "tool_filtering.allow.fs[0]: 'read_files' matches no tool" in caplog.text and "read_file" in caplog.text


async def test_a_source_sent_with_every_request(tmp_path):
    spec = parse_agent(
        {
            "name": "a",
            "instructions": "Help.",
            "tools": [
                {"type": "plugin", "name": "Time", "import": "sk_toolfilter.demo:TimePlugin", "always_include": True},
                {"type": "plugin", "name": "Math", "import": "sk_toolfilter.demo:MathPlugin"},
            ],
            "tool_filtering": {"search_method": "bm25", "top_k": 2},
        },
        base_dir=tmp_path,
    )
    async with await open_toolset(spec) as tools:
        sent = await tools.manager.filter_tools("add 2 and 3")
        every_time_tool = [n for n in tools.manager.index.names if n.startswith("Time-")]
    assert set(every_time_tool) <= set(sent) and any(n.startswith("Math-") for n in sent)


def holodeck_agent(**extra):
    return {
        "name": "ticket-routing",
        "model": {"provider": "openai", "name": "gpt-4o-mini", "temperature": 0.1},
        "instructions": {"inline": "Route tickets."},
        "tools": [{"type": "plugin", "name": "Time", "import": "sk_toolfilter.demo:TimePlugin", **extra}],
        "response_format": {
            "type": "object",
            "properties": {"category": {"type": "string", "enum": ["billing", "technical"]}},
            "required": ["category"],
        },
    }


def test_holodeck_defer_loading_and_response_format_keep_their_meaning(tmp_path):
    eager = parse_agent(holodeck_agent(defer_loading=False), base_dir=tmp_path)
    deferred = parse_agent(holodeck_agent(defer_loading=True), base_dir=tmp_path)
    assert eager.tools[0].always_include and not deferred.tools[0].always_include
    response_format = eager.model.options["response_format"]
    assert response_format["type"] == "json_schema" and response_format["json_schema"]["name"] == "ticket-routing"
    assert response_format["json_schema"]["schema"]["required"] == ["category"]


async def test_a_holodeck_response_format_reaches_the_wire(tmp_path):
    from sk_toolfilter.agents.agent import load_agent
    from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply

    spec = parse_agent(holodeck_agent(), base_dir=tmp_path)
    transport = RecordingTransport([text_reply('{"category": "billing"}')])
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        await loaded.agent.get_response(messages="I was charged twice")
    sent = transport.requests[0]["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["schema"]["properties"]["category"]["enum"] == [
        "billing",
        "technical",
    ]


def test_a_holodeck_response_format_never_hides_a_broken_model_options(tmp_path):
    import pytest

    from sk_toolfilter import ConfigError

    data = holodeck_agent()
    data["model"] = {**data["model"], "options": "not a mapping"}
    with pytest.raises(ConfigError, match=r"model\.options"):
        parse_agent(data, base_dir=tmp_path)
