"""``sk-toolfilter serve``: the bundled agent's catalog behind ranked search for a real MCP client."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]
TOOL_LINE = re.compile(r"^([A-Za-z0-9_]+-[A-Za-z0-9_]+)", re.MULTILINE)


def gateway_agent(tmp_path: Path, **tool_filtering: object) -> Path:
    """The bundled agent with `Messaging-send_email` excluded, its sandbox and learning file in `tmp_path`."""
    data = yaml.safe_load((ROOT / "agent.yaml").read_text())
    for source in data["tools"]:
        if "init" in source:
            source["init"]["root"] = str(tmp_path / "sandbox")
    data["tool_filtering"].update({"exclude": ["Messaging-send_email"], **tool_filtering})
    shutil.copytree(ROOT / "instructions", tmp_path / "instructions", dirs_exist_ok=True)
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def shown(text: str) -> list[str]:
    """The tool names a search answer lists, in order (its footer aside)."""
    return TOOL_LINE.findall(text.rsplit("\n[", 1)[0])


async def test_a_real_mcp_client_over_stdio_finds_calls_and_is_refused_the_excluded_tool(tmp_path):
    path = gateway_agent(tmp_path)
    queries = [
        q if isinstance(q, dict) else {"query": q}
        for q in yaml.safe_load((ROOT / "agent.yaml").read_text())["sample_queries"]
    ]
    server = StdioServerParameters(command=sys.executable, args=["-m", "sk_toolfilter.cli", "serve", str(path)])
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = [t.name for t in (await session.list_tools()).tools]
        assert listed[:3] == ["search_tools", "describe_tool", "call_tool"] and len(listed) <= 8
        hits = 0
        for item in queries:
            result = await session.call_tool("search_tools", {"query": item["query"]})
            names = shown(result.content[0].text)
            assert "Messaging-send_email" not in names  # never found
            hits += bool(set(item.get("expect") or []) & set(names[:5])) or not item.get("expect")
        assert hits >= len(queries) - 1, hits
        found = await session.call_tool("search_tools", {"query": "convert 10 km to miles", "limit": "3"})
        assert "Math-convert_units" in shown(found.content[0].text)[:3]  # a number given as a string
        arguments = {"value": "10", "from_unit": "km", "to_unit": "mi"}
        ran = await session.call_tool("call_tool", {"name": "Math-convert_units", "arguments": arguments})
        assert not ran.isError and ran.content[0].text == "6.21371 mi"
        described = await session.call_tool("describe_tool", {"name": "Math.convert_units"})  # a near-miss name
        assert not described.isError and '"from_unit"' in described.content[0].text
        for tool, args in (("describe_tool", {"name": "Messaging-send_email"}), ("call_tool", {
            "name": "Messaging-send_email", "arguments": {"to": "a@b.c", "subject": "s", "body": "b"}
        })):  # fmt: skip
            refused = await session.call_tool(tool, args)
            assert refused.isError and "Messaging-send_email" in refused.content[0].text
    outbox = tmp_path / "sandbox"
    assert not any("a@b.c" in p.read_text(errors="ignore") for p in outbox.rglob("*") if p.is_file())  # never ran


async def test_a_sessions_search_then_call_is_learned_in_its_scope_and_read_back(tmp_path):
    from mcp.shared.memory import create_connected_server_and_client_session

    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.gateway.desk import GatewayDesk
    from sk_toolfilter.gateway.mcp_server import build_server

    path = gateway_agent(tmp_path, learning={"scope": "team"})
    async with await open_toolset(path) as tools:
        desk = GatewayDesk(tools.manager, tools.kernel, scope="acme")
        server = build_server(desk)
        query = "how far is 10 km in miles"
        async with create_connected_server_and_client_session(server) as session:
            await session.call_tool("search_tools", {"query": query})
            arguments = {"value": 10, "from_unit": "km", "to_unit": "mi"}
            await session.call_tool("call_tool", {"name": "Math-convert_units", "arguments": arguments})
            await session.call_tool("call_tool", {"name": "Math-add", "arguments": {"a": 1, "b": 2}})  # not found
        learned = tools.manager.learning.memory.rows()
        assert [row.tools for row in learned] == [("Math-convert_units",)]  # only what a search found
        scopes = tools.manager.learning.memory.scopes()
        assert list(scopes) == [tools.manager.learning.scope_of("acme")] != [tools.manager.learning.scope_of("globex")]


async def test_a_caller_narrowed_to_some_tools_never_sees_or_runs_the_others(tmp_path):
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.gateway.desk import GatewayDesk, GatewaySession

    async with await open_toolset(gateway_agent(tmp_path)) as tools:
        desk = GatewayDesk(tools.manager, tools.kernel).narrowed({"Math-add", "Math-subtract"}, None)
        session = GatewaySession()
        text = await desk.search(session, "convert 10 km to miles and add numbers")
        assert set(shown(text)) <= {"Math-add", "Math-subtract"}
        refused = await desk.call(session, "Math-convert_units", {"value": 1, "from_unit": "km", "to_unit": "mi"})
        assert refused.is_error and desk.describe("Math-convert_units").is_error
        assert (await desk.call(session, "Math-add", '{"a": "2", "b": 3}')).text in ("5", "5.0")
        for bad in ("[1, 2]", "{", "x" * 200_000):
            assert (await desk.call(session, "Math-add", bad)).is_error
        nothing = GatewayDesk(tools.manager, tools.kernel, allowed=()).narrowed({"Math-add"}, None)
        assert nothing.allowed == frozenset() and (await nothing.call(session, "Math-add", {"a": 1, "b": 2})).is_error


@pytest.mark.parametrize("query", ["", "delete"])
async def test_destructive_tools_are_marked_in_search_and_describe(tmp_path, query):
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.gateway.desk import GatewayDesk, GatewaySession

    async with await open_toolset(gateway_agent(tmp_path)) as tools:
        desk = GatewayDesk(tools.manager, tools.kernel)
        text = await desk.search(GatewaySession(), query, limit=60)
        marked = [line for line in text.splitlines() if line.startswith("Files-delete_file")]
        assert marked and all("[destructive]" in line for line in marked)
        assert not any("[destructive]" in line for line in text.splitlines() if line.startswith("Math-"))
        assert "[destructive]" in desk.describe("Files-delete_file").text
        assert json.loads(desk.describe("Math-add").text.split("input schema: ", 1)[1])["type"] == "object"
