"""HoloDeck's published research-agent file runs unchanged: validate, search, report, an agent turn.

Its MCP servers start with ``npx -y <package>``; the test folder links the packages that
``.ci/install-mcp-servers`` installed, so npx finds them locally (no download). Its
``database: {provider: chromadb}`` is a real Chroma server (``.ci/install-chroma``).
"""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from sk_toolfilter.agents.agent import load_agent
from sk_toolfilter.agents.agent_file import load_agent_file
from sk_toolfilter.cli import main
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply
from tests.test_mcp_servers import server_bin

FIXTURE = Path(__file__).parent / "fixtures" / "holodeck"


def place_holodeck_agent(source: Path, folder: Path, monkeypatch, chroma_url: str) -> Path:
    """A HoloDeck agent folder copied unchanged to `folder`, its npx packages at hand, its Chroma
    server running (``database: chromadb`` without a URL reads Chroma's own CHROMA_SERVER_* variables)."""
    host, port = chroma_url.removeprefix("http://").split(":")
    monkeypatch.setenv("CHROMA_SERVER_HOST", host)
    monkeypatch.setenv("CHROMA_SERVER_HTTP_PORT", port)
    npm = Path(server_bin("npm/node_modules/.bin/mcp-server-memory")).parents[2]
    shutil.copytree(source, folder)
    (folder / "node_modules").symlink_to(npm / "node_modules")
    (folder / "package.json").symlink_to(npm / "package.json")
    monkeypatch.setenv("MEMORY_FILE_PATH", str(folder.parent / "memory.jsonl"))
    return folder / "agent.yaml"


@pytest.fixture
def holodeck_agent(tmp_path, monkeypatch, chroma_server) -> Path:
    """The research-agent example, ready to run (see :func:`place_holodeck_agent`)."""
    return place_holodeck_agent(FIXTURE, tmp_path / "research-agent", monkeypatch, chroma_server)


def test_validate_loads_every_tool_and_names_the_holodeck_only_keys_once(holodeck_agent, capsys, caplog):
    assert main(["validate", str(holodeck_agent)]) == 0
    out = capsys.readouterr().out
    assert "search_papers: 1 tool\n" in out and "memory: 9 tools" in out and "thinking: 1 tool\n" in out
    ignored = [r.getMessage() for r in caplog.records if "have no meaning here (HoloDeck settings)" in r.getMessage()]
    assert len(ignored) == 1 and "author, evaluations have no meaning" in ignored[0]


async def test_a_turn_offers_the_pinned_vectorstore_tool_and_returns_passages(holodeck_agent):
    transport = RecordingTransport(
        [tool_call_reply(("vectorstore-search_papers", {"query": "papers about residual networks"})), text_reply("ok")]
    )
    spec = load_agent_file(holodeck_agent)
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        await loaded.agent.get_response(messages="create an entity in the knowledge graph for Ada")
    first = transport.requests[0]
    assert "vectorstore-search_papers" in transport.tool_names(0)  # pinned by its bare name
    assert any(name.startswith("memory-") for name in transport.tool_names(0))
    assert first["temperature"] == 0.3 and first.get("max_tokens", first.get("max_completion_tokens")) == 1000
    assert "he2016" in transport.requests[1]["messages"][-1]["content"]


def test_search_and_report_run_on_it_offline(holodeck_agent, tmp_path, capsys):
    assert main(["search", str(holodeck_agent), "store a fact in the knowledge graph", "--explain"]) == 0
    assert "memory-" in capsys.readouterr().out
    assert main(["report", str(holodeck_agent), "--out", str(tmp_path / "report")]) == 0
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    # The file's test_cases are the report's queries; the bare expected tool name resolves.
    assert [q["query"] for q in report["queries"]] == ["Find recent papers on machine learning"]
    assert report["queries"][0]["expected"] == ["vectorstore-search_papers"]
    assert report["queries"][0]["expected_sent"] is True


def test_holodeck_settings_map_onto_this_format():
    from sk_toolfilter.agents.agent_file import parse_agent

    spec = parse_agent(
        {
            "name": "a",
            "model": {"provider": "ollama", "name": "llama3.2:latest", "temperature": 0.1, "auth_provider": "x"},
            "instructions": {"inline": "Be brief."},
            "tools": [{"type": "mcp", "name": "m", "command": "npx", "timeout": 7, "load_tools": True}],
        }
    )
    assert spec.model.provider == "openai" and spec.model.base_url == "http://localhost:11434/v1"
    assert spec.model.options == {"temperature": 0.1}
    assert spec.instructions_text() == "Be brief."
    assert spec.tools[0].startup_timeout_seconds == 7


def test_test_cases_become_sample_queries_and_an_unknown_expected_tool_is_an_error(tmp_path, capsys):
    from sk_toolfilter.agents.agent_file import parse_agent

    spec = parse_agent(
        {"name": "a", "test_cases": [{"input": "add 2 and 3", "expected_tools": ["add"]}, {"ground_truth": "x"}]}
    )
    assert [(q.query, q.expect) for q in spec.sample_queries] == [("add 2 and 3", ["add"])]
    agent = tmp_path / "agent.yaml"
    tools = [{"type": "plugin", "name": "Math", "import": "sk_toolfilter.demo:MathPlugin"}]
    cases = [{"input": "add 2 and 3", "expected_tools": ["Math-addd"]}]
    agent.write_text(
        yaml.safe_dump({"name": "a", "tools": tools, "test_cases": cases, "tool_filtering": {"search_method": "bm25"}})
    )
    assert main(["report", str(agent), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "sample_queries[0].expect" in err and "Math-addd" in err and "Math-add" in err


async def test_a_min_similarity_score_set_for_another_model_is_not_applied_and_says_so(tmp_path, caplog):
    from sk_toolfilter.agents.agent import open_toolset

    (tmp_path / "faq.md").write_text("Refunds are issued within 5 business days to the original card.")
    tool = {
        "type": "vectorstore",
        "name": "faq",
        "source": "faq.md",
        "min_similarity_score": 0.99,
        "embedding_model": "text-embedding-3-small",
    }
    agent = tmp_path / "agent.yaml"
    agent.write_text(yaml.safe_dump({"name": "a", "tools": [tool], "tool_filtering": {"search_method": "bm25"}}))
    async with await open_toolset(agent) as tools:
        answer = str(await tools.kernel.invoke(plugin_name="vectorstore", function_name="faq", query="refund"))
    assert "Refunds are issued" in answer  # 0.99 would have dropped it
    assert "min_similarity_score 0.99 was set for 'text-embedding-3-small'" in caplog.text
