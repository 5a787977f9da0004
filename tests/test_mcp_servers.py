"""Real MCP servers from the registries, through a filtered agent on the offline chat transport.

Each server loads, its tools are indexed and selected for a request, and one tool is called by the
(scripted) model through SK's auto-invoke loop and returns the right result on the wire. The npm and
PyPI servers are installed by ``.ci/install-mcp-servers`` (``bash .ci/run`` does it and sets
``SK_TOOLFILTER_MCP_SERVERS``); the HTTP server is started here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sk_toolfilter import ToolSourceError
from sk_toolfilter.agents.agent import load_agent
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply
from tests.conftest import free_port, require_server, serve_on_loopback

FIXTURES = Path(__file__).parent / "fixtures"
SERVERS = os.environ.get("SK_TOOLFILTER_MCP_SERVERS", "")


def server_bin(relative: str) -> str:
    """A registry server installed by .ci/install-mcp-servers; skip (or fail, in CI) when absent."""
    return require_server(
        str(Path(SERVERS, relative)) if SERVERS else None,
        relative,
        "run .ci/install-mcp-servers DIR and set SK_TOOLFILTER_MCP_SERVERS=DIR",
    )


@dataclass
class Case:
    """One server: how to start it, a request, the tool the model calls, what its result contains."""

    source: dict[str, Any]
    query: str
    tool: str
    arguments: dict[str, Any]
    expect: list[str]
    min_tools: int = 1
    env: dict[str, str] = field(default_factory=dict)


def cases(tmp: Path) -> dict[str, Case]:
    (tmp / "files").mkdir()
    (tmp / "files" / "hello.txt").write_text("hello from the filesystem server\n")
    repo = tmp / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    npm = "npm/node_modules/.bin/"
    return {
        "everything": Case(
            {"command": server_bin(npm + "mcp-server-everything"), "args": ["stdio"]},
            "echo back the message hello",
            "Everything-echo",
            {"message": "hello"},
            ["Echo: hello"],
            min_tools=10,
        ),
        "sequential-thinking": Case(
            {"command": server_bin(npm + "mcp-server-sequential-thinking")},
            "think step by step about this problem with sequential thinking",
            "Thinking-sequentialthinking",
            {"thought": "First, list the facts.", "nextThoughtNeeded": True, "thoughtNumber": 1, "totalThoughts": 2},
            ['"thoughtNumber":1', '"totalThoughts":2'],
        ),
        "memory": Case(
            {"command": server_bin(npm + "mcp-server-memory"), "env": {"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")}},
            "create an entity in the knowledge graph for Ada, a person",
            "Memory-create_entities",
            {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}]},
            ['"name":"Ada"', '"entityType":"person"'],
            min_tools=9,
        ),
        "filesystem": Case(
            {"command": server_bin(npm + "mcp-server-filesystem"), "args": [str(tmp / "files")]},
            "read the text file hello.txt",
            "Files-read_text_file",
            {"path": str(tmp / "files" / "hello.txt")},
            ["hello from the filesystem server"],
            min_tools=10,
        ),
        "time": Case(
            {"command": server_bin("py/bin/mcp-server-time")},
            "what is the current time in Paris",
            "Time-get_current_time",
            {"timezone": "Europe/Paris"},
            ['"timezone":"Europe/Paris"'],
            min_tools=2,
        ),
        "git": Case(
            {"command": server_bin("py/bin/mcp-server-git"), "args": ["--repository", str(repo)]},
            "show the git status of the working tree",
            "Git-git_status",
            {"repo_path": str(repo)},
            ["On branch main"],
            min_tools=10,
        ),
    }


NAMES = {
    "everything": "Everything",
    "sequential-thinking": "Thinking",
    "memory": "Memory",
    "filesystem": "Files",
    "time": "Time",
    "git": "Git",
}


async def run_case(case: Case, name: str, base_dir: Path) -> tuple[RecordingTransport, Any]:
    spec = parse_agent(
        {
            "name": "t",
            "tools": [{"type": "mcp", "name": name, **case.source}],
            "tool_filtering": {"search_method": "bm25", "top_k": 5},
        },
        base_dir=base_dir,
    )
    transport = RecordingTransport([tool_call_reply((case.tool, case.arguments)), text_reply("done")])
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        counts = dict(loaded.tool_counts)
        await loaded.agent.get_response(messages=case.query)
    return transport, counts


@pytest.mark.parametrize("server", list(NAMES))
async def test_registry_server_loads_is_selected_and_called_through_the_filtered_agent(server, tmp_path):
    case = cases(tmp_path)[server]
    transport, counts = await run_case(case, NAMES[server], tmp_path)
    assert counts[NAMES[server]] >= case.min_tools
    offered = transport.tool_names(0)
    assert case.tool in offered  # selected for the request among the server's tools
    assert len([n for n in offered if not n.startswith("ToolSearch-")]) <= 5
    result = transport.requests[1]["messages"][-1]
    assert result["role"] == "tool"
    for expected in case.expect:
        assert expected in result["content"]
    assert "TextContent(" not in result["content"]  # text, not SK's repr of content objects


async def test_list_valued_types_reach_the_wire_as_the_server_wrote_them(tmp_path):
    case = cases(tmp_path)["sequential-thinking"]
    transport, _ = await run_case(case, "Thinking", tmp_path)
    (tool,) = [t for t in transport.requests[0]["tools"] if t["function"]["name"] == "Thinking-sequentialthinking"]
    properties = tool["function"]["parameters"]["properties"]
    assert properties["nextThoughtNeeded"]["type"] == ["boolean", "string"]


async def test_a_structured_result_reaches_the_model_once_as_compact_json(tmp_path):
    case = Case(
        {"command": server_bin("npm/node_modules/.bin/mcp-server-everything"), "args": ["stdio"]},
        "get structured weather content for Chicago",
        "Everything-get-structured-content",
        {"location": "Chicago"},
        [],
    )
    transport, _ = await run_case(case, "Everything", tmp_path)
    content = transport.requests[1]["messages"][-1]["content"]
    data = json.loads(content)  # one JSON document, not a text plus a repr plus a copy
    assert set(data) >= {"temperature", "conditions"}
    assert content == json.dumps(data, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------------------------------------- HTTP


@pytest.fixture(params=["streamable-http", "sse"])
def http_server(request) -> Iterator[tuple[str, str]]:
    """A local MCP server over HTTP; yields (url, the token it expects)."""
    port, token = free_port(), "tok-" + os.urandom(6).hex()
    command = [sys.executable, str(FIXTURES / "mcp_http_server.py"), str(port), request.param]
    path = "/mcp" if request.param == "streamable-http" else "/sse"
    with serve_on_loopback(command, port, "the HTTP MCP server", env={**os.environ, "EXPECTED_TOKEN": token}):
        yield f"http://127.0.0.1:{port}{path}", token


async def test_an_http_server_is_selected_and_called_with_headers_from_the_environment(
    http_server, tmp_path, monkeypatch
):
    url, token = http_server
    monkeypatch.setenv("NOTES_TOKEN", token)
    spec = parse_agent(
        {
            "name": "t",
            "tools": [
                {"type": "mcp", "name": "Notes", "url": url, "headers": {"Authorization": "Bearer ${NOTES_TOKEN}"}}
            ],
            "tool_filtering": {"search_method": "bm25", "top_k": 3},
        },
        base_dir=tmp_path,
    )
    transport = RecordingTransport(
        [
            tool_call_reply(("Notes-add_note", {"text": "buy milk"})),
            text_reply("saved"),
            tool_call_reply(("Notes-whoami", {})),
            text_reply("ok"),
        ]
    )
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        assert loaded.tool_counts == {"Notes": 3}
        await loaded.agent.get_response(messages="save a short note: buy milk")
        await loaded.agent.get_response(messages="am I authorized? who am I")
    assert "Notes-add_note" in transport.tool_names(0)
    assert transport.requests[1]["messages"][-1]["content"] == "saved note 1"
    assert transport.requests[3]["messages"][-1]["content"] == "authorized"


async def test_an_http_server_that_is_not_there_fails_fast_without_echoing_credentials(tmp_path):
    port = free_port()
    spec = parse_agent(
        {
            "name": "t",
            "tools": [
                {
                    "type": "mcp",
                    "name": "Remote",
                    "url": f"http://user:s3cret@127.0.0.1:{port}/mcp?api-key=k3y",
                    "headers": {"Authorization": "Bearer hunter2"},
                    "startup_timeout_seconds": 120,
                }
            ],
        },
        base_dir=tmp_path,
    )
    started = time.perf_counter()
    with pytest.raises(ToolSourceError) as info:
        await load_agent(spec, chat_service=offline_chat_service(RecordingTransport()))
    message = str(info.value)
    assert time.perf_counter() - started < 60  # refused at once, not at the start-up timeout
    assert f"http://***@127.0.0.1:{port}/mcp?***" in message
    assert "ConnectError" in message or "connect" in message.lower()
    for secret in ("s3cret", "k3y", "hunter2"):
        assert secret not in message


# ------------------------------------------------------------------------------- weak evidence
async def test_a_lone_incidental_word_sends_no_tool_the_encoder_finds_unrelated(tmp_path):
    """Six registry servers in one agent (the issue's setting). "Remember that Alice works at Contoso as a
    data engineer" links to no tool clearly (its closest tool sits at the semantic floor, 0.20 ± an int8
    rounding); BM25 alone matched "data" in the gzip tool's text and "working" in git's, and sent them. A
    shared word now counts only where the encoder agrees, also when one tool is a hair above the floor:
    no word-sharing tool the encoder finds unrelated is sent, whatever side of the floor the closest tool
    lands on this CPU; a tool sent besides the pins is there by its own cosine."""
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.retrieval.search import WEAK_WORD_MARGIN

    everything = cases(tmp_path)
    spec = parse_agent(
        {"name": "six", "tools": [{"type": "mcp", "name": NAMES[s], **everything[s].source} for s in NAMES]},
        base_dir=tmp_path,
    )
    async with await open_toolset(spec) as tools:
        index, floor = tools.manager.index, tools.manager.config.semantic_floor
        for request in ["Remember that Alice works at Contoso as a data engineer", "Forget everything about Bob"]:
            selection = await tools.manager.select(request)
            cosines = index.cosine_scores((await index.embed_queries([request]))[0])
            assert cosines.max() <= floor + WEAK_WORD_MARGIN  # the setting: no tool clearly linked
            sent = [n for n in selection.names if not n.startswith("ToolSearch-")]
            # gzip ("data") and git ("works") share a word; the encoder puts them far below the floor
            assert all(cosines[index.position(n)] > floor for n in sent), (request, sent)
        # Below the floor, explain says why the word-sharing tool was not enough.
        decisions = await tools.manager.explain("Forget everything about Bob")
        echo = [d for d in decisions if d.full_name == "Everything-echo"]
        assert echo and "a shared word is not enough" in echo[0].reason, decisions
        # A request the encoder links is ranked as before.
        assert "Memory-create_entities" in (await tools.manager.select("create entities in the knowledge graph")).names
