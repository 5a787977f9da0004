"""Provider tool search (``tool_filtering.provider_search``) through Agent Framework's real OpenAI
Responses client on the real ``openai`` SDK, against a scripted Responses server on loopback."""

from __future__ import annotations

import inspect
import json

import pytest
from agent_framework import Agent
from agent_framework_openai import OpenAIChatClient
from agent_framework_openai._chat_client import RawOpenAIChatClient

from sk_toolfilter import ToolFilterConfig
from sk_toolfilter.agent_framework import ToolSearchOpenAIChatClient, create_agent_framework_filter
from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.selection.provider_search import openai_supports_tool_search
from tests.responses_server import (
    ScriptedResponsesServer,
    claude_text,
    claude_tool_search,
    claude_tool_use,
    function_call,
    message,
    tool_search,
)
from tests.test_agent import spec  # noqa: F401  (fixture)
from tests.test_agent_framework import TOOLS, ran

MODEL = "gpt-5.4"


@pytest.fixture(autouse=True)
def clear_ran():
    ran.clear()


def wire(
    server: ScriptedResponsesServer, request_index: int = 0, kind: str = "function"
) -> tuple[list[str], list[str], list[dict]]:
    """(loaded function names, deferred function names, the other tool entries) of one request; `kind`:
    the functions' tool type (OpenAI "function", Anthropic "custom")."""
    tools = server.tools(request_index)
    functions = [t for t in tools if t.get("type") == kind]
    loaded = [t["name"] for t in functions if not t.get("defer_loading")]
    deferred = [t["name"] for t in functions if t.get("defer_loading") is True]
    return loaded, deferred, [t for t in tools if t.get("type") != kind]


async def searching_agent(server: ScriptedResponsesServer, config: ToolFilterConfig, **options):
    client = ToolSearchOpenAIChatClient(model=MODEL, api_key="offline", base_url=server.base_url)
    tool_filter = await create_agent_framework_filter(list(TOOLS), config, agent_client=client)
    agent = Agent(client=client, tools=tool_filter.tools, middleware=tool_filter.middleware, default_options=options)
    return agent, tool_filter


ON = {"enabled": True}


async def test_the_selection_is_loaded_and_every_other_usable_tool_deferred_with_the_search_tool():
    config = ToolFilterConfig(top_k=3, provider_search=ON, exclude=["delete_all_files"])
    with ScriptedResponsesServer([[message("It is in Memphis.")]]) as server:
        agent, tool_filter = await searching_agent(server, config)
        await agent.run("Where is my package 1Z999?")
    loaded, deferred, others = wire(server)
    assert loaded == tool_filter.chat_middleware.last_selection and "track_package" in loaded
    every_tool = {t.name for t in TOOLS}
    assert set(loaded) | set(deferred) == every_tool - {"delete_all_files"}  # all the agent may use, once
    assert not set(loaded) & set(deferred)
    assert "delete_all_files" not in json.dumps(server.requests)  # excluded: never sent, deferred or not
    assert others == [{"type": "tool_search"}]  # the search tool, itself never deferred
    assert not any(n.startswith("ToolSearch-") for n in loaded + deferred)  # no discovery tools beside it


async def test_a_streamed_run_carries_the_deferred_tools_too():
    """The deferral is set per model call in the task's context; a streamed run prepares its request in
    that context as well (the scripted server streams server-sent events)."""
    config = ToolFilterConfig(top_k=3, provider_search=ON)
    with ScriptedResponsesServer([[message("It is in Memphis.")]]) as server:
        agent, tool_filter = await searching_agent(server, config)
        updates = agent.run("Where is my package 1Z999?", stream=True)
        async for _ in updates:
            pass
        response = await updates.get_final_response()
    assert response.text == "It is in Memphis." and server.requests[0]["stream"] is True
    loaded, deferred, others = wire(server)
    assert loaded == tool_filter.chat_middleware.last_selection and deferred and others == [{"type": "tool_search"}]
    assert set(loaded) | set(deferred) == {t.name for t in TOOLS}


async def test_a_tool_found_by_the_providers_search_runs_and_the_stateless_replay_stays_valid():
    config = ToolFilterConfig(top_k=2, provider_search=ON)
    definition = {"type": "function", "name": "reschedule_event", "parameters": {}, "defer_loading": True}
    script = [
        [
            *tool_search("move a calendar event", [definition]),
            function_call("reschedule_event", {"event_id": "e1", "new_time": "Monday"}),
        ],
        [message("Moved to Monday.")],
    ]
    with ScriptedResponsesServer(script) as server:
        agent, _ = await searching_agent(server, config, store=False)
        response = await agent.run("Where is my package 1Z999?")
    assert response.text == "Moved to Monday."
    assert ran == ["reschedule_event"]  # deferred on the first request, found, called, run (not refused)
    assert "reschedule_event" in wire(server, 0)[1]
    replay = server.requests[1]["input"]
    kinds = [(item.get("type"), item.get("name")) for item in replay]
    assert ("function_call", "reschedule_event") in kinds and ("function_call_output", None) in kinds
    # Agent Framework keeps the search call as a hosted function call and drops its output: replayed as
    # is, it would be a function call named tool_search with no output. The client leaves it out.
    assert ("function_call", "tool_search") not in kinds
    assert "reschedule_event" in wire(server, 1)[0]  # the conversation names it now: loaded


async def test_agent_framework_alone_would_replay_the_search_as_a_function_call_without_output(monkeypatch):
    """Pins the Agent Framework behaviour the client works around (docs: integrations/agent-framework):
    when Agent Framework replays tool_search_call / tool_search_output items itself, this test fails and
    the workaround can go."""
    monkeypatch.setattr(
        ToolSearchOpenAIChatClient, "_prepare_content_for_openai", OpenAIChatClient._prepare_content_for_openai
    )
    config = ToolFilterConfig(top_k=2, provider_search=ON)
    script = [[*tool_search("calendar", []), function_call("list_events", {"day": "Friday"})], [message("ok")]]
    with ScriptedResponsesServer(script) as server:
        agent, _ = await searching_agent(server, config, store=False)
        await agent.run("What is on my calendar Friday?")
    replayed = [i for i in server.requests[1]["input"] if i.get("name") == "tool_search"]
    assert [i["type"] for i in replayed] == ["function_call"]
    assert not [i for i in server.requests[1]["input"] if i.get("type") == "tool_search_output"]


async def test_the_cap_counts_loaded_tools_only():
    config = ToolFilterConfig(top_k=5, max_tools_total=1, provider_search=ON)
    with ScriptedResponsesServer([[message("ok")]]) as server:
        agent, _ = await searching_agent(server, config)
        await agent.run("Where is my package 1Z999? And what is on my calendar Friday?")
    loaded, deferred, _ = wire(server)
    assert len(loaded) == 1 and len(deferred) == len(TOOLS) - 1


async def test_loaded_bounds_the_selection_sent_loaded():
    config = ToolFilterConfig(top_k=5, provider_search={"enabled": True, "loaded": 1})
    with ScriptedResponsesServer([[message("ok")]]) as server:
        agent, _ = await searching_agent(server, config)
        await agent.run("Where is my package 1Z999? Then list my Friday events and move the first one.")
    loaded, deferred, _ = wire(server)
    assert len(loaded) == 1 and len(loaded) + len(deferred) == len(TOOLS)


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4.1-mini", "gpt-5", "gpt-5.3-codex", "o3", "my-deployment"])
def test_a_model_without_tool_search_fails_at_start_with_the_model_named(model):
    with pytest.raises(ConfigError, match=f"model '{model}' has no tool search"):
        ToolSearchOpenAIChatClient(model=model, api_key="offline")


@pytest.mark.parametrize(
    "model", ["gpt-5.4", "gpt-5.4-mini", "gpt-5.4-2026-03-05", "gpt-5.5", "gpt-6", "openai/gpt-5.4"]
)
def test_the_models_documented_with_tool_search_are_accepted(model):
    assert openai_supports_tool_search(model)


async def test_a_client_that_cannot_defer_is_refused_at_start_and_before_the_first_request():
    config = ToolFilterConfig(provider_search=ON)
    with ScriptedResponsesServer([]) as server:
        plain = OpenAIChatClient(model=MODEL, api_key="offline", base_url=server.base_url)
        with pytest.raises(ConfigError, match="OpenAIChatClient, which sends no deferred tools"):
            await create_agent_framework_filter(list(TOOLS), config, agent_client=plain)
        tool_filter = await create_agent_framework_filter(list(TOOLS), config)  # not given: checked per call
        agent = Agent(client=plain, tools=tool_filter.tools, middleware=tool_filter.middleware)
        with pytest.raises(ConfigError, match="sends no deferred tools"):
            await agent.run("Where is my package 1Z999?")
    assert server.requests == []  # nothing went on the wire


async def test_off_by_default_nothing_is_deferred():
    with ScriptedResponsesServer([[message("ok")]]) as server:
        agent, tool_filter = await searching_agent(server, ToolFilterConfig(top_k=2))
        await agent.run("Where is my package 1Z999?")
    loaded, deferred, others = wire(server)
    assert deferred == [] and others == [] and loaded == tool_filter.chat_middleware.last_selection


def test_the_private_agent_framework_methods_the_client_overrides_are_still_there():
    """The client overrides two private methods of Agent Framework's Responses client (no public hook
    sets defer_loading). If Agent Framework renames or reshapes them, this fails before a user's
    requests silently lose their deferred tools."""
    tools = inspect.signature(RawOpenAIChatClient._prepare_tools_for_openai)
    assert list(tools.parameters) == ["self", "tools"]
    content = inspect.signature(RawOpenAIChatClient._prepare_content_for_openai)
    assert list(content.parameters)[:3] == ["self", "role", "content"]
    assert "replays_local_storage" in content.parameters


def test_the_configuration_is_read_from_yaml_and_refuses_what_is_not_wired():
    config = ToolFilterConfig.from_mapping({"provider_search": {"enabled": True, "loaded": 4}})
    assert config.provider_search.enabled and config.provider_search.loaded == 4
    with pytest.raises(ConfigError, match=r"provider_search\.provider"):
        ToolFilterConfig.from_mapping({"provider_search": {"enabled": True, "provider": "bedrock"}})
    with pytest.raises(ConfigError, match=r"provider_search\.loaded"):
        ToolFilterConfig.from_mapping({"provider_search": {"loaded": 0}})


async def test_the_report_estimates_provider_search_from_the_wire_it_recorded(spec, tmp_path):  # noqa: F811
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.measure.report import build_token_report, render_markdown, render_terminal
    from tests.test_report import QUERIES, independent_tool_tokens

    async with await open_toolset(spec) as tools:
        report = await build_token_report(spec, tools.kernel, tools.manager, QUERIES, provider_search=True)
        discovery = set(tools.manager.discovery_names)
    for row in report.queries:
        loaded = [n for n in row.selected if n not in discovery]
        assert row.tools_deferred == row.tools_off - len(loaded)  # every other tool, none twice
        # Counted on what OpenAI documents the model sees: the loaded schemas, the deferred names and
        # descriptions, the search tool — between the filtered request and the unfiltered one.
        assert independent_tool_tokens({"tools": [{"type": "tool_search"}]}) < row.tools_tokens_provider_search
        assert row.tools_tokens_provider_search < row.tools_tokens_off
        # Claude: the deferred tools are documented as not in the prompt: loaded schemas and the search tool.
        search_tool = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
        alone = independent_tool_tokens({"tools": [search_tool]})
        assert (row.tools_tokens_provider_search_claude > alone) == bool(loaded)
        assert row.tools_tokens_provider_search_claude < row.tools_tokens_provider_search
    totals = report.totals
    assert totals["tools_tokens_on"] < totals["tools_tokens_provider_search"] < totals["tools_tokens_off"]
    for text in (render_terminal(report), render_markdown(report)):
        assert "Provider tool search, an estimate from what the providers document" in text
        assert "not measured" in text and "Claude" in text


async def test_without_the_flag_the_report_has_no_provider_search_figures(spec):  # noqa: F811
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.measure.report import build_token_report, render_terminal
    from tests.test_report import QUERIES

    async with await open_toolset(spec) as tools:
        report = await build_token_report(spec, tools.kernel, tools.manager, QUERIES[:1])
    assert "tools_tokens_provider_search" not in report.totals
    assert "Provider tool search" not in render_terminal(report)


# ---------------------------------------------------------------- Anthropic (Messages API)

CLAUDE = "claude-sonnet-4-5"


async def claude_agent(server: ScriptedResponsesServer, config: ToolFilterConfig):
    from sk_toolfilter.agent_framework.anthropic_search import ToolSearchAnthropicClient

    client = ToolSearchAnthropicClient(model=CLAUDE, api_key="offline", base_url=server.root)
    tool_filter = await create_agent_framework_filter(list(TOOLS), config, agent_client=client)
    return Agent(client=client, tools=tool_filter.tools, middleware=tool_filter.middleware), tool_filter


async def test_claude_gets_the_selection_loaded_the_rest_deferred_and_the_bm25_search_tool():
    config = ToolFilterConfig(
        top_k=3, provider_search={"enabled": True, "provider": "anthropic"}, exclude=["delete_all_files"]
    )
    with ScriptedResponsesServer([[claude_text("In Memphis.")]], anthropic=True) as server:
        agent, tool_filter = await claude_agent(server, config)
        await agent.run("Where is my package 1Z999?")
    loaded, deferred, others = wire(server, 0, "custom")
    assert loaded == tool_filter.chat_middleware.last_selection and "track_package" in loaded
    assert set(loaded) | set(deferred) == {t.name for t in TOOLS} - {"delete_all_files"}
    assert "delete_all_files" not in json.dumps(server.requests)
    assert others == [{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}]


async def test_a_tool_claude_found_runs_and_the_replay_has_no_orphan_tool_use():
    config = ToolFilterConfig(top_k=2, provider_search=ON)
    script = [
        [
            *claude_tool_search("move a calendar event", ["reschedule_event"]),
            claude_tool_use("reschedule_event", {"event_id": "e1", "new_time": "Monday"}),
        ],
        [claude_text("Moved to Monday.")],
    ]
    with ScriptedResponsesServer(script, anthropic=True) as server:
        agent, _ = await claude_agent(server, config)
        response = await agent.run("Where is my package 1Z999?")
    assert response.text == "Moved to Monday." and ran == ["reschedule_event"]
    assert "reschedule_event" in wire(server, 0, "custom")[1]
    replayed = [block for m in server.requests[1]["messages"] for block in m["content"] if isinstance(block, dict)]
    uses = [b["id"] for b in replayed if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in replayed if b["type"] == "tool_result"]
    assert uses == results == ["toolu_1"]  # every tool_use has its tool_result: the Messages API's rule
    assert "srvtoolu_1" not in json.dumps(server.requests[1]["messages"])


async def test_agent_framework_alone_would_replay_claudes_search_as_a_tool_use_without_result(monkeypatch):
    """Pins the Agent Framework behaviour the Anthropic client works around (see its module docstring)."""
    from agent_framework_anthropic import AnthropicClient

    from sk_toolfilter.agent_framework.anthropic_search import ToolSearchAnthropicClient

    monkeypatch.setattr(
        ToolSearchAnthropicClient, "_prepare_message_for_anthropic", AnthropicClient._prepare_message_for_anthropic
    )
    config = ToolFilterConfig(top_k=2, provider_search=ON)
    script = [[*claude_tool_search("calendar", []), claude_tool_use("list_events", {"day": "Friday"})]]
    with ScriptedResponsesServer(script, anthropic=True) as server:
        agent, _ = await claude_agent(server, config)
        await agent.run("What is on my calendar Friday?")
    replayed = [block for m in server.requests[1]["messages"] for block in m["content"] if isinstance(block, dict)]
    orphan = [b for b in replayed if b.get("type") == "tool_use" and b["id"] == "srvtoolu_1"]
    assert orphan and not [b for b in replayed if b.get("tool_use_id") == "srvtoolu_1"]


@pytest.mark.parametrize(
    "model", ["claude-3-7-sonnet-latest", "claude-sonnet-4-20250514", "claude-opus-4-1", "gpt-5.4"]
)
def test_a_claude_model_without_tool_search_fails_at_start_with_the_model_named(model):
    from sk_toolfilter.agent_framework.anthropic_search import ToolSearchAnthropicClient

    with pytest.raises(ConfigError, match=f"model '{model}' has no tool search"):
        ToolSearchAnthropicClient(model=model, api_key="offline")


@pytest.mark.parametrize(
    "model",
    ["claude-sonnet-4-5", "claude-sonnet-4-5-20250929", "claude-opus-4-5", "claude-haiku-4-5", "claude-opus-4-6"],
)
def test_the_claude_models_documented_with_tool_search_are_accepted(model):
    from sk_toolfilter.selection.provider_search import anthropic_supports_tool_search

    assert anthropic_supports_tool_search(model)


async def test_a_provider_that_is_not_the_clients_is_refused_at_start():
    from sk_toolfilter.agent_framework.anthropic_search import ToolSearchAnthropicClient

    client = ToolSearchAnthropicClient(model=CLAUDE, api_key="offline")
    config = ToolFilterConfig(provider_search={"enabled": True, "provider": "openai"})
    with pytest.raises(
        ConfigError, match="provider is 'openai', but the agent's chat client is ToolSearchAnthropicClient"
    ):
        await create_agent_framework_filter(list(TOOLS), config, agent_client=client)


def test_the_private_anthropic_methods_the_client_overrides_are_still_there():
    from agent_framework_anthropic._chat_client import RawAnthropicClient

    tools = inspect.signature(RawAnthropicClient._prepare_tools_for_anthropic)
    assert list(tools.parameters)[:2] == ["self", "options"]
    message = inspect.signature(RawAnthropicClient._prepare_message_for_anthropic)
    assert list(message.parameters) == ["self", "message"]


# ---------------------------------------------------------------- where it cannot work: refused at start


async def test_semantic_kernel_request_paths_refuse_provider_search_at_start():
    from semantic_kernel import Kernel
    from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings

    from sk_toolfilter import create_tool_filter, wrap_chat_service
    from sk_toolfilter.demo import MathPlugin
    from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service

    kernel = Kernel()
    kernel.add_plugin(MathPlugin(), "Math")
    manager = await create_tool_filter(kernel, ToolFilterConfig(provider_search=ON))
    transport = RecordingTransport()
    with pytest.raises(ConfigError, match="Semantic Kernel's chat completion connector sends no deferred tools"):
        wrap_chat_service(offline_chat_service(transport), manager)
    with pytest.raises(ConfigError, match="provider_search needs the OpenAI Responses API or Claude"):
        await manager.prepare_execution_settings("add 2 and 3", OpenAIChatPromptExecutionSettings())
    assert transport.requests == []
    await manager.aclose()


async def test_an_agent_file_with_provider_search_and_a_client_without_it_fails_at_load(tmp_path):
    import shutil
    from pathlib import Path

    from sk_toolfilter.agents.agent import load_agent
    from sk_toolfilter.measure.wire import RecordingTransport, offline_agent_framework_client

    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "instructions", tmp_path / "instructions")
    text = (root / "agent.yaml").read_text().replace("name: ", "framework: agent-framework\nname: ", 1)
    text = text.replace("tool_filtering:\n", "tool_filtering:\n  provider_search: {enabled: true}\n", 1)
    (tmp_path / "agent.yaml").write_text(text)
    transport = RecordingTransport()
    with pytest.raises(ConfigError, match="OpenAIChatCompletionClient, which sends no deferred tools"):
        await load_agent(tmp_path / "agent.yaml", chat_service=offline_agent_framework_client(transport))
    assert transport.requests == []


# ---------------------------------------------------------------- Semantic Kernel: OpenAIResponsesAgent


async def responses_agent(server: ScriptedResponsesServer, config: ToolFilterConfig, model: str = MODEL, client=None):
    from semantic_kernel import Kernel
    from semantic_kernel.agents import OpenAIResponsesAgent

    from sk_toolfilter import create_tool_filter
    from sk_toolfilter.demo import MathPlugin, MessagingPlugin
    from sk_toolfilter.integration.responses_agent import provider_search_openai_client

    kernel = Kernel()
    kernel.add_plugin(MathPlugin(), "Math")
    kernel.add_plugin(MessagingPlugin(), "Messaging")
    manager = await create_tool_filter(kernel, config)
    client = client or provider_search_openai_client(api_key="offline", base_url=server.base_url, max_retries=0)
    agent = OpenAIResponsesAgent(ai_model_id=model, client=client, kernel=kernel, store_enabled=False)
    return agent, manager, kernel


async def test_an_sk_responses_agent_sends_the_selection_loaded_the_rest_deferred_and_runs_a_found_tool():
    from sk_toolfilter.integration.responses_agent import invoke_with_provider_search

    config = ToolFilterConfig(top_k=2, provider_search={**ON, "unit": "tool"}, exclude=["Messaging-send_email"])
    script = [[*tool_search("percent", []), function_call("Math-percentage", {"part": 15, "whole": 80})]]
    with ScriptedResponsesServer([*script, [message("18.75%")]]) as server:
        agent, manager, kernel = await responses_agent(server, config)
        replies = [i.message.content async for i in invoke_with_provider_search(agent, manager, "Add 2 and 3")]
        loaded, deferred, others = wire(server)
        every = {f.fully_qualified_name for f in kernel.get_full_list_of_function_metadata()}
        visible = every - {"Messaging-send_email"} - set(manager.discovery_names)
    assert replies[-1] == "18.75%"
    assert "Math-add" in loaded and "Math-percentage" in deferred  # deferred, found, run by SK's function loop
    assert set(loaded) | set(deferred) == visible and not set(loaded) & set(deferred)
    assert others == [{"type": "tool_search"}]
    assert "Messaging-send_email" not in json.dumps(server.requests)
    assert server.requests[1]["input"][-1] == {"type": "function_call_output", "output": "18.75%", "call_id": "call_1"}
    await manager.aclose()


async def test_an_sk_responses_agent_without_provider_search_gets_the_selection_only():
    from sk_toolfilter.integration.responses_agent import invoke_with_provider_search

    with ScriptedResponsesServer([[message("5")]]) as server:
        agent, manager, _ = await responses_agent(server, ToolFilterConfig(top_k=2))
        [_ async for _ in invoke_with_provider_search(agent, manager, "Add 2 and 3")]
        loaded, deferred, others = wire(server)
    assert "Math-add" in loaded and len(loaded) <= 4 and deferred == [] and others == []
    await manager.aclose()


@pytest.mark.parametrize("plain_client", [False, True], ids=["old model", "client without the transport"])
async def test_an_sk_responses_agent_that_cannot_defer_fails_before_any_request(plain_client):
    from openai import AsyncOpenAI

    from sk_toolfilter.integration.responses_agent import invoke_with_provider_search

    with ScriptedResponsesServer([]) as server:
        client = AsyncOpenAI(api_key="offline", base_url=server.base_url) if plain_client else None
        agent, manager, _ = await responses_agent(server, ToolFilterConfig(provider_search=ON), "gpt-4.1", client)
        expected = "sends no deferred tools" if plain_client else "model 'gpt-4.1' has no tool search"
        with pytest.raises(ConfigError, match=expected):
            [_ async for _ in invoke_with_provider_search(agent, manager, "What is 2 plus 3?")]
    assert server.requests == []
    await manager.aclose()


def documented_bill(body: dict) -> int:
    """What a provider that bills as OpenAI documents would count: loaded tools in full, deferred ones by
    name and description (characters, standing in for tokens)."""
    total = 0
    for tool in body.get("tools") or []:
        shown = {k: tool.get(k) for k in ("name", "description")} if tool.get("defer_loading") else tool
        total += len(json.dumps(shown))
    return total


async def test_the_live_report_reads_the_billed_input_tokens_of_each_way_of_sending(tmp_path, monkeypatch):
    import asyncio
    from pathlib import Path

    import yaml

    from sk_toolfilter.cli import main

    root = Path(__file__).resolve().parents[1]
    data = yaml.safe_load((root / "agent.yaml").read_text())
    for source in data["tools"]:
        if "init" in source:
            source["init"]["root"] = str(tmp_path / "sandbox")
    data["instructions"] = {"inline": "You are a helpful assistant."}
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(data))
    with ScriptedResponsesServer([], billed=documented_bill) as server:
        monkeypatch.setenv("ATLAS_MODEL", MODEL)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "offline")
        argv = ["report", str(tmp_path / "agent.yaml"), "--provider-search", "--live", "--limit", "2"]
        assert await asyncio.to_thread(main, [*argv, "--out", str(tmp_path / "out")]) == 0
    live = json.loads((tmp_path / "out" / "live.json").read_text())
    assert live["model"] == MODEL and len(live["queries"]) == 2
    assert len(server.requests) == 6  # off, on, provider search per query
    for n, row in enumerate(live["queries"]):
        off, on, searched = server.requests[3 * n : 3 * n + 3]
        assert [row["input_tokens"][m] for m in ("off", "on", "provider_search")] == [
            documented_bill(off),
            documented_bill(on),
            documented_bill(searched),
        ]
        assert not any(t.get("defer_loading") for t in off["tools"] + on["tools"])
        assert [t["name"] for t in on["tools"]] == row["loaded"]
        assert sum(bool(t.get("defer_loading")) for t in searched["tools"]) == row["deferred"] > 0
        assert searched["tools"][-1] == {"type": "tool_search"} and off["tool_choice"] == "none"
        assert row["input_tokens"]["on"] < row["input_tokens"]["provider_search"] < row["input_tokens"]["off"]
    assert "provider search" in (tmp_path / "out" / "live.md").read_text()


def test_live_without_provider_search_or_with_an_old_model_is_refused_before_anything_runs(tmp_path, monkeypatch):
    from pathlib import Path

    from sk_toolfilter.cli import main

    agent = str(Path(__file__).resolve().parents[1] / "agent.yaml")
    assert main(["report", agent, "--live", "--out", str(tmp_path)]) == 2
    monkeypatch.setenv("ATLAS_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "offline")
    assert main(["report", agent, "--provider-search", "--live", "--out", str(tmp_path)]) == 2
    assert not (tmp_path / "report.json").exists()


def searching_agent_file(tmp_path, framework: str = "agent-framework"):
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "instructions", tmp_path / "instructions", dirs_exist_ok=True)
    text = (root / "agent.yaml").read_text().replace("name: ", f"framework: {framework}\nname: ", 1)
    text = text.replace("tool_filtering:\n", "tool_filtering:\n  provider_search: {enabled: true, unit: tool}\n", 1)
    text = text.replace("init: {root: sandbox}", f"init: {{root: {tmp_path / 'sandbox'}}}")
    (tmp_path / "agent.yaml").write_text(text)
    return tmp_path / "agent.yaml"


async def test_an_agent_framework_agent_file_with_provider_search_gets_a_responses_client(tmp_path, monkeypatch):
    from sk_toolfilter.agents.agent import load_agent

    path = searching_agent_file(tmp_path)
    with ScriptedResponsesServer([[message("4")]]) as server:
        monkeypatch.setenv("ATLAS_MODEL", MODEL)
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "offline")
        async with await load_agent(path) as loaded:
            assert isinstance(loaded.agent.client, ToolSearchOpenAIChatClient)
            assert (await loaded.agent.run("what is 2 + 2?")).text == "4"
    loaded_names, deferred, others = wire(server)
    assert "Math-add" in loaded_names + deferred and deferred and others == [{"type": "tool_search"}]
    assert not any(n.startswith("ToolSearch-") for n in loaded_names + deferred)
    monkeypatch.setenv("ATLAS_MODEL", "gpt-4o-mini")
    with pytest.raises(ConfigError, match="has no tool search"):
        await load_agent(path)


async def test_the_report_of_an_agent_file_with_provider_search_estimates_it(tmp_path):
    import asyncio

    from sk_toolfilter.cli import main

    path = searching_agent_file(tmp_path, framework="semantic-kernel")
    argv = ["report", str(path), "--limit", "2", "--out", str(tmp_path / "out")]
    assert await asyncio.to_thread(main, argv) == 0
    totals = json.loads((tmp_path / "out" / "report.json").read_text())["totals"]
    assert totals["tools_tokens_on"] < totals["tools_tokens_provider_search"] < totals["tools_tokens_off"]


def test_validate_refuses_what_load_agent_refuses_at_start(tmp_path, monkeypatch, capsys):
    from sk_toolfilter.cli import main

    path = str(searching_agent_file(tmp_path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # validate needs no credential
    monkeypatch.setenv("ATLAS_MODEL", "gpt-4o-mini")
    assert main(["validate", path]) == 2
    err = capsys.readouterr().err
    assert "model 'gpt-4o-mini' has no tool search" in err and "agent.yaml" in err
    monkeypatch.setenv("ATLAS_MODEL", MODEL)
    assert main(["validate", path]) == 0
    sk_path = str(searching_agent_file(tmp_path / "sk", framework="semantic-kernel"))
    assert main(["validate", sk_path]) == 2
    assert "Semantic Kernel's chat completion connector sends no deferred tools" in capsys.readouterr().err


async def test_load_agent_refuses_provider_search_for_a_model_without_it_before_opening_any_tool(tmp_path, monkeypatch):
    from sk_toolfilter.agents.agent import load_agent

    path = searching_agent_file(tmp_path)
    monkeypatch.setenv("ATLAS_MODEL", "gpt-4o-mini")
    with pytest.raises(ConfigError, match="has no tool search"):
        await load_agent(path)
    assert not (tmp_path / "sandbox").exists()  # no plugin was started (the Files plugin creates its root)


async def test_the_offer_decides_what_is_loaded_and_what_is_deferred_for_every_adapter(demo_kernel):
    from semantic_kernel.contents import ChatHistory

    from sk_toolfilter import create_tool_filter

    config = ToolFilterConfig(top_k=2, provider_search={"enabled": True, "loaded": 2}, exclude=["Messaging-send_email"])
    manager = await create_tool_filter(demo_kernel, config)
    names = [f.fully_qualified_name for f in demo_kernel.get_full_list_of_function_metadata()]
    history = ChatHistory()
    history.add_user_message("add 2 and 3")
    offer = await manager.offer(history, names)
    visible = set(names) - {"Messaging-send_email"} - set(manager.discovery_names)
    assert 0 < len(offer.names) <= 2 and "Math-add" in offer.names
    assert set(offer.names) | set(offer.deferred) == visible and not set(offer.names) & set(offer.deferred)
    assert offer.on_wire == [*offer.names, *offer.deferred]
    off = await create_tool_filter(demo_kernel, ToolFilterConfig(top_k=2))
    assert (await off.offer(history, names)).deferred == ()  # without provider search nothing is deferred


async def test_by_default_openai_gets_each_plugins_deferred_tools_as_namespaces_and_claude_flat_ones():
    """unit: auto — the cheaper wire per provider: namespaces with OpenAI (the model sees a namespace by
    its name and description), each function with Claude (no namespaces)."""
    from sk_toolfilter.integration.responses_agent import invoke_with_provider_search
    from sk_toolfilter.selection.provider_search import unit_for

    assert ToolFilterConfig(provider_search=ON).provider_search.unit == "auto"
    assert (unit_for("openai", "auto"), unit_for("anthropic", "auto")) == ("plugin", "tool")
    with ScriptedResponsesServer([[message("5")]]) as server:
        agent, manager, _ = await responses_agent(server, ToolFilterConfig(top_k=2, provider_search=ON))
        [i async for i in invoke_with_provider_search(agent, manager, "What is 2 plus 3?")]
    spaces = [t for t in server.tools(0) if t["type"] == "namespace"]
    assert spaces and all(f.get("defer_loading") for s in spaces for f in s["tools"])
    await manager.aclose()
