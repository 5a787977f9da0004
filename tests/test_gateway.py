"""``sk-toolfilter serve``: the bundled agent's catalog behind ranked search for a real MCP client."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
import yaml
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client

from tests.conftest import free_port, require_server

ROOT = Path(__file__).resolve().parents[1]
TOOL_LINE = re.compile(r"^([A-Za-z0-9_]+-[A-Za-z0-9_]+)", re.MULTILINE)
SERVERS = os.environ.get("SK_TOOLFILTER_MCP_SERVERS", "")
MATH_TOKEN, OPS_TOKEN = "math-token-" + "7" * 24, "ops-token-" + "5" * 24


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


@contextlib.contextmanager
def gateway_over_http(path: Path, *options: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """``sk-toolfilter serve PATH --http`` on a free loopback port until it says it serves; its URL.
    Stopped with SIGTERM afterwards (learning is written on the way out)."""
    port = free_port()
    command = [sys.executable, "-m", "sk_toolfilter.cli", "serve", str(path), "--http", f"127.0.0.1:{port}", *options]
    process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    assert process.stderr is not None
    said: list[str] = []
    for line in process.stderr:  # until it says where it serves, or exits
        said.append(line)
        if "serving MCP on" in line:
            break
    else:
        process.wait()
        pytest.fail("the gateway did not start:\n" + "".join(said))
    threading.Thread(target=lambda: said.extend(process.stderr or ()), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 0, "".join(said)


@contextlib.asynccontextmanager
async def http_session(url: str, token: str, **headers: str):
    headers = {"Authorization": f"Bearer {token}", **headers}
    async with streamablehttp_client(url, headers=headers) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def search_then_call(url: str, query: str, tool: str, arguments: dict[str, object]) -> None:
    """One session over HTTP searches `query`, finds `tool` and runs it (learned: found, then called)."""
    async with streamablehttp_client(url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        assert tool in shown((await session.call_tool("search_tools", {"query": query})).content[0].text)
        assert not (await session.call_tool("call_tool", {"name": tool, "arguments": arguments})).isError


def cli(*argv: str) -> str:
    """``sk-toolfilter ARGV`` in its own process (as a user runs it beside a serving gateway); its stdout."""
    command = [sys.executable, "-m", "sk_toolfilter.cli", *argv]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def callers_file(tmp_path: Path) -> Path:
    path = tmp_path / "callers.yaml"
    callers = [
        {"name": "mathbot", "token_env": "MATH_TOKEN", "allow": ["Math-*"], "scope": "team-a"},
        {"name": "ops", "token_sha256": hashlib.sha256(OPS_TOKEN.encode()).hexdigest()},
    ]
    path.write_text(yaml.safe_dump({"callers": callers}))
    return path


async def test_over_http_each_token_sees_runs_and_learns_only_its_own(tmp_path):
    learned = tmp_path / "learned.bin"
    path = gateway_agent(tmp_path, learning={"scope": "team", "file": str(learned)})
    options = ("--callers", str(callers_file(tmp_path)), "--scope-header", "X-Team")
    with gateway_over_http(path, *options, env={"MATH_TOKEN": MATH_TOKEN}) as url:
        opening = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}
        }}  # fmt: skip
        accept = {"Accept": "application/json, text/event-stream"}
        async with httpx.AsyncClient() as http:
            for auth in ({}, {"Authorization": "Bearer not-a-known-token-0123456789"}, {"Authorization": MATH_TOKEN}):
                refused = await http.post(url, json=opening, headers={**accept, **auth})
                assert refused.status_code == 401 and "mcp-session-id" not in refused.headers
            opened = await http.post(url, json=opening, headers={**accept, "Authorization": f"Bearer {MATH_TOKEN}"})
            session_id = opened.headers["mcp-session-id"]
            listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
            stolen = {**accept, "Authorization": f"Bearer {OPS_TOKEN}", "Mcp-Session-Id": session_id}
            assert (await http.post(url, json=listing, headers=stolen)).status_code == 404  # not the opener's token
        async with http_session(url, MATH_TOKEN) as math:
            text = await math.call_tool("search_tools", {"query": "send a message to bob, then convert 10 km to miles"})
            names = shown(text.content[0].text)
            assert "Math-convert_units" in names and all(name.startswith("Math-") for name in names)
            for tool in ("Messaging-send_direct_message", "Files-list_files"):
                refused = await math.call_tool(
                    "call_tool", {"name": tool, "arguments": {"user": "bob", "message": "hi"}}
                )
                assert refused.isError and (await math.call_tool("describe_tool", {"name": tool})).isError
            arguments = {"value": 10, "from_unit": "km", "to_unit": "mi"}
            ran = await math.call_tool("call_tool", {"name": "Math-convert_units", "arguments": arguments})
            assert ran.content[0].text == "6.21371 mi"
        async with http_session(url, OPS_TOKEN) as ops:
            found = await ops.call_tool("search_tools", {"query": "send a direct message to bob"})
            assert "Messaging-send_direct_message" in shown(found.content[0].text)[:3]
        async with http_session(url, OPS_TOKEN, **{"X-Team": "blue"}) as blue:  # the scope a proxy's header names
            await blue.call_tool("search_tools", {"query": "add two numbers"})
            await blue.call_tool("call_tool", {"name": "Math-add", "arguments": {"a": 1, "b": 2}})

    def learned_in(scope: str) -> dict[str, int]:
        return json.loads(cli("learned", str(path), "--scope", scope, "--json"))["learned_tools"]

    assert learned_in("team-a") == {"Math-convert_units": 1}  # the math caller's scope, on the way out
    assert learned_in("ops") == {}  # the other caller found nothing it called
    assert learned_in("blue") == {"Math-add": 1}


@pytest.mark.parametrize("sync_seconds", [0, 60], ids=["written-before-forget", "in-memory-at-forget"])
async def test_forget_while_the_gateway_serves_wipes_what_it_learned_before_and_keeps_what_came_after(
    tmp_path, sync_seconds
):
    learned = tmp_path / "learned.npz"
    path = gateway_agent(tmp_path, learning={"file": str(learned), "sync_seconds": sync_seconds})

    with gateway_over_http(path) as url:
        await search_then_call(url, "convert 10 km to miles", "Math-convert_units",
                               {"value": 10, "from_unit": "km", "to_unit": "mi"})  # fmt: skip
        if sync_seconds == 0:  # the gateway writes off its event loop: wait until the row is in the file
            while not learned.exists() or json.loads(cli("learned", "--file", str(learned), "--json"))["requests"] < 1:
                await anyio.sleep(0.05)
        said = cli("forget", str(path))
        assert ("1 learned requests forgotten" if sync_seconds == 0 else "nothing was learned") in said
        await search_then_call(url, "add two numbers", "Math-add", {"a": 1, "b": 2})
    # On the way out the gateway writes what it learned after the wipe, never what came before it.
    assert json.loads(cli("learned", str(path), "--json"))["learned_tools"] == {"Math-add": 1}


async def test_two_gateway_replicas_on_one_learning_file_keep_what_each_learned(tmp_path):
    learned = tmp_path / "learned.npz"
    path = gateway_agent(tmp_path, learning={"file": str(learned), "sync_seconds": 0})
    asked = {
        "Math-convert_units": ("convert 10 km to miles", {"value": 10, "from_unit": "km", "to_unit": "mi"}),
        "Math-add": ("add two numbers", {"a": 1, "b": 2}),
    }
    with gateway_over_http(path) as first, gateway_over_http(path) as second:
        for url, (tool, (query, arguments)) in zip((first, second), asked.items(), strict=True):
            await search_then_call(url, query, tool, arguments)
    # Each replica merged the other's rows into the file under its lock, on every write and on the way out.
    summary = json.loads(cli("learned", str(path), "--json"))
    assert summary["learned_tools"] == {"Math-convert_units": 1, "Math-add": 1}


async def test_a_request_body_over_the_bound_is_refused_before_it_is_read_whole(tmp_path):
    MAX_BODY_BYTES = 4 * 2**20  # the MCP SDK's bound (mcp>=1.30 in pyproject), before the body is read whole
    flood = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "' + b"x" * MAX_BODY_BYTES + b'"}}'

    async def chunked():  # no Content-Length: counted as it comes
        for start in range(0, len(flood), 2**16):
            yield flood[start : start + 2**16]

    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with gateway_over_http(gateway_agent(tmp_path)) as url:
        async with httpx.AsyncClient(timeout=120) as http:
            assert (await http.post(url, content=flood, headers=headers)).status_code == 413
            assert (await http.post(url, content=chunked(), headers=headers)).status_code == 413
        async with streamablehttp_client(url) as (read, write, _), ClientSession(read, write) as session:
            await session.initialize()  # the gateway serves on
            found = await session.call_tool("search_tools", {"query": "convert 10 km to miles"})
            assert "Math-convert_units" in shown(found.content[0].text)


def test_serve_refuses_to_listen_beyond_loopback_without_tokens_and_checks_the_callers_file(tmp_path):
    path = gateway_agent(tmp_path)
    serve = [sys.executable, "-m", "sk_toolfilter.cli", "serve", str(path)]
    env = {k: v for k, v in os.environ.items() if k != "SK_TOOLFILTER_GATEWAY_TOKEN"}
    public = subprocess.run([*serve, "--http", f"0.0.0.0:{free_port()}"], capture_output=True, text=True, env=env)
    assert public.returncode == 2 and "--callers FILE" in public.stderr and "127.0.0.1" in public.stderr
    bad = tmp_path / "bad.yaml"
    for callers, message in (
        ([{"name": "a", "token_env": "SHORT"}], "at least 16 characters"),
        ([{"name": "a", "token_env": "UNSET_TOKEN_XYZ"}], "$UNSET_TOKEN_XYZ is not set"),
        ([{"name": "a", "token_env": "MATH_TOKEN", "allow": ["Nope-*"]}], "allow 'Nope-*' names no visible tool"),
        ([{"name": "a", "token_env": "MATH_TOKEN", "token_sha256": "0" * 64}], "exactly one of token_env"),
        ([{"name": "a", "token_env": "MATH_TOKEN", "allow": ["Messaging-send_email"]}], "names no visible tool"),
    ):
        bad.write_text(yaml.safe_dump({"callers": callers}))
        run = subprocess.run(
            [*serve, "--http", str(free_port()), "--callers", str(bad)],
            capture_output=True, text=True, env={**env, "MATH_TOKEN": MATH_TOKEN, "SHORT": "tiny"},
        )  # fmt: skip
        assert run.returncode == 2 and message in run.stderr, run.stderr
        assert "Traceback" not in run.stderr and MATH_TOKEN not in run.stderr


async def test_found_tools_join_the_sessions_list_with_list_changed(tmp_path):
    from mcp.shared.memory import create_connected_server_and_client_session

    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.gateway.desk import MAX_EXPOSED, GatewayDesk
    from sk_toolfilter.gateway.mcp_server import build_server

    changed = anyio.Event()

    async def on_message(message: object) -> None:
        if getattr(getattr(message, "root", None), "method", "") == "notifications/tools/list_changed":
            changed.set()

    async with await open_toolset(gateway_agent(tmp_path)) as tools:
        server = build_server(GatewayDesk(tools.manager, tools.kernel, expose_found=True))
        async with create_connected_server_and_client_session(server, message_handler=on_message) as session:
            assert [t.name for t in (await session.list_tools()).tools] == [
                "search_tools",
                "describe_tool",
                "call_tool",
            ]
            found = await session.call_tool("search_tools", {"query": "convert 10 km to miles", "limit": 3})
            await changed.wait()
            listed = [t.name for t in (await session.list_tools()).tools]
            assert listed[3:] == shown(found.content[0].text) and "Math-convert_units" in listed
            ran = await session.call_tool("Math-convert_units", {"value": "10", "from_unit": "km", "to_unit": "mi"})
            assert ran.content[0].text == "6.21371 mi"
            found_all: set[str] = set()
            for item in yaml.safe_load((ROOT / "agent.yaml").read_text())["sample_queries"]:
                query = item["query"] if isinstance(item, dict) else item
                answer = await session.call_tool("search_tools", {"query": query, "limit": 8})
                found_all |= set(shown(answer.content[0].text))
            listed = [t.name for t in (await session.list_tools()).tools]
            assert len(found_all) > MAX_EXPOSED and len(listed) == 3 + MAX_EXPOSED  # bounded: the latest found
            assert set(listed[3:]) <= found_all and "Messaging-send_email" not in listed  # never a hidden tool
            refused = await session.call_tool("Messaging-send_email", {"to": "a@b.c", "subject": "s", "body": "b"})
            assert refused.isError


async def test_a_span_per_search_and_call_without_the_query_unless_sensitive(tmp_path, monkeypatch):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.gateway.desk import GatewayDesk, GatewaySession

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)
    for switch, sensitive in (("on", False), ("sensitive", True)):
        monkeypatch.setenv("SK_TOOLFILTER_TELEMETRY", switch)
        spans.clear()
        async with await open_toolset(gateway_agent(tmp_path)) as tools:
            desk, session = GatewayDesk(tools.manager, tools.kernel), GatewaySession()
            await desk.search(session, "convert 10 km to miles", limit=3)
            await desk.call(session, "Math-convert_units", {"value": 10, "from_unit": "km", "to_unit": "mi"})
            await desk.call(session, "Messaging-send_email", {"to": "a@b.c"})
        by_name = {}
        for span in spans.get_finished_spans():
            by_name.setdefault(span.name, []).append(dict(span.attributes or {}))
        (search,), (ran, refused) = by_name["gateway search"], by_name["gateway call"]
        assert (
            "Math-convert_units" in search["sk_toolfilter.tools.shown"] and search["sk_toolfilter.tools.matched"] >= 1
        )
        assert ("sk_toolfilter.query" in search) is sensitive
        assert ran["sk_toolfilter.tool.name"] == "Math-convert_units" and ran["sk_toolfilter.learned"] is True
        assert refused["sk_toolfilter.gateway.error"] is True and refused["sk_toolfilter.learned"] is False
        assert "Messaging-send_email" not in json.dumps(refused)  # a hidden tool's name is not recorded either


def inspector() -> str:
    """The MCP Inspector's CLI (``@modelcontextprotocol/inspector-cli``), installed by .ci/install-mcp-servers."""
    return require_server(
        str(Path(SERVERS, "npm/node_modules/@modelcontextprotocol/inspector-cli/build/index.js")) if SERVERS else None,
        "the MCP Inspector CLI",
        "run .ci/install-mcp-servers DIR and set SK_TOOLFILTER_MCP_SERVERS=DIR",
    )


def run_inspector(*arguments: str) -> dict:
    cli = inspector()  # it reads its own package.json relative to the working directory: run it from there
    run = subprocess.run(["node", cli, *arguments], capture_output=True, text=True, cwd=Path(cli).parent)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout)


def test_the_mcp_inspector_cli_drives_the_gateway_over_stdio_and_http(tmp_path):
    path = gateway_agent(tmp_path)
    serve = [sys.executable, "-m", "sk_toolfilter.cli", "serve", str(path)]
    listed = run_inspector(*serve, "--method", "tools/list")
    assert [t["name"] for t in listed["tools"]] == ["search_tools", "describe_tool", "call_tool"]
    arguments = '{"value": 10, "from_unit": "km", "to_unit": "mi"}'
    ran = run_inspector(*serve, "--method", "tools/call", "--tool-name", "call_tool",
                        "--tool-arg", "name=Math-convert_units", f"arguments={arguments}")  # fmt: skip
    assert ran["content"][0]["text"] == "6.21371 mi" and not ran["isError"]
    env = {"SK_TOOLFILTER_GATEWAY_TOKEN": OPS_TOKEN}
    with gateway_over_http(path, env=env) as url:
        bearer = f"Authorization: Bearer {OPS_TOKEN}"
        found = run_inspector(url, "--transport", "http", "--header", bearer, "--method", "tools/call",
                              "--tool-name", "search_tools", "--tool-arg", "query=add two numbers")  # fmt: skip
        assert "Math-add" in shown(found["content"][0]["text"])[:3]


async def test_a_registry_server_and_a_failing_one_behind_the_gateway(tmp_path):
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.gateway.desk import GatewayDesk, GatewaySession

    everything = require_server(
        str(Path(SERVERS, "npm/node_modules/.bin/mcp-server-everything")) if SERVERS else None,
        "the registry MCP servers",
        "run .ci/install-mcp-servers DIR and set SK_TOOLFILTER_MCP_SERVERS=DIR",
    )
    path = gateway_agent(tmp_path)
    data = yaml.safe_load(path.read_text())
    fault = str(ROOT / "tests" / "fixtures" / "mcp_fault_server.py")
    data["tools"] += [
        {"type": "mcp", "name": "Everything", "command": everything, "args": ["stdio"]},
        {"type": "mcp", "name": "Faulty", "command": sys.executable, "args": [fault, "serve"], "request_timeout": 1.5},
    ]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    async with await open_toolset(path) as tools:
        desk, session = GatewayDesk(tools.manager, tools.kernel), GatewaySession()
        assert "Everything-echo" in shown(await desk.search(session, "echo back the message hello"))[:5]
        echoed = await desk.call(session, "Everything-echo", {"message": "hello"})
        assert echoed.text == "Echo: hello" and not echoed.is_error
        hung = await desk.call(session, "Faulty-hang", {})  # bounded by the server's request_timeout
        assert hung.is_error and "within 1.5s (request_timeout_seconds)" in hung.text
        died = await desk.call(session, "Faulty-die", {})
        assert died.is_error and "stopped while running tool 'die'" in died.text
        again = await desk.call(session, "Faulty-echo", {"message": "back"})  # restarted on the next call
        assert not again.is_error and "back" in again.text


async def test_a_flooding_tool_reaches_the_client_cut_and_saying_so():
    from semantic_kernel import Kernel
    from semantic_kernel.functions import kernel_function

    from sk_toolfilter import ToolFilterConfig, ToolFilterManager
    from sk_toolfilter.gateway.desk import MAX_RESULT_CHARS, GatewayDesk, GatewaySession

    class Dump:
        @kernel_function(description="Dump the whole audit log.")
        def audit_log(self) -> str:
            return "entry;" * 1_000_000

    kernel = Kernel()
    kernel.add_plugin(Dump(), "Audit")
    manager = await ToolFilterManager.from_kernel(kernel, ToolFilterConfig(search_method="bm25"))
    result = await GatewayDesk(manager, kernel).call(GatewaySession(), "Audit-audit_log", {})
    assert len(result.text) < MAX_RESULT_CHARS + 100 and result.text.endswith("of 6,000,000 characters]")


async def test_a_tool_whose_parameter_is_named_settings_gets_it_as_an_argument():
    from semantic_kernel import Kernel
    from semantic_kernel.functions import kernel_function

    from sk_toolfilter import ToolFilterConfig, ToolFilterManager
    from sk_toolfilter.agent_framework import kernel_function_tool
    from sk_toolfilter.gateway.desk import GatewayDesk, GatewaySession

    class Display:  # `settings` is also KernelArguments' own keyword (execution settings)
        @kernel_function(description="Apply display settings.")
        def apply(self, settings: str, level: int = 1) -> str:
            return f"applied {settings} at {level}"

    kernel = Kernel()
    kernel.add_plugin(Display(), "Display")
    manager = await ToolFilterManager.from_kernel(kernel, ToolFilterConfig(search_method="bm25"))
    arguments = {"settings": "dark", "level": 2}
    result = await GatewayDesk(manager, kernel).call(GatewaySession(), "Display-apply", arguments)
    assert (result.text, result.is_error) == ("applied dark at 2", False)
    as_agent_framework_tool = kernel_function_tool(kernel.get_function("Display", "apply"), kernel)
    [content] = await as_agent_framework_tool.invoke(settings="dark", level=3)  # and as an Agent Framework tool
    assert content.text == "applied dark at 3"


async def test_a_search_without_a_clear_match_shows_the_nearest_tools_and_small_talk_none(tmp_path):
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.gateway.desk import GatewayDesk, GatewaySession

    async with await open_toolset(gateway_agent(tmp_path)) as tools:
        desk = GatewayDesk(tools.manager, tools.kernel)
        text = await desk.search(GatewaySession(), "Is nginx running on the proxy box?")
        assert shown(text) and "none a clear match" in text and "Messaging-send_email" not in shown(text)
        narrowed = desk.narrowed({"Math-add"}, None)
        assert set(shown(await narrowed.search(GatewaySession(), "reboot the database cluster"))) <= {"Math-add"}
        assert shown(await desk.search(GatewaySession(), "thanks!")) == []


async def test_a_definition_only_catalog_is_searchable_and_says_it_cannot_be_run(tmp_path):
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.gateway.desk import GatewayDesk, GatewaySession

    path = gateway_agent(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["tools"].append({"type": "catalog", "name": "Shop", "path": str(ROOT / "tests" / "fixtures" / "tools.jsonl")})
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    async with await open_toolset(path) as tools:
        desk, session = GatewayDesk(tools.manager, tools.kernel), GatewaySession()
        assert "shop-find_product" in shown(await desk.search(session, "search the product catalog for lamps"))[:3]
        refused = await desk.call(session, "shop-find_product", {"keyword": "lamp"})
        assert refused.is_error and "definition-only" in refused.text


@pytest.mark.parametrize(
    ("how", "tool_filtering", "allowed"),
    [
        ("excluded", {"exclude": ["Messaging-send_email", "Notes-delete_note"]}, None),
        ("disabled", {"tools_overrides": {"Notes-delete_note": {"enabled": False}}}, None),
        ("not allowed", {"always_include": ["Notes-delete_note"]}, {"Notes-add_note", "Notes-list_notes"}),
    ],
)
async def test_a_hidden_tool_is_never_listed_found_described_or_run(tmp_path, how, tool_filtering, allowed):
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.gateway.desk import GatewayDesk, GatewaySession

    path = gateway_agent(tmp_path, **tool_filtering)  # (pinned for the agent, not for this caller)
    async with await open_toolset(path) as tools:
        desk = GatewayDesk(tools.manager, tools.kernel, expose_found=True).narrowed(allowed, None)
        session = GatewaySession()
        await tools.kernel.invoke(tools.kernel.get_function("Notes", "add_note"), title="keep", body="me")
        for query in ("delete a note", "remove the note called keep", ""):
            assert "Notes-delete_note" not in shown(await desk.search(session, query, limit=60)), how
        assert "Notes-delete_note" not in [t.name for t in desk.listed(session)]
        assert desk.describe("Notes.delete_note").is_error
        refused = await desk.call(session, "Notes-delete_note", {"title": "keep"})
        assert refused.is_error and not desk.listed_directly("Notes-delete_note", session)
        notes = await tools.kernel.invoke(tools.kernel.get_function("Notes", "list_notes"))
        assert "keep" in str(notes), how  # never ran
