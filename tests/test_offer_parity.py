"""One policy for every adapter: the SK chat-service wrapper, SK settings cloned with
``prepare_execution_settings`` and the Agent Framework middleware send the same tools for the same
conversations (``ToolFilterManager.offer`` decides; the adapters only map names to tools).

Six real BFCL multi-turn conversations (tests/fixtures/bfcl_multiturn, Apache-2.0) replayed step by
step through SK's real ``OpenAIChatCompletion`` and Agent Framework's real OpenAI client on a
recording HTTP transport; what is compared is what reached the wire.
"""

from pathlib import Path

import pytest

from sk_toolfilter.agents.agent import open_toolset
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.measure.conversations import load_steps, replay_conversations

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "bfcl_multiturn"
PATHS = [
    ("semantic-kernel", "wrapper"),
    ("semantic-kernel", "prepare_execution_settings"),
    ("agent-framework", "wrapper"),
]


async def sent_per_step(tool_filtering: dict) -> dict[tuple[str, str], list[list[str]]]:
    steps = load_steps(FIXTURE / "conversations.jsonl")
    spec = parse_agent(
        {
            "name": "bfcl",
            "tools": [{"type": "catalog", "name": "bfcl", "path": str(FIXTURE / "tools.jsonl")}],
            "tool_filtering": tool_filtering,
        },
        source="test",
    )
    sent = {}
    for framework, via in PATHS:
        async with await open_toolset(spec) as toolset:
            replay = await replay_conversations(toolset.kernel, toolset.manager, steps, framework=framework, via=via)
        sent[framework, via] = [r.sent for r in replay.steps]
    return sent


@pytest.mark.parametrize(
    "tool_filtering",
    [
        {"selection_mode": "fresh"},
        {"selection_mode": "sticky"},
        {"top_k": 3, "max_tools_total": 4, "exclude": ["TravelAPI-*"]},
    ],
    ids=["fresh", "sticky", "capped-and-excluded"],
)
async def test_every_adapter_sends_the_same_tools_for_the_same_conversations(tool_filtering):
    sent = await sent_per_step(tool_filtering)
    wrapper = sent["semantic-kernel", "wrapper"]
    assert len(wrapper) == 30 and all(0 < len(s) < 128 for s in wrapper)  # filtered, never empty here
    assert sent["agent-framework", "wrapper"] == wrapper  # same names, same order
    # Cloned settings name the functions; SK lists them in the kernel's order, so the order is SK's.
    assert [sorted(s) for s in sent["semantic-kernel", "prepare_execution_settings"]] == [sorted(s) for s in wrapper]
    if "max_tools_total" in tool_filtering:
        assert max(len(s) for s in wrapper) <= 4
        assert not any(name.startswith("TravelAPI-") for s in wrapper for name in s)


async def test_with_filtering_off_every_adapter_hides_only_the_excluded_tools():
    sent = await sent_per_step({"enabled": False, "exclude": ["TravelAPI-*"]})
    for steps in sent.values():
        assert all(len(s) == 128 - 18 and not any(n.startswith("TravelAPI-") for n in s) for s in steps)


async def test_a_catalog_folder_replays_as_its_steps_do_one_by_one():
    """``replay_catalog_conversations`` (the agent-loop benchmark's and the conversation folds' entry)
    is the step-by-step replay of the folder's conversations, figure for figure."""
    from sk_toolfilter.measure.conversations import replay_catalog_conversations

    steps = load_steps(FIXTURE / "conversations.jsonl")
    first = steps[0].conversation
    spec = parse_agent(
        {"name": "bfcl", "tools": [{"type": "catalog", "name": "bfcl", "path": str(FIXTURE / "tools.jsonl")}]},
        source="test",
    )
    async with await open_toolset(spec) as toolset:
        replay = await replay_conversations(
            toolset.kernel, toolset.manager, [s for s in steps if s.conversation == first]
        )
    figures = await replay_catalog_conversations(
        FIXTURE, {}, conversations="conversations.jsonl", keep=lambda conversation: conversation == first
    )
    untimed = lambda summary: {k: v for k, v in summary.items() if not k.endswith("_ms")}  # noqa: E731
    assert untimed(figures["all"]) == untimed(replay.summary()) and figures["all"]["steps"] > 0
