"""The sk-toolfilter command through its entry point."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from semantic_kernel.functions import kernel_function

from sk_toolfilter.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def bm25_agent(tmp_path):
    text = (ROOT / "agent.yaml").read_text().replace("search_method: hybrid", "search_method: bm25")
    text = text.replace("root: sandbox", f"root: {tmp_path / 'sandbox'}")
    (tmp_path / "instructions").mkdir()
    (tmp_path / "instructions" / "assistant.md").write_text("Be helpful.")
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return path


def test_validate_prints_tool_counts_per_source(bm25_agent, capsys):
    assert main(["validate", str(bm25_agent)]) == 0
    out = capsys.readouterr().out
    assert "atlas: OK" in out and "Files: 8 tools" in out and "total: 46 tools (+ 2 discovery tools) indexed" in out


def test_search_explain_shows_scores_and_reasons(bm25_agent, capsys):
    assert main(["search", str(bm25_agent), "email bob", "--explain", "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "Messaging-send_email" in out and "bm25=1.00" in out and "cut: beyond top_k=2" in out


def test_the_explain_command_says_what_search_explain_says(bm25_agent, capsys):
    assert main(["search", str(bm25_agent), "email bob", "--explain", "--top-k", "2"]) == 0
    searched = capsys.readouterr().out
    assert main(["explain", str(bm25_agent), "email bob", "--top-k", "2"]) == 0
    assert capsys.readouterr().out == searched


def test_report_writes_its_files(bm25_agent, tmp_path, capsys):
    queries = tmp_path / "q.txt"
    queries.write_text("send an email\nadd 2 and 3\n")
    assert main(["report", str(bm25_agent), "--queries", str(queries), "--out", str(tmp_path / "r")]) == 0
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert len(data["queries"]) == 2 and data["totals"]["saved_percent"] > 75
    assert "% saved" in capsys.readouterr().out


def test_eval_writes_eval_json(tmp_path, capsys):
    queries = tmp_path / "dev.jsonl"
    queries.write_text(
        json.dumps({"id": "1", "query": "open a support ticket", "gold": ["support-open_ticket"]})
        + "\n"
        + json.dumps(
            {
                "id": "2",
                "query": "search the product catalog and order the product",
                "gold": ["shop-find_product", "shop-place_order"],
            }
        )
        + "\n"
    )
    code = main(
        [
            "eval",
            "--tools",
            str(FIXTURES / "tools.jsonl"),
            "--queries",
            str(queries),
            "--methods",
            "bm25",
            "--out",
            str(tmp_path / "e"),
        ]
    )
    assert code == 0
    data = json.loads((tmp_path / "e" / "eval.json").read_text())
    assert data["n_queries"] == 2 and data["n_tools"] == 3
    assert data["methods"]["bm25"]["recall@1"] == 0.75  # q1: 1.0; q2: 1 of its 2 gold tools at rank 1 → 0.5
    assert {"complete@5", "ndcg@10", "mrr", "mean_tools_sent", "p50_ms"} <= set(data["methods"]["bm25"])


def test_eval_writes_each_querys_hits_and_lists_the_misses_with_what_was_sent(tmp_path, capsys):
    queries = tmp_path / "dev.jsonl"
    lines = [
        {"id": "hit", "query": "open a support ticket", "gold": ["support-open_ticket"]},
        {"id": "miss", "query": "open a support ticket", "gold": ["shop-place_order"]},
    ]
    queries.write_text("".join(json.dumps(line) + "\n" for line in lines))
    argv = ["eval", "--tools", str(FIXTURES / "tools.jsonl"), "--queries", str(queries), "--methods", "bm25"]
    # one tool per request (three would all fit the budget, and the app would send all three)
    argv += ["--set", "top_k=1", "--set", "agent_loop.max_tools=1"]
    assert main([*argv, "--out", str(tmp_path / "e")]) == 0
    outcomes = {q["id"]: q for q in json.loads((tmp_path / "e" / "eval.json").read_text())["queries"]["bm25"]}
    assert outcomes["hit"]["missing"] == [] and "support-open_ticket" in outcomes["hit"]["sent"]
    assert outcomes["hit"]["rank"] == {"support-open_ticket": 1}
    assert outcomes["miss"]["missing"] == ["shop-place_order"] and "support-open_ticket" in outcomes["miss"]["sent"]
    md = (tmp_path / "e" / "eval.md").read_text()
    assert "### Misses of bm25: 1 of 2 queries" in md
    (miss_line,) = [line for line in md.splitlines() if line.startswith("- **")]
    assert (
        "**miss**" in miss_line and "missing `shop-place_order`" in miss_line and "`support-open_ticket`" in miss_line
    )


def test_a_missing_agent_file_is_a_usage_error_in_one_line(tmp_path, capsys):
    assert main(["validate", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("sk-toolfilter: error:") and "cannot read agent file" in err and "\n" not in err


def test_config_errors_exit_2_and_name_the_key(tmp_path, capsys):
    bad = tmp_path / "a.yaml"
    bad.write_text("name: a\ntool_filtering: {top_k: -1}\n")
    assert main(["validate", str(bad)]) == 2
    assert "tool_filtering.top_k" in capsys.readouterr().err


def test_usage_errors_exit_2():
    with pytest.raises(SystemExit) as info:
        main(["report"])
    assert info.value.code == 2


def test_console_script_help_works():
    result = subprocess.run(
        [sys.executable, "-m", "sk_toolfilter.cli", "search", "--help"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0 and "--explain" in result.stdout


def test_the_mcp_example_validates_with_paths_relative_to_the_file(capsys):
    assert main(["validate", str(ROOT / "examples" / "mcp_agent.yaml")]) == 0
    out = capsys.readouterr().out
    assert "Weather: 2 tools" in out and "Time: 7 tools" in out


def test_validate_lists_optional_sources_that_were_skipped_and_a_failing_server_is_one_line(tmp_path, capsys):
    fault_server = ROOT / "tests" / "fixtures" / "mcp_fault_server.py"
    source = {"type": "mcp", "name": "Broken", "command": "python", "args": [str(fault_server), "exit"]}
    agent = tmp_path / "agent.yaml"
    time_plugin = {"type": "plugin", "name": "Time", "import": "sk_toolfilter.demo:TimePlugin"}
    tools = [{**source, "optional": True}, time_plugin]
    agent.write_text(yaml.safe_dump({"name": "a", "tools": tools, "tool_filtering": {"search_method": "bm25"}}))
    assert main(["validate", str(agent)]) == 0
    out = capsys.readouterr().out
    assert "Time: 7 tools" in out
    assert "Broken: skipped (optional): tools[0] (Broken): MCP server" in out and "exited during start-up" in out
    agent.write_text(yaml.safe_dump({"name": "a", "tools": [source]}))
    assert main(["validate", str(agent)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"sk-toolfilter: error: {agent}: tools[0] (Broken): MCP server")
    assert "Cannot find module" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_eval_on_an_agent_file(bm25_agent, tmp_path, capsys):
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "1", "query": "convert 5 km to miles", "gold": ["Math-convert_units"]}) + "\n")
    assert main(["eval", "--agent", str(bm25_agent), "--queries", str(queries), "--methods", "bm25"]) == 0
    assert "bm25" in capsys.readouterr().out


def test_eval_shows_the_cut_offs_it_was_asked_for_and_no_column_of_another(bm25_agent, tmp_path, capsys):
    """`--k 2,3`: recall@2 and @3, complete@3, per category too (a column of a cut-off nobody asked for
    read nan, and the per-category lines looked for recall@5 and failed)."""
    queries = tmp_path / "q.jsonl"
    rows = [{"query": "convert 5 km to miles", "gold": ["Math-convert_units"], "category": "math"}]
    queries.write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = ["eval", "--agent", str(bm25_agent), "--queries", str(queries), "--methods", "bm25", "--k", "2,3"]
    assert main([*args, "--by-category"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("method"))
    assert header.split()[1:4] == ["recall@2", "recall@3", "complete@3"] and "recall@5" not in header
    assert "nan" not in out and "math" in out and "recall@3" in out.split(header)[1]
    assert main([*args, "--by-category", "--out", str(tmp_path / "out")]) == 0
    markdown = (tmp_path / "out" / "eval.md").read_text()
    assert "| recall@2 | recall@3 | complete@3 |" in markdown and "nan" not in markdown
    assert "| method | category | recall@3 | complete@3 | mrr |" in markdown


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        ([{"query": "send it", "gold": "p-send_email"}], r"q.jsonl:1: 'gold' must be a list of tool names, not one"),
        (
            [{"query": "a", "gold": ["Math-convert_units"]}, {"query": "b", "gold": []}],
            r"q.jsonl:2: 'gold' must be a non",
        ),
        ([{"query": "", "gold": ["Math-convert_units"]}], r"q.jsonl:1: 'query' must be a non-empty string"),
        ([], r"q.jsonl: no queries"),
        (
            [{"query": "a", "gold": ["Math-convert_unit"]}],
            r"q.jsonl:1: 'Math-convert_unit' \(closest: Math-convert_units",
        ),
    ],
)
def test_eval_names_the_file_and_line_of_a_bad_query_and_writes_no_nan(bm25_agent, tmp_path, capsys, lines, expected):
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    argv = ["eval", "--agent", str(bm25_agent), "--queries", str(queries), "--methods", "bm25", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert re.search(expected, err), err
    assert "Traceback" not in err and not (out / "eval.json").exists()


@pytest.mark.parametrize("framework", ["semantic-kernel", "agent-framework"])
def test_chat_without_a_key_says_so_in_one_line(bm25_agent, monkeypatch, capsys, framework):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    bm25_agent.write_text(f"framework: {framework}\n" + bm25_agent.read_text())
    assert main(["chat", str(bm25_agent)]) == 2
    err = capsys.readouterr().err.strip()
    assert "no API key" in err and "\n" not in err


def conversation_steps() -> list[dict]:
    """One recorded turn: find a product, then order it (the bfcl_multiturn step format)."""
    user = {"role": "user", "content": "find a blue kettle in the catalog and order it"}
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "shop-find_product", "arguments": '{"keyword": "kettle"}'},
            }
        ],
    }
    result = {"role": "tool", "tool_call_id": "c1", "content": '[{"id": "k1", "name": "blue kettle"}]'}
    return [
        {"id": "a/t0/s0", "entry": "a", "turn": 0, "step": 0, "messages": [user], "gold": ["shop-find_product"]},
        {
            "id": "a/t0/s1",
            "entry": "a",
            "turn": 0,
            "step": 1,
            "messages": [user, call, result],
            "gold": ["shop-place_order"],
        },
    ]


def test_eval_conversations_replays_each_step_through_the_wrapper(tmp_path, capsys):
    steps = tmp_path / "steps.jsonl"
    steps.write_text("".join(json.dumps(s) + "\n" for s in conversation_steps()))
    args = ["eval", "--tools", str(FIXTURES / "tools.jsonl"), "--conversations", str(steps)]
    code = main([*args, "--set", "search_method=bm25", "--out", str(tmp_path / "out")])
    assert code == 0
    data = json.loads((tmp_path / "out" / "conversations.json").read_text())
    assert data["summary"]["steps"] == 2 and data["summary"]["step_recall"] == 1.0
    assert data["summary"]["turn_complete"] == 1.0 and data["config"]["search_method"] == "bm25"
    assert "later_step_recall" in capsys.readouterr().out


def test_eval_conversations_names_the_line_of_a_bad_step_and_an_unknown_setting(tmp_path, capsys):
    steps = tmp_path / "steps.jsonl"
    steps.write_text(json.dumps(conversation_steps()[0]) + "\n" + json.dumps({"messages": [], "gold": ["x"]}) + "\n")
    args = ["eval", "--tools", str(FIXTURES / "tools.jsonl"), "--conversations", str(steps)]
    assert main(args) == 2
    assert f"{steps}:2: 'messages' must be a non-empty list" in capsys.readouterr().err
    steps.write_text(json.dumps(conversation_steps()[0]) + "\n")
    assert main([*args, "--set", "agent_loop.max_toolz=3"]) == 2
    assert "unknown tool_filtering setting 'max_toolz'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "AGENT", "email", "--top-k", "-3"],
        ["search", "AGENT", "email", "--top-k", "0"],
        ["search", "AGENT", "email", "--top-k", "many"],
        ["report", "AGENT", "--limit", "-1"],
        ["eval", "--agent", "AGENT", "--queries", "q.jsonl", "--limit", "0"],
    ],
)
def test_bad_numbers_on_the_command_line_are_usage_errors(bm25_agent, argv, capsys):
    with pytest.raises(SystemExit) as info:
        main([str(bm25_agent) if a == "AGENT" else a for a in argv])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "must be at least 1" in err or "expected a whole number" in err
    assert "pydantic" not in err and "Traceback" not in err


def test_validate_fails_when_the_instructions_file_is_missing(bm25_agent, capsys):
    (bm25_agent.parent / "instructions" / "assistant.md").unlink()
    assert main(["validate", str(bm25_agent)]) == 2
    assert "instructions.file: cannot read" in capsys.readouterr().err


def test_an_error_with_an_empty_message_still_gets_one_line(monkeypatch, capsys):
    from sk_toolfilter import cli

    async def boom(args):
        raise RuntimeError()

    monkeypatch.setattr(cli, "cmd_validate", boom)
    assert main(["validate", "x.yaml"]) == 1
    assert (
        capsys.readouterr().err.strip() == "sk-toolfilter: error: RuntimeError: RuntimeError (run with -v for details)"
    )


def test_eval_on_an_agent_file_ranks_with_its_tools_overrides(bm25_agent, tmp_path, capsys):
    """A keyword added in tools_overrides is what finds the tool; eval must rank with it, as the agent does."""
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "1", "query": "zorblax the figures", "gold": ["Math-statistics_summary"]}))
    base = yaml.safe_load(bm25_agent.read_text())

    def recall(overrides: dict) -> float:
        data = {**base, "tool_filtering": {**base["tool_filtering"], "tools_overrides": overrides}}
        bm25_agent.write_text(yaml.safe_dump(data))
        out = tmp_path / f"eval{len(overrides)}"
        argv = ["eval", "--agent", str(bm25_agent), "--queries", str(queries), "--methods", "bm25", "--out", str(out)]
        assert main(argv) == 0
        return json.loads((out / "eval.json").read_text())["methods"]["bm25"]["recall@5"]

    assert recall({}) == 0.0
    assert recall({"Math-statistics_summary": {"keywords": ["zorblax"]}}) == 1.0


@pytest.mark.parametrize("framework", ["semantic-kernel", "agent-framework"])
def test_chat_answers_and_shows_the_tools_it_sent(bm25_agent, monkeypatch, capsys, framework, openai_compatible_server):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{openai_compatible_server.server_port}/v1")
    bm25_agent.write_text(f"framework: {framework}\n" + bm25_agent.read_text())
    lines = iter(["convert 5 km to miles", "and 10 km?"])

    def typed(prompt: str) -> str:
        try:
            return next(lines)
        except StopIteration:
            raise EOFError from None

    monkeypatch.setattr("builtins.input", typed)
    assert main(["chat", str(bm25_agent)]) == 0
    out = capsys.readouterr().out
    assert out.count("atlas> hi there") == 2 and framework in out
    assert "[tools sent: " in out and "Math-convert_units" in out
    second = openai_compatible_server.bodies[-1]
    assert [m["content"] for m in second["messages"] if m["role"] == "user"] == ["convert 5 km to miles", "and 10 km?"]
    assert 0 < len(second["tools"]) < 46


def test_validate_refuses_an_expect_that_names_no_tool_and_names_the_file(bm25_agent, capsys):
    data = yaml.safe_load(bm25_agent.read_text())
    data["sample_queries"] = [{"query": "what time is it", "expect": ["Time-no_such_tool"]}]
    bm25_agent.write_text(yaml.safe_dump(data))
    assert main(["validate", str(bm25_agent)]) == 2
    err = capsys.readouterr().err
    assert str(bm25_agent) in err and "sample_queries[0].expect" in err and "'Time-no_such_tool'" in err


def test_a_report_query_that_is_not_valid_utf8_is_repaired_once_and_reported(bm25_agent, tmp_path, capsys):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"query": "send an email to bob"}\n{"query": "bad \\ud800 text"}\n')
    assert main(["report", str(bm25_agent), "--queries", str(queries), "--out", str(tmp_path / "r")]) == 0
    data = json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))
    assert [q["query"] for q in data["queries"]] == ["send an email to bob", "bad \ufffd text"]
    assert "bad \ufffd text" in (tmp_path / "r" / "report.md").read_text(encoding="utf-8")


class Echo:
    """A one-tool plugin (the shape of HoloDeck's ticket-routing sample)."""

    @kernel_function(description="Route a ticket to a team.")
    def route(self, ticket: str) -> str:
        return ticket


def test_a_one_tool_agent_reports_one_tool_and_no_saving_and_says_why(tmp_path, capsys):
    agent = tmp_path / "one.yaml"
    agent.write_text(
        "name: one\nmodel: {provider: openai, name: gpt-4o-mini}\ninstructions: Help.\n"
        "tools:\n  - {type: plugin, name: Router, import: 'tests.test_cli:Echo'}\n"
        "tool_filtering: {search_method: bm25}\n"
        "sample_queries: [{query: 'route this ticket to billing'}, {query: 'hello'}]\n"
    )
    assert main(["validate", str(agent)]) == 0
    assert "Router: 1 tool\n" in capsys.readouterr().out
    assert main(["report", str(agent), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "(0.0% saved)" in out and "Nothing to save: all 1 tool fit" in out
    assert "discovery tools included" not in out and "mean tools sent 1 of 1 " in out  # one story, no "1.0"
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    assert all(q["tools_on"] == q["tools_off"] == 1 for q in data["queries"])


def test_an_sk_declarative_spec_runs_from_the_cli_with_the_kernel_named_by_kernel(monkeypatch, capsys):
    spec = str(FIXTURES / "sk_declarative" / "host_agent.yaml")
    monkeypatch.setenv("OPENAI_CHAT_MODEL_ID", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    assert main(["validate", spec]) == 2  # its tools name functions only a kernel has
    assert "kernel" in capsys.readouterr().err
    assert main(["validate", spec, "--kernel", "tests.test_sk_declarative:kernel_with_plugins"]) == 0
    out = capsys.readouterr().out
    assert "Host: OK" in out
    assert (
        main(["search", spec, "book a table for four", "--kernel", "tests.test_sk_declarative:kernel_with_plugins"])
        == 0
    )
    assert "BookingPlugin-book_table" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("tests.test_sk_declarative", "expected module:factory"),
        ("tests.no_such_module:k", "cannot import 'tests.no_such_module'"),
        ("tests.test_sk_declarative:missing", "has no 'missing'"),
        ("tests.test_sk_declarative:SPEC", "gave a PosixPath, not a semantic_kernel Kernel"),
    ],
)
def test_a_wrong_kernel_flag_is_one_clear_error(target, message, capsys):
    assert main(["validate", str(FIXTURES / "sk_declarative" / "host_agent.yaml"), "--kernel", target]) == 2
    assert message in capsys.readouterr().err


def test_the_cli_starts_without_loading_semantic_kernel_and_public_names_still_import():
    probe = (
        "import sys, sk_toolfilter.cli; print('semantic_kernel' in sys.modules); "
        "from sk_toolfilter import ToolFilterManager, load_agent, ToolFilterConfig; "
        "print(ToolFilterManager.__module__, load_agent.__module__, 'semantic_kernel' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.split() == ["False", "sk_toolfilter.selection.manager", "sk_toolfilter.agents.agent", "True"]


def test_chat_with_an_unreachable_server_names_it_and_goes_on(bm25_agent, monkeypatch, capsys):
    import io

    data = yaml.safe_load(bm25_agent.read_text())
    data["model"] = {"provider": "openai", "name": "gpt-4o-mini", "base_url": "http://127.0.0.1:9/v1"}
    bm25_agent.write_text(yaml.safe_dump(data))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.setattr("sys.stdin", io.StringIO("what time is it?\nand in Tokyo?\n"))
    assert main(["chat", str(bm25_agent)]) == 0  # the session ends at the end of input, not at the failure
    err = capsys.readouterr().err
    failures = [line for line in err.splitlines() if "this turn failed" in line]
    assert len(failures) == 2
    assert "at http://127.0.0.1:9/v1" in failures[0] and "is the server running" in failures[0]


def test_a_base_url_that_is_no_url_is_a_config_error_at_load(bm25_agent, monkeypatch, capsys):
    import io

    monkeypatch.setenv("OPENAI_BASE_URL", "not-a-url")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
    assert main(["chat", str(bm25_agent)]) == 2  # the bundled agent reads it as model.base_url
    err = capsys.readouterr().err
    assert str(bm25_agent) in err and "model.base_url" in err and "is not an http(s) URL" in err


def two_turn_conversation(entry: str, request: str) -> list[dict]:
    """A finished turn (find, then order) and the next turn's first request: co-usage learns the turn."""
    first = conversation_steps()
    for step in first:
        step["id"], step["entry"] = step["id"].replace("a/", f"{entry}/"), entry
        step["messages"][0] = {"role": "user", "content": request}
    done = [
        *first[1]["messages"],
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "shop-place_order", "arguments": '{"product_id": "k1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "ordered"},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "open a support ticket about the late delivery"},
    ]
    gold = ["support-open_ticket"]
    return [*first, {"id": f"{entry}/t1/s0", "entry": entry, "turn": 1, "step": 0, "messages": done, "gold": gold}]


@pytest.mark.parametrize(("scope", "turns_learned"), [("agent", 2), ("conversation", 1)])
async def test_a_replay_can_start_every_conversation_with_no_co_usage(scope, turns_learned, tmp_path):
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import parse_agent
    from sk_toolfilter.measure.conversations import load_steps, replay_conversations

    lines = two_turn_conversation("a", "find a blue kettle and order it")
    lines += two_turn_conversation("b", "find a red teapot and order it")
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(s) + "\n" for s in lines))
    tools = [{"type": "catalog", "name": "shop", "path": str(FIXTURES / "tools.jsonl")}]
    spec = parse_agent({"name": "t", "tools": tools}, source="test")
    async with await open_toolset(spec) as toolset:
        await replay_conversations(
            toolset.kernel, toolset.manager, load_steps(tmp_path / "steps.jsonl"), co_usage_scope=scope
        )
        await toolset.manager.learning.settled()
        # Each conversation finished one turn; only the agent-wide scope still remembers the first one's.
        assert len(toolset.manager.learning.memory) == turns_learned


def big_catalog_agent(tmp_path: Path, tools: int = 120) -> Path:
    """An agent of `tools` catalog tools, above its `embedding.background_above` (instant start)."""
    topics = ["invoice", "weather", "email", "calendar", "ticket", "shipment"]
    lines = [
        json.dumps({"name": f"tool{i}", "description": f"Handle the {topics[i % 6]} task number {i}."})
        for i in range(tools - 1)
    ] + [json.dumps({"name": "refund_invoice", "description": "Refund a paid invoice to the customer."})]
    (tmp_path / "tools.jsonl").write_text("\n".join(lines) + "\n")
    agent = {
        "name": "big",
        "instructions": "Help.",
        "tools": [{"type": "catalog", "name": "Ops", "path": "tools.jsonl"}],
        "tool_filtering": {
            "discovery": {"enabled": False},
            "embedding": {"background_above": 50, "cache_dir": str(tmp_path / "cache")},
        },
    }
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(agent))
    return path


def test_one_shot_commands_wait_for_the_vectors_of_a_big_catalog_and_leave_the_cache_warm(tmp_path, capsys):
    agent = big_catalog_agent(tmp_path)
    assert main(["search", str(agent), "refund a paid invoice", "--no-wait"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("method: bm25 (fallback: ") and "being embedded in the background" in out
    assert main(["search", str(agent), "refund a paid invoice"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("method: hybrid;") and "Ops-refund_invoice" in out
    assert any((tmp_path / "cache").iterdir())  # filled: the next run starts warm ...
    assert main(["search", str(agent), "refund a paid invoice", "--no-wait"]) == 0
    assert capsys.readouterr().out.startswith("method: hybrid;")  # ... and needs no background build at all
    assert main(["validate", str(agent)]) == 0
    assert "(with embeddings)" in capsys.readouterr().out


def test_search_selects_what_the_report_sends_for_the_same_request(capsys, tmp_path):
    import asyncio

    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file
    from sk_toolfilter.measure.report import build_token_report

    agent = Path(__file__).resolve().parent.parent / "agent.yaml"
    spec = load_agent_file(agent)
    queries = spec.sample_queries[:6]

    async def report_selected() -> list[list[str]]:
        async with await open_toolset(spec) as tools:
            report = await build_token_report(spec, tools.kernel, tools.manager, queries)
        return [q.selected for q in report.queries]

    sent = asyncio.run(report_selected())
    for item, selected in zip(queries, sent, strict=True):
        assert main(["search", str(agent), item.query]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        listed = first.split(": ", 2)[-1].split(", ") if "selected" in first else []
        assert sorted(listed) == sorted(selected), item.query  # the same tools (the wire has kernel order)


def test_report_and_eval_read_gold_names_written_as_the_catalog_spells_them(tmp_path, capsys, caplog):
    import logging

    long_name = "website_configuration_api_WebsiteConfigurationApi_rename_website"
    tools = [
        {"name": long_name, "description": "Rename a website configuration."},
        {"name": "get_weather", "description": "Current weather of a city."},
        *({"name": f"{long_name}_{n}", "description": f"Variant {n}."} for n in range(30)),
    ]
    (tmp_path / "tools.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tools))
    agent = tmp_path / "agent.yaml"
    agent.write_text(
        yaml.safe_dump(
            {
                "name": "long",
                "instructions": "Help.",
                "tools": [{"type": "catalog", "name": "bfcl", "path": "tools.jsonl"}],
                "tool_filtering": {"search_method": "bm25"},
            }
        )
    )
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"query": "rename my website", "gold": [f"bfcl-{long_name}"]}) + "\n")
    argv = ["eval", "--agent", str(agent), "--queries", str(queries), "--methods", "bm25", "--out", str(tmp_path)]
    with caplog.at_level(logging.WARNING, logger="sk_toolfilter"):
        assert main(argv) == 0  # the agent sends it as bfcl-…_re_<hash> (64 characters): the gold follows
    assert json.loads((tmp_path / "eval.json").read_text())["methods"]["bm25"]["recall@1"] == 1.0
    # One summary for the catalog's 31 shortened names, not a warning per name.
    renames = [
        r.getMessage() for r in caplog.records if "sent shortened" in r.getMessage() or "is called" in r.getMessage()
    ]
    assert len(renames) == 1 and "31 tool name(s) of catalog" in renames[0], renames
    # report reads the same file alike: the gold names the renamed tool, and it is sent.
    assert main(["report", str(agent), "--queries", str(queries), "--out", str(tmp_path / "report")]) == 0
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert report["totals"]["expected_tool_sent"] == "1/1"
    # A gold name that names no tool is reported at its line and field.
    queries.write_text(queries.read_text() + json.dumps({"query": "x", "gold": ["bfcl-no_such_tool"]}) + "\n")
    capsys.readouterr()
    assert main(["report", str(agent), "--queries", str(queries), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    assert f"{queries}:2 gold" in err and "sample_queries" not in err and "bfcl-no_such_tool" in err
