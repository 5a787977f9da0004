"""HoloDeck's four published samples (openai variants, tests/fixtures/holodeck-samples, unchanged)
run here: validate, a domain question selects the sample's own vectorstore tool, and a chat turn
through the recording transport returns passages from the sample's data — against the real Chroma
server CI starts (their ``database: chromadb`` means the Chroma server of CHROMA_SERVER_*)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sk_toolfilter.agents.agent import load_agent, open_toolset
from sk_toolfilter.agents.agent_file import load_agent_file
from sk_toolfilter.cli import main
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply
from tests.test_holodeck import place_holodeck_agent

SAMPLES = Path(__file__).parent / "fixtures" / "holodeck-samples"

# sample → (a question of its domain, the vectorstore tool it needs, text its data holds for it)
CASES = {
    "customer-support": ("What payment methods do you accept?", "faq", "payment"),
    "content-moderation": (
        "Is a post promising to double your money if you send $100 a scam under our guidelines?",
        "moderation_rules",
        "scam",
    ),
    "legal-summarization": ("What does a standard limitation of liability clause say?", "legal_templates", "liability"),
    "ticket-routing": ("Which team should handle a billing refund ticket?", "ticket_categories", "Finance Support"),
}


@pytest.fixture(params=sorted(CASES))
def sample(request, tmp_path, monkeypatch, chroma_server) -> tuple[Path, tuple[str, str, str]]:
    folder = tmp_path / request.param
    return place_holodeck_agent(SAMPLES / request.param, folder, monkeypatch, chroma_server), CASES[request.param]


def test_a_sample_validates(sample, capsys):
    agent_file, (_, tool, _) = sample
    assert main(["validate", str(agent_file)]) == 0
    assert f"{tool}: 1 tool\n" in capsys.readouterr().out


async def test_a_domain_question_selects_the_sample_vectorstore_tool_and_a_turn_returns_its_passages(sample):
    agent_file, (question, tool, snippet) = sample
    spec = load_agent_file(agent_file)
    function = f"vectorstore-{tool}"
    async with await open_toolset(spec) as toolset:
        assert function in await toolset.manager.filter_tools(question)

    transport = RecordingTransport([tool_call_reply((function, {"query": question})), text_reply("Done.")])
    async with await load_agent(spec, chat_service=offline_chat_service(transport)) as loaded:
        await loaded.agent.get_response(messages=question)
    assert function in transport.tool_names(0)
    passages = transport.requests[1]["messages"][-1]["content"]
    assert snippet.lower() in passages.lower(), passages[:500]


def test_a_sample_reports_a_saving_of_at_least_zero(sample, tmp_path, capsys):
    import json

    agent_file, _ = sample
    assert main(["report", str(agent_file), "--out", str(tmp_path / "report")]) == 0
    totals = json.loads((tmp_path / "report" / "report.json").read_text())["totals"]
    assert totals["saved_percent"] >= 0.0, totals  # filtering never costs a small agent anything
    print(agent_file.parent.name, totals["tools_tokens_off"], totals["tools_tokens_on"], totals["saved_percent"])
