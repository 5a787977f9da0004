"""Any bytes as any input file give a one-line error naming the file (exit 2) or a documented
warning — never a traceback: agent files, tool catalogs, query files, co-usage files, vectorstore sources."""

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from sk_toolfilter.cli import main

TOOL = {"plugin": "Shop", "name": "get_price", "description": "Price of an item.", "parameters": {}}

# Arbitrary bytes, and texts that are almost valid (the shapes parsers trip on).
CONTENT = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [
            b"[" * 50_000 + b"]" * 50_000,
            b'{"a":' * 50_000,
            b"[1, 2, 3]",
            b'{"query": "x"}',
            b'"just a string"',
            b"null",
            b'{"name": "t", "parameters": {"properties": "not a mapping"}}',
            b'{"name": "t", "parameters": {"properties": {"x": 5}, "required": 7}}',
            b'{"name": "t", "parameters": []}',
            "name: a\ndescription: \ud800\n".encode("utf-8", "surrogatepass"),
            b"name: a\nmodel: {options: notamapping}\n",
            b"type: chat_completion_agent\nname: a\nmodel: {options: notamapping}\n",
            b"\xff\xfe\x00\x00",
            b"a: &x [*x]",
        ]
    ),
)


def _check(capsys, code: int, path) -> None:
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    if code == 0:
        return
    assert code == 2, captured.err
    lines = [line for line in captured.err.splitlines() if line.startswith("sk-toolfilter: error")]
    assert len(lines) == 1, captured.err
    assert path.name in lines[0], lines[0]


def write_agent(folder: Path, tools: list[dict], **filtering) -> Path:
    """An agent file in `folder` with `tools`, ranking with BM25 (no model needed for the files under test)."""
    agent = folder / "agent.yaml"
    block = {"search_method": "bm25", **filtering}
    agent.write_text(yaml.safe_dump({"name": "a", "tools": tools, "tool_filtering": block}))
    return agent


RUN = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@RUN
@given(content=CONTENT)
def test_any_bytes_as_an_agent_file(tmp_path_factory, capsys, content):
    path = tmp_path_factory.mktemp("agent") / "agent.yaml"
    path.write_bytes(content)
    _check(capsys, main(["validate", str(path)]), path)


@RUN
@given(content=CONTENT, suffix=st.sampled_from([".jsonl", ".json"]))
def test_any_bytes_as_a_tool_catalog(tmp_path_factory, capsys, content, suffix):
    folder = tmp_path_factory.mktemp("catalog")
    path = folder / f"tools{suffix}"
    path.write_bytes(content)
    agent = write_agent(folder, [{"type": "catalog", "name": "shop", "path": path.name}])
    _check(capsys, main(["validate", str(agent)]), path)


@RUN
@given(content=CONTENT)
def test_any_bytes_as_a_queries_file(tmp_path_factory, capsys, content):
    folder = tmp_path_factory.mktemp("queries")
    tools, queries = folder / "tools.jsonl", folder / "queries.jsonl"
    tools.write_text(json.dumps(TOOL) + "\n")
    queries.write_bytes(content)
    code = main(["eval", "--tools", str(tools), "--queries", str(queries), "--methods", "bm25"])
    _check(capsys, code, queries)


@RUN
@given(content=CONTENT)
def test_any_bytes_as_a_learning_file_are_left_alone_with_a_warning(tmp_path_factory, capsys, content):
    folder = tmp_path_factory.mktemp("learning")
    (folder / "tools.jsonl").write_text(json.dumps(TOOL) + "\n")
    learned = folder / "learned.npz"
    learned.write_bytes(content)
    tools = [{"type": "catalog", "name": "shop", "path": "tools.jsonl"}]
    agent = write_agent(folder, tools, learning={"file": learned.name})
    assert main(["validate", str(agent)]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert learned.read_bytes() == content  # never overwritten


@RUN
@given(content=CONTENT, suffix=st.sampled_from([".json", ".jsonl", ".md"]))
def test_any_bytes_as_a_vectorstore_source(tmp_path_factory, capsys, content, suffix):
    folder = tmp_path_factory.mktemp("vectorstore")
    source = folder / f"docs{suffix}"
    source.write_bytes(content)
    agent = write_agent(folder, [{"type": "vectorstore", "name": "docs", "source": source.name}])
    _check(capsys, main(["validate", str(agent)]), source)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("type: chat_completion_agent\nname: a\nmodel: {options: notamapping}\n", "options"),
        ('name: a\ndescription: "caf\\udce9"\n', "lone surrogate"),
    ],
)
def test_known_raw_exceptions_are_one_line_errors(tmp_path, capsys, text, expected):
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and expected in err and "agent.yaml" in err


BROKEN_AGENTS = {
    "unknown module": "tools: [{type: plugin, name: M, import: 'nonexistent.module:Foo'}]",
    "unknown class": "tools: [{type: plugin, name: M, import: 'sk_toolfilter.demo:NoSuch'}]",
    "module without functions": "tools: [{type: plugin, name: M, import: 'sk_toolfilter.demo'}]",
    "missing catalog": "tools: [{type: catalog, name: c, path: missing.jsonl}]",
    "missing instructions": "instructions: {file: missing.md}",
    "missing MCP command": "tools: [{type: mcp, name: m, command: /no/such/server}]",
    "MCP URL that is no URL": "tools: [{type: mcp, name: m, url: 'not a url'}]",
    "bad top_k": "tool_filtering: {top_k: -1}",
    "missing vectorstore source": "tools: [{type: vectorstore, name: v, source: missing.json}]",
    "duplicate source": "tools: [{type: plugin, name: M, import: 'sk_toolfilter.demo:MathPlugin'}, "
    "{type: plugin, name: M, import: 'sk_toolfilter.demo:MathPlugin'}]",
    "unknown pinned tool": "tool_filtering: {always_include: [Nope-nothing]}\n"
    "tools: [{type: plugin, name: M, import: 'sk_toolfilter.demo:MathPlugin'}]",
    "openai without a key": "tool_filtering: {embedding: {provider: openai}}",
    "unknown local model": "tool_filtering: {embedding: {model: nosuch-model}}",
    "bad plugin name": "tools: [{type: plugin, name: 'bad name', import: 'x:y'}]",
}


@pytest.mark.parametrize("case", sorted(BROKEN_AGENTS))
def test_every_error_about_an_agent_file_names_the_file(tmp_path, capsys, case):
    path = tmp_path / "broken-agent.yaml"
    path.write_text(f"name: a\n{BROKEN_AGENTS[case]}\n")
    code = main(["validate", str(path)])
    err = capsys.readouterr().err
    assert code in (1, 2) and "Traceback" not in err
    errors = [line for line in err.splitlines() if "sk-toolfilter: error:" in line]
    assert len(errors) == 1 and errors[0].split("sk-toolfilter: error: ")[1].startswith(f"{path}: "), err
