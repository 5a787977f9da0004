"""``eval`` measures what the app sends: for every query, the tools eval lists as sent are the tools the
Semantic Kernel wrapper puts on the wire for the same words as a first request (and ``sk-toolfilter
search`` selects), with the same agent file (the agent loop's budget, its lookups, the discovery tools
included)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import yaml

from sk_toolfilter.cli import main

ROOT = Path(__file__).resolve().parents[1]
AGENT = ROOT / "agent.yaml"
# The bundled agent's sample queries and more of what its users type (gold: the tool a person would pick).
MORE = [
    ("Look up when the quarterly budget note was written and email it to Ann", ["Notes-search_notes"]),
    ("convert 3 miles to km and then tell me the time in Paris", ["Math-convert_units", "Time-current_time"]),
    ("delete the old draft and list what is left in drafts/", ["Files-delete_file", "Files-list_files"]),
    ("how long until Christmas?", ["Time-days_between"]),
    ("tell the team on slack that the build is green", ["Messaging-post_to_channel"]),
]


def labelled_queries(path: Path) -> list[str]:
    samples = yaml.safe_load(AGENT.read_text(encoding="utf-8"))["sample_queries"]
    rows = [(s["query"], s["expect"]) for s in samples if isinstance(s, dict)] + MORE
    path.write_text("".join(json.dumps({"id": f"q{i}", "query": q, "gold": g}) + "\n" for i, (q, g) in enumerate(rows)))
    return [q for q, _ in rows]


def test_eval_lists_as_sent_exactly_what_the_wrapper_sends_for_every_query(tmp_path, capsys):
    from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
    from semantic_kernel.contents import ChatHistory

    from sk_toolfilter import wrap_chat_service
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply

    texts = labelled_queries(tmp_path / "queries.jsonl")
    argv = ["eval", "--agent", str(AGENT), "--queries", str(tmp_path / "queries.jsonl"), "--methods", "hybrid"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    listed = json.loads((tmp_path / "out" / "eval.json").read_text())["queries"]["hybrid"]
    sent_by_eval = {row["query"]: row["sent"] for row in listed}
    assert set(sent_by_eval) == set(texts)

    transport = RecordingTransport()
    settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())

    async def app_sends() -> None:
        async with await open_toolset(AGENT) as toolset:
            service = wrap_chat_service(offline_chat_service(transport), toolset.manager)
            for text in texts:
                history = ChatHistory()
                history.add_user_message(text)
                assert (await toolset.manager.select_for_history(history)).names == sent_by_eval[text], text
                transport.queue(text_reply())
                await service.get_chat_message_contents(history, settings, kernel=toolset.kernel)
                assert sorted(transport.tool_names()) == sorted(sent_by_eval[text]), text

    asyncio.run(app_sends())


def test_eval_prints_its_misses_and_counts_them_in_a_column(tmp_path, capsys):
    labelled_queries(tmp_path / "queries.jsonl")
    argv = ["eval", "--agent", str(AGENT), "--queries", str(tmp_path / "queries.jsonl"), "--methods", "hybrid"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    data = json.loads((tmp_path / "out" / "eval.json").read_text())
    missed = [row for row in data["queries"]["hybrid"] if row["missing"]]
    share = data["methods"]["hybrid"]["all_sent"]
    assert round((1 - share) * len(data["queries"]["hybrid"])) == len(missed)  # the column counts the misses
    assert f"Misses of hybrid: {len(missed)} of {len(data['queries']['hybrid'])} queries" in printed
    for row in missed:  # every miss on the terminal, with what was sent instead
        assert f"{row['id']} {row['query']!r}: missing" in printed
    header = next(line for line in printed.splitlines() if line.startswith("method"))
    assert "all_sent" in header
    md = (tmp_path / "out" / "eval.md").read_text()
    assert f"Misses of hybrid: {len(missed)} of" in md


def test_eval_measures_the_learned_ranker_by_its_own_name(tmp_path, capsys):
    labelled_queries(tmp_path / "queries.jsonl")
    argv = ["eval", "--agent", str(AGENT), "--queries", str(tmp_path / "queries.jsonl"), "--methods", "hybrid"]
    assert main([*argv, "--rerank", "learned", "--out", str(tmp_path / "out")]) == 0
    methods = json.loads((tmp_path / "out" / "eval.json").read_text())["methods"]
    assert set(methods) == {"hybrid", "hybrid+learned@30"}
