"""``type: vectorstore`` tools: passages from a file, in SK's vector store, searchable and pinnable."""

import contextlib
import json
from pathlib import Path

import pytest
from semantic_kernel import Kernel

from sk_toolfilter import ConfigError
from sk_toolfilter.agents.agent import load_agent, open_toolset
from sk_toolfilter.agents.agent_file import load_agent_file, parse_agent
from sk_toolfilter.agents.sources import add_sources
from sk_toolfilter.agents.vectorstore import chunk_text
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply

HOLODECK = Path(__file__).parent / "fixtures" / "holodeck"


def papers_tool(name: str, database: dict) -> dict:
    """An agent mapping with one vectorstore tool over the HoloDeck example's papers."""
    source = str(HOLODECK / "data" / "papers_index.json")
    tool = {"type": "vectorstore", "name": name, "source": source, "database": database}
    tool["allow_outside_agent_folder"] = True  # the fixture data lives in the repository, not beside the agent
    return {"name": "a", "tools": [tool]}


async def test_the_search_function_returns_the_best_passages_with_their_source():
    async with await open_toolset(HOLODECK / "papers_only.yaml") as tools:
        answer = str(
            await tools.kernel.invoke(
                plugin_name="vectorstore", function_name="search_papers", query="retrieval augmented generation"
            )
        )
    first = answer.splitlines()[0]
    assert first.startswith("[1] papers_index.json: lewis2020 (similarity ")
    assert "Retrieval-Augmented Generation" in answer
    assert [line.split("]")[0] for line in answer.splitlines() if line.startswith("[")] == [
        "[1",
        "[2",
        "[3",
        "[4",
        "[5",
    ]  # top_k: 5 passages, numbered


async def test_a_bare_name_pins_the_vectorstore_tool_on_every_request(caplog):
    transport = RecordingTransport(
        [tool_call_reply(("vectorstore-search_papers", {"query": "dense passage retrieval"})), text_reply("ok")]
    )
    spec = load_agent_file(HOLODECK / "papers_only.yaml")
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        assert loaded.manager.config.always_include == ["vectorstore-search_papers"]
        await loaded.agent.get_response(messages="hello there")
    assert "vectorstore-search_papers" in transport.tool_names(0)
    assert "karpukhin2020" in transport.requests[1]["messages"][-1]["content"]
    assert "embedding_model 'text-embedding-3-small' is not used" in caplog.text


def test_chunks_respect_the_size_and_carry_overlap():
    text = "\n\n".join(f"Paragraph {i} " + "word " * 40 for i in range(10))
    chunks = chunk_text(text, 500, 60)
    assert all(len(c) <= 500 + 60 for c in chunks) and len(chunks) >= 4
    assert chunks[1].split()[0] != "Paragraph"  # starts with the previous chunk's tail
    assert chunk_text("x" * 2500, 1000, 0) == ["x" * 1000, "x" * 1000, "x" * 500]


async def test_a_folder_of_markdown_and_text_is_indexed(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "vpn.md").write_text("# VPN\n\nTo reset the VPN token, open the portal and click reset.")
    (tmp_path / "docs" / "lunch.txt").write_text("The canteen serves lunch from noon to two.")
    (tmp_path / "docs" / "image.png").write_bytes(b"\x89PNG")
    spec = parse_agent(
        {"name": "a", "tools": [{"type": "vectorstore", "name": "handbook", "source": "docs", "top_k": 1}]},
        base_dir=tmp_path,
    )
    kernel = Kernel()
    await add_sources(kernel, spec, contextlib.AsyncExitStack())
    answer = str(await kernel.invoke(plugin_name="vectorstore", function_name="handbook", query="reset my vpn token"))
    assert answer.startswith("[1] vpn.md") and "[2]" not in answer


async def test_a_missing_source_is_an_error_naming_the_tool(tmp_path):
    spec = parse_agent(
        {"name": "a", "tools": [{"type": "vectorstore", "name": "kb", "source": "nope"}]}, base_dir=tmp_path
    )
    with pytest.raises(ConfigError, match=r"tools\[0\] \(kb\)\.source: .*nope does not exist"):
        await add_sources(Kernel(), spec, contextlib.AsyncExitStack())


async def test_passages_live_in_a_real_chroma_server(chroma_server, tmp_path):
    import chromadb

    database = {"provider": "chromadb", "connection_string": chroma_server}
    spec = parse_agent(papers_tool("search_papers", database), base_dir=tmp_path)
    for _ in range(2):  # a restart rebuilds the collection instead of piling passages up
        kernel = Kernel()
        await add_sources(kernel, spec, contextlib.AsyncExitStack())
    host, port = chroma_server.rsplit(":", 1)
    stored = chromadb.HttpClient(host=host.split("//")[1], port=int(port)).get_collection("sk_toolfilter_search_papers")
    assert stored.count() == 6
    answer = str(
        await kernel.invoke(plugin_name="vectorstore", function_name="search_papers", query="image recognition")
    )
    assert answer.startswith("[1] papers_index.json: he2016 (similarity ")


async def test_an_unreachable_chroma_is_a_clear_error(tmp_path):
    from sk_toolfilter import ToolSourceError

    spec = parse_agent(papers_tool("kb", {"provider": "chromadb", "connection_string": "http://127.0.0.1:9"}))
    with pytest.raises(ToolSourceError, match=r"tools\[0\] \(kb\): Chroma at http://127.0.0.1:9 is not reachable"):
        await add_sources(Kernel(), spec, contextlib.AsyncExitStack())


# --- sources confined to the agent file's folder ----------------------------------------------------
def _agent_with_source(folder: Path, source: str, **extra) -> Path:
    import yaml

    tool = {"type": "vectorstore", "name": "docs", "source": source, **extra}
    path = folder / "agent.yaml"
    path.write_text(yaml.safe_dump({"name": "a", "tools": [tool], "tool_filtering": {"search_method": "bm25"}}))
    return path


@pytest.fixture
def private_and_agent(tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    (private / "secrets.md").write_text("The vault combination is 4-8-15-16-23-42.")
    agent = tmp_path / "agent"
    (agent / "docs").mkdir(parents=True)
    (agent / "docs" / "guide.md").write_text("How to reset a password: open settings.")
    return private, agent


@pytest.mark.parametrize("kind", ["parent", "absolute", "symlinked file"])
async def test_a_source_outside_the_agent_folder_is_refused(private_and_agent, kind):
    private, agent = private_and_agent
    if kind == "parent":
        path = _agent_with_source(agent, "../private")
    elif kind == "absolute":
        path = _agent_with_source(agent, str(private / "secrets.md"))
    else:
        (agent / "docs" / "notes.md").symlink_to(private / "secrets.md")
        path = _agent_with_source(agent, "docs")
    with pytest.raises(ConfigError, match=r"outside the agent file's folder.*allow_outside_agent_folder"):
        async with await open_toolset(path):
            pass


async def test_a_symlinked_folder_inside_the_source_is_not_followed(private_and_agent):
    private, agent = private_and_agent
    (agent / "docs" / "more").symlink_to(private, target_is_directory=True)
    async with await open_toolset(_agent_with_source(agent, "docs")) as tools:
        answer = str(await tools.kernel.invoke(plugin_name="vectorstore", function_name="docs", query="vault"))
    assert "vault combination" not in answer and "guide.md" in answer


async def test_allow_outside_agent_folder_is_the_explicit_opt_out(private_and_agent):
    _, agent = private_and_agent
    path = _agent_with_source(agent, "../private", allow_outside_agent_folder=True)
    async with await open_toolset(path) as tools:
        answer = str(await tools.kernel.invoke(plugin_name="vectorstore", function_name="docs", query="vault"))
    assert "vault combination" in answer


async def test_a_deeply_nested_json_source_is_a_config_error_naming_the_file(tmp_path):
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    path = _agent_with_source(tmp_path, "deep.json")
    with pytest.raises(ConfigError, match=r"deep\.json: JSON nested too deeply"):
        async with await open_toolset(path):
            pass


async def test_an_agent_with_two_vectorstore_tools_loads_and_searches_both(tmp_path):
    """HoloDeck's published samples have several vectorstore tools in one agent."""
    (tmp_path / "faq.md").write_text("Refunds are issued within 5 business days to the original card.")
    (tmp_path / "policies.md").write_text("Our warranty covers manufacturing defects for two years.")
    agent = tmp_path / "agent.yaml"
    import yaml

    tools = [
        {"type": "vectorstore", "name": "faq", "source": "faq.md"},
        {"type": "vectorstore", "name": "policies", "source": "policies.md"},
    ]
    agent.write_text(yaml.safe_dump({"name": "a", "tools": tools, "tool_filtering": {"search_method": "bm25"}}))
    async with await open_toolset(agent) as tools_:
        assert sorted(tools_.kernel.plugins["vectorstore"].functions) == ["faq", "policies"]
        answer = str(await tools_.kernel.invoke(plugin_name="vectorstore", function_name="policies", query="warranty"))
    assert "manufacturing defects" in answer


async def test_a_vectorstore_tool_is_found_by_what_its_documents_are_about(tmp_path):
    """A generic description ("Search frequently asked questions") shares no word with the question;
    the passages do, and the tool is ranked by them (without the words reaching the model)."""
    import yaml

    faq = [
        {"id": "pay", "q": "Which payment methods are accepted?", "a": "Visa, Mastercard and PayPal payment."},
        {"id": "card", "q": "How do I update my payment card?", "a": "Open Billing and edit the payment card."},
        {"id": "pw", "q": "How do I reset my password?", "a": "Use the reset link on the sign-in page."},
    ]
    (tmp_path / "faq.json").write_text(json.dumps(faq))
    topics = {
        "meetings": "Standup moved to Tuesday. Roadmap review with the design team.",
        "wiki": "Deploy with the release script. Rotate the staging database weekly.",
        "hr": "Holidays: 25 days a year. Parental leave policy and remote work rules.",
        "legal": "Contract templates, NDA clauses and trademark filings.",
        "sales": "Discovery call script, pricing objections and demo checklist.",
    }
    tools = [{"type": "vectorstore", "name": "faq", "description": "Search frequently asked questions"}]
    tools[0]["source"] = "faq.json"
    for name, text in topics.items():
        (tmp_path / f"{name}.md").write_text(text)
        tools.append({"type": "vectorstore", "name": name, "description": f"Search {name}", "source": f"{name}.md"})
    config = {"search_method": "bm25", "top_k": 3}
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump({"name": "a", "tools": tools, "tool_filtering": config}))
    async with await open_toolset(tmp_path / "agent.yaml") as toolset:
        tool = toolset.manager.index.get("vectorstore-faq")
        assert "payment" in tool.keywords and "payment" not in tool.description
        selected = await toolset.manager.filter_tools("What payment methods do you accept?")
        assert "vectorstore-faq" in selected and len(selected) < len(tools) + 2  # ranked, not all sent
        definition = toolset.kernel.get_function("vectorstore", "faq").metadata.description
        assert definition == "Search frequently asked questions"  # the model's view is unchanged
