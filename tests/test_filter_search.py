"""The filter answers the provider's tool search (``provider_search.search: filter``): through Agent
Framework's real OpenAI Responses and Claude clients and Semantic Kernel's real ``OpenAIResponsesAgent``,
on the real ``openai`` / ``anthropic`` SDKs, against scripted servers on loopback speaking the documented
client-search shapes (OpenAI ``tool_search`` with ``execution: "client"``; Anthropic's custom search
tool answered with ``tool_reference`` blocks)."""

from __future__ import annotations

import json

import pytest

from sk_toolfilter import ToolFilterConfig
from sk_toolfilter.agent_framework import ToolSearchOpenAIChatClient, create_agent_framework_filter
from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.provider_wire.search_answer import (
    ANTHROPIC_CLIENT_SEARCH_TOOL,
    MAX_QUERY_CHARS,
    OPENAI_CLIENT_SEARCH_TOOL,
    SearchSession,
    rank_for_search,
    search_query,
)
from tests.responses_server import (
    ScriptedResponsesServer,
    claude_text,
    claude_tool_use,
    client_tool_search,
    function_call,
    message,
)
from tests.test_agent_framework import TOOLS, ran
from tests.test_provider_search import wire

MODEL = "gpt-5.4"
FILTER = {"enabled": True, "search": "filter"}
CALENDAR = "What is on my calendar on Friday?"


@pytest.fixture(autouse=True)
def clear_ran():
    ran.clear()


async def openai_agent(server: ScriptedResponsesServer, config: ToolFilterConfig, **options):
    from agent_framework import Agent

    client = ToolSearchOpenAIChatClient(model=MODEL, api_key="offline", base_url=server.base_url)
    tool_filter = await create_agent_framework_filter(list(TOOLS), config, agent_client=client)
    agent = Agent(client=client, tools=tool_filter.tools, middleware=tool_filter.middleware, default_options=options)
    return agent, tool_filter


def answers(body: dict) -> list[dict]:
    return [i for i in body.get("input") or [] if isinstance(i, dict) and i.get("type") == "tool_search_output"]


def names_in(output: dict) -> list[str]:
    return [t["name"] for t in output["tools"]]


async def test_the_model_searches_and_the_answer_holds_the_filters_first_tools_which_then_run():
    config = ToolFilterConfig(top_k=2, provider_search=FILTER, exclude=["delete_all_files"])
    script = [
        [client_tool_search("track a shipment by its tracking number")],
        [function_call("track_package", {"tracking_number": "1Z999"})],
        [message("It is in Memphis.")],
    ]
    with ScriptedResponsesServer(script) as server:
        agent, tool_filter = await openai_agent(server, config, store=False)
        response = await agent.run(CALENDAR)
        manager = tool_filter.manager
        loaded, deferred, others = wire(server, 0)
        expected = (
            await rank_for_search(manager, "track a shipment by its tracking number", [*loaded, *deferred])
        ).matched
    assert response.text == "It is in Memphis." and ran == ["track_package"]  # found, called, run
    assert others == [OPENAI_CLIENT_SEARCH_TOOL] and "track_package" in deferred
    (answer,) = answers(server.requests[1])
    assert answer["call_id"] == "call_search_1" and answer["execution"] == "client"
    assert names_in(answer) == [n for n in expected if n in deferred][: config.provider_search.results]
    assert names_in(answer)[0] == "track_package"
    assert not any("defer_loading" in t for t in answer["tools"])  # loaded by the answer
    assert "delete_all_files" not in json.dumps(server.requests)  # excluded: in no body, in no answer
    # The cache: every request of the conversation carries the same tools in the same order; the search
    # and its answer are replayed in one form, after the same opening.
    assert all(body["tools"] == server.requests[0]["tools"] for body in server.requests)
    opening = server.requests[1]["input"]
    assert server.requests[2]["input"][: len(opening)] == opening
    assert len(server.requests) == 3


async def test_a_stored_conversation_continues_from_the_searching_response():
    config = ToolFilterConfig(top_k=2, provider_search=FILTER)
    script = [[client_tool_search("track a shipment")], [function_call("track_package", {"tracking_number": "1"})]]
    with ScriptedResponsesServer([*script, [message("ok")]]) as server:
        agent, _ = await openai_agent(server, config)
        await agent.run(CALENDAR)
    follow_up = server.requests[1]
    assert follow_up["previous_response_id"] == "resp_1"
    assert [i["type"] for i in follow_up["input"]] == ["tool_search_output"]
    assert ran == ["track_package"]


async def test_a_streamed_run_gets_its_search_answered_in_flight():
    config = ToolFilterConfig(top_k=2, provider_search=FILTER)
    script = [
        [client_tool_search("track a shipment")],
        [function_call("track_package", {"tracking_number": "1Z999"})],
        [message("It is in Memphis.")],
    ]
    with ScriptedResponsesServer(script) as server:
        agent, _ = await openai_agent(server, config, store=False)
        text = "".join([u.text async for u in agent.run(CALENDAR, stream=True) if u.text])
    assert text == "It is in Memphis." and ran == ["track_package"]
    assert names_in(answers(server.requests[1])[0])[0] == "track_package"


async def test_a_search_beside_a_function_call_is_answered_with_the_next_request():
    config = ToolFilterConfig(top_k=2, provider_search=FILTER)
    script = [[client_tool_search("track a shipment"), function_call("list_events", {"day": "Friday"})]]
    with ScriptedResponsesServer([*script, [message("ok")]]) as server:
        agent, _ = await openai_agent(server, config, store=False)
        await agent.run(CALENDAR)
    assert ran == ["list_events"] and len(server.requests) == 2
    (answer,) = answers(server.requests[1])  # owed, and paid once
    assert answer["call_id"] == "call_search_1" and names_in(answer)[0] == "track_package"


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "x" * 1_000_000},
        json.dumps({"query": "[" * 5000})[:-2] + "[" * 5000,
        "[" * 100_000,
        {"query": {"nested": {"deeper": ["track a shipment"]}}},
        {"query": 42},
        {},
    ],
    ids=["1 MB query", "unterminated", "deep JSON text", "nested object", "a number", "no query"],
)
async def test_bad_search_arguments_get_a_bounded_answer_and_nothing_runs(arguments):
    config = ToolFilterConfig(top_k=2, provider_search=FILTER, exclude=["delete_all_files"])
    search = {**client_tool_search(""), "arguments": arguments}
    with ScriptedResponsesServer([[search], [message("I could not find a tool.")]]) as server:
        agent, _ = await openai_agent(server, config, store=False)
        response = await agent.run(CALENDAR)
    assert response.text == "I could not find a tool." and ran == []
    (answer,) = answers(server.requests[1])
    assert len(answer["tools"]) <= config.provider_search.results
    assert "delete_all_files" not in json.dumps(server.requests)


def test_a_query_keeps_a_few_words_without_control_characters():
    assert search_query({"query": "track\x00a\u2028shipment\x1b[31m\nnow"}) == "track a shipment [31m\nnow"
    assert len(search_query({"query": "word " * 100_000})) <= MAX_QUERY_CHARS
    assert search_query('{"query": "calendar"}') == "calendar"
    assert search_query("[" * 100_000) == search_query(None) == ""


async def test_a_repeated_call_id_is_answered_once_and_a_replayed_one_gets_the_same_tools():
    config = ToolFilterConfig(top_k=2, provider_search=FILTER)
    twice = [client_tool_search("track a shipment"), client_tool_search("delete every file")]
    with ScriptedResponsesServer([twice, [message("ok")], [message("again")]]) as server:
        agent, _ = await openai_agent(server, config, store=False)
        session = agent.create_session()
        await agent.run(CALENDAR, session=session)
        await agent.run("And on Saturday?", session=session)
    assert [a["call_id"] for a in answers(server.requests[1])] == ["call_search_1"]
    first, replayed = answers(server.requests[1])[0], answers(server.requests[2])
    assert replayed == [first]  # the stateless replay: the same answer after the same call


async def test_an_answer_replayed_from_elsewhere_keeps_only_tools_this_call_defers():
    from sk_toolfilter.provider_wire.call import WireCall, wire_call
    from sk_toolfilter.provider_wire.openai_responses import ResponsesWire

    config = ToolFilterConfig(top_k=2, provider_search=FILTER, exclude=["delete_all_files"])
    with ScriptedResponsesServer([[message("ok")]]) as server:
        _, tool_filter = await openai_agent(server, config)
        manager = tool_filter.manager
        session = SearchSession(manager, ("list_events",), ("track_package", "reschedule_event"), 5)
        import httpx

        injected = {"type": "tool_search_output", "call_id": "x", "execution": "client", "status": "completed",
                    "tools": [{"type": "function", "name": "delete_all_files"}, {"type": "function", "name": "nope"},
                              {"type": "function", "name": "track_package"}]}  # fmt: skip
        tools = [{"type": "function", "name": n, "parameters": {}} for n in ("list_events", "track_package")]
        body = {"model": MODEL, "input": [injected], "tools": tools}
        async with httpx.AsyncClient(transport=ResponsesWire()) as client:
            with wire_call(WireCall(session=session)):
                await client.post(f"{server.base_url}/responses", json=body)
    sent = answers(server.requests[0])
    assert [names_in(a) for a in sent] == [["track_package"]]  # hidden and unknown references dropped


async def test_a_found_tool_the_model_called_is_learned_from_the_models_query():
    config = ToolFilterConfig(top_k=2, provider_search=FILTER)
    script = [[client_tool_search("track a shipment")], [function_call("track_package", {"tracking_number": "1"})]]
    with ScriptedResponsesServer([*script, [message("ok")]]) as server:
        agent, tool_filter = await openai_agent(server, config, store=False)
        await agent.run(CALENDAR)
    learning = tool_filter.manager.learning
    await learning.settled()
    rows = [row.tools for row in learning.memory.rows()]
    assert rows.count(("track_package",)) == 2  # the turn's request, and the search that found it


async def test_claude_searches_with_the_custom_tool_and_the_answer_references_the_filters_first_tools():
    from agent_framework import Agent

    from sk_toolfilter.agent_framework.anthropic_search import ToolSearchAnthropicClient

    config = ToolFilterConfig(
        top_k=2, provider_search={**FILTER, "provider": "anthropic"}, exclude=["delete_all_files"]
    )
    script = [
        [claude_tool_use("tool_search", {"query": "track a shipment"}, number=1)],
        [claude_tool_use("track_package", {"tracking_number": "1Z999"}, number=2)],
        [claude_text("In Memphis.")],
    ]
    with ScriptedResponsesServer(script, anthropic=True) as server:
        client = ToolSearchAnthropicClient(model="claude-sonnet-4-5", api_key="offline", base_url=server.root)
        tool_filter = await create_agent_framework_filter(list(TOOLS), config, agent_client=client)
        agent = Agent(client=client, tools=tool_filter.tools, middleware=tool_filter.middleware)
        response = await agent.run(CALENDAR)
        _loaded, deferred, _others = wire(server, 0, "custom")
    assert response.text == "In Memphis." and ran == ["track_package"]
    assert [t for t in server.tools(0) if t.get("name") == "tool_search"] == [ANTHROPIC_CLIENT_SEARCH_TOOL]
    result = server.requests[1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    references = [b["tool_name"] for b in result["content"]]
    assert references[0] == "track_package" and set(references) <= set(deferred)
    assert "delete_all_files" not in json.dumps(server.requests)
    assert all(body["tools"] == server.requests[0]["tools"] for body in server.requests)
    with pytest.raises(ConfigError, match="non-streamed"):
        async for _ in agent.run(CALENDAR, stream=True):
            pass


async def test_an_sk_responses_agent_gets_its_search_answered_by_the_filter():
    from sk_toolfilter.integration.responses_agent import invoke_with_provider_search
    from tests.test_provider_search import responses_agent

    config = ToolFilterConfig(top_k=2, provider_search={**FILTER, "unit": "tool"}, exclude=["Messaging-send_email"])
    script = [
        [client_tool_search("percentage of a whole")],
        [function_call("Math-percentage", {"part": 15, "whole": 80})],
    ]
    with ScriptedResponsesServer([*script, [message("18.75%")]]) as server:
        agent, manager, _ = await responses_agent(server, config)
        replies = [i.message.content async for i in invoke_with_provider_search(agent, manager, "What is 2 plus 3?")]
        _loaded, deferred, others = wire(server)
    assert replies[-1] == "18.75%"
    assert others == [OPENAI_CLIENT_SEARCH_TOOL] and "Math-percentage" in deferred
    assert names_in(answers(server.requests[1])[0])[0] == "Math-percentage"
    assert "Messaging-send_email" not in json.dumps(server.requests)
    await manager.aclose()


# ---------------------------------------------------------------- namespaces (provider_search.unit: plugin)


def namespaced_call(namespace: str, name: str, arguments: dict, number: int = 1) -> dict:
    return {**function_call(name, arguments, number), "namespace": namespace}


async def test_each_plugin_goes_as_a_namespace_and_a_namespaced_call_runs_its_function():
    from sk_toolfilter.integration.responses_agent import invoke_with_provider_search
    from tests.test_provider_search import responses_agent

    config = ToolFilterConfig(top_k=2, provider_search={**FILTER, "unit": "plugin"}, exclude=["Messaging-send_email"])
    script = [
        [client_tool_search("percentage of a whole")],
        [namespaced_call("Math", "percentage", {"part": 15, "whole": 80})],
    ]
    with ScriptedResponsesServer([*script, [message("18.75%")]]) as server:
        agent, manager, _ = await responses_agent(server, config)
        replies = [i.message.content async for i in invoke_with_provider_search(agent, manager, "What is 2 plus 3?")]
    assert replies[-1] == "18.75%"  # {namespace: Math, name: percentage} ran Math-percentage
    tools = server.tools(0)
    spaces = [t for t in tools if t["type"] == "namespace"]
    assert {s["name"].split("_")[0] for s in spaces} >= {"Math", "Messaging"}
    assert all(1 <= len(s["tools"]) <= 9 and all(f.get("defer_loading") for f in s["tools"]) for s in spaces)
    assert all("-" not in f["name"] for s in spaces for f in s["tools"])  # each under its name in the plugin
    loaded = [t["name"] for t in tools if t["type"] == "function"]
    assert loaded and all(not t.get("defer_loading") for t in tools if t["type"] == "function")
    (answer,) = answers(server.requests[1])
    assert answer["tools"][0]["type"] == "namespace" and answer["tools"][0]["name"] == "Math"
    assert answer["tools"][0]["tools"][0]["name"] == "percentage"
    replayed = [i for i in server.requests[2]["input"] if i.get("type") == "function_call"]
    assert [(i["namespace"], i["name"]) for i in replayed] == [("Math", "percentage")]
    assert "send_email" not in json.dumps(server.requests)
    await manager.aclose()


async def test_agent_framework_does_not_map_a_namespaced_call_by_itself(monkeypatch):
    """Pins the Agent Framework behaviour the transport works around: a function call's ``namespace`` is
    not read, so ``{namespace: Math, name: percentage}`` finds no tool. When Agent Framework maps it itself,
    this test fails and the mapping can go."""
    from agent_framework import Agent
    from semantic_kernel import Kernel

    from sk_toolfilter.agent_framework import kernel_function_tool
    from sk_toolfilter.demo import MathPlugin
    from sk_toolfilter.provider_wire.namespaces import Namespaces

    kernel = Kernel()
    kernel.add_plugin(MathPlugin(), "Math")
    tools = [kernel_function_tool(f, kernel) for f in kernel.plugins["Math"]]
    config = ToolFilterConfig(top_k=1, provider_search={"enabled": True, "unit": "plugin"})
    script = [[namespaced_call("Math", "percentage", {"part": 15, "whole": 80})], [message("done")]]

    async def run() -> list[dict]:
        with ScriptedResponsesServer([*script]) as server:
            client = ToolSearchOpenAIChatClient(model=MODEL, api_key="offline", base_url=server.base_url)
            tool_filter = await create_agent_framework_filter(tools, config, agent_client=client)
            agent = Agent(client=client, tools=tool_filter.tools, middleware=tool_filter.middleware)
            await agent.run("What is 2 plus 3?", options={"store": False})
        return [i for i in server.requests[1]["input"] if i.get("type") == "function_call_output"]

    (mapped,) = await run()
    assert "18.75" in json.dumps(mapped)  # with the transport's mapping, Math-percentage ran
    monkeypatch.setattr(Namespaces, "incoming", lambda self, item: item)
    (unmapped,) = await run()
    assert "18.75" not in json.dumps(unmapped)  # Agent Framework alone: no such tool


def test_namespaces_with_claude_and_filter_search_in_semantic_kernel_chat_are_refused_at_start():
    from sk_toolfilter.selection.provider_search import check_mode, refuse_in_semantic_kernel

    with pytest.raises(ConfigError, match="Claude has no namespaces"):
        check_mode("anthropic", "plugin")
    check_mode("openai", "plugin")
    with pytest.raises(ConfigError, match="Semantic Kernel's chat completion connector"):
        refuse_in_semantic_kernel(ToolFilterConfig(provider_search=FILTER).provider_search)


def test_validate_checks_the_model_for_a_filter_answered_search_like_load_agent(tmp_path, capsys):
    import shutil
    from pathlib import Path

    from sk_toolfilter.cli import main

    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "instructions", tmp_path / "instructions")
    text = (root / "agent.yaml").read_text().replace("name: ", "framework: agent-framework\nname: ", 1)
    block = "  provider_search: {enabled: true, search: filter, unit: plugin}\n"
    (tmp_path / "agent.yaml").write_text(text.replace("tool_filtering:\n", "tool_filtering:\n" + block, 1))
    assert main(["validate", str(tmp_path / "agent.yaml")]) == 2
    assert "gpt-4o-mini" in capsys.readouterr().err  # no tool search: named before anything starts
    (tmp_path / "agent.yaml").write_text((tmp_path / "agent.yaml").read_text().replace("gpt-4o-mini", "gpt-5.4"))
    assert main(["validate", str(tmp_path / "agent.yaml")]) == 0


async def test_every_answer_is_the_filters_ranking_for_the_same_text():
    """For each sample query of the bundled agent, as the model's search query: the answer (k = 1, 3, 5)
    is the first k tools of the filter's ranking for that text — one ranking path, so the answers'
    recall@k is the filter's (benchmarks/filter_search_benchmark.py measures it on BFCL)."""
    from pathlib import Path

    from sk_toolfilter.agents.agent import open_toolset

    async with await open_toolset(Path(__file__).resolve().parents[1] / "agent.yaml") as toolset:
        manager = toolset.manager
        visible = tuple(t.full_name for t in manager.index.tools if manager.find_visible_tool(t.full_name))
        for number, sample in enumerate(toolset.spec.sample_queries):
            ranked = [t.full_name for t in (await manager.select(sample.query)).ranking.tools if t.evidence]
            for k in (1, 3, 5):
                session = SearchSession(manager, (), visible, k)
                answer = await session.answer(f"q{number}-{k}", {"query": sample.query})
                assert list(answer.names) == [n for n in ranked if n in visible][:k], sample.query


async def test_a_search_is_ranked_and_learned_within_the_runs_scope(monkeypatch, caplog):
    """The wire answers outside the middleware's own blocks: the run's learning context (its tenant) is
    entered around the ranking and the learning, so a scoped agent's search reads and teaches its tenant."""
    from sk_toolfilter.provider_wire import search_answer
    from sk_toolfilter.selection.learning import current_context

    seen: list[object] = []
    ranking = search_answer.rank_for_search

    async def watched(manager, query, usable):
        seen.append(current_context()[0])
        return await ranking(manager, query, usable)

    monkeypatch.setattr(search_answer, "rank_for_search", watched)
    config = ToolFilterConfig(top_k=2, provider_search=FILTER, learning={"scope": "tenant_id"})
    script = [[client_tool_search("track a shipment")], [function_call("track_package", {"tracking_number": "1"})]]
    with ScriptedResponsesServer([*script, [message("ok")]]) as server:
        agent, tool_filter = await openai_agent(server, config, store=False)
        await agent.run(CALENDAR, client_kwargs={"tenant_id": "acme"})
    learning = tool_filter.manager.learning
    await learning.settled()
    assert seen == ["acme"]
    rows = learning.memory.rows()
    assert [row.tools for row in rows].count(("track_package",)) == 2 and len({row.scope for row in rows}) == 1
    assert "named no" not in caplog.text  # no request of the run went unscoped


def usable_tools(manager) -> tuple[str, ...]:
    """Every tool of `manager` a search may answer with (the discovery tools are never deferred)."""
    return tuple(t.full_name for t in manager.index.tools if t.full_name not in manager.discovery_names)


async def searching_manager():
    """A filter-answered search's manager over the test tools, and the tools a search may answer with."""
    with ScriptedResponsesServer([[message("ok")]]) as server:
        _, tool_filter = await openai_agent(server, ToolFilterConfig(top_k=2, provider_search=FILTER))
    return tool_filter.manager, usable_tools(tool_filter.manager)


async def test_a_search_in_the_users_own_words_is_never_answered_empty_while_tools_are_deferred():
    manager, usable = await searching_manager()
    session = SearchSession(manager, usable[:2], usable[2:], 3)
    query = "Is nginx running on the proxy box?"  # the user's words: no tool has first-stage evidence
    assert (await rank_for_search(manager, query, usable)).matched == []
    answer = await session.answer("call_1", {"query": query})
    assert 1 <= len(answer.names) <= 3 and set(answer.names) <= set(usable[2:]) and answer.matched == 0
    small_talk = await SearchSession(manager, usable[:2], usable[2:], 3).answer("call_2", {"query": "hi, thanks!"})
    assert small_talk.names == ()  # the no-tool rule stays for small talk


async def test_two_conversations_searching_with_the_same_call_id_each_get_their_own_answer():
    from sk_toolfilter.selection.learning import conversation_owner, learning_context

    manager, usable = await searching_manager()
    answers_of = {}
    for tenant, query in (("acme", "track a shipment by its tracking number"), ("globex", "reschedule an event")):
        with learning_context(scope=tenant, conversation="thread-1"):
            owner = conversation_owner()
        session = SearchSession(manager, (), usable, 3, owner=owner)
        answers_of[tenant] = (await session.answer("call_1", {"query": query})).names  # the same call_id
        again = SearchSession(manager, (), usable, 3, owner=owner)  # its replay: the same tools back
        assert (await again.answer("call_1", {"query": "anything else"})).names == answers_of[tenant]
    assert answers_of["acme"] != answers_of["globex"]
    assert answers_of["acme"][0] == "track_package" and "track_package" not in answers_of["globex"][:1]


async def test_at_most_three_searches_are_ranked_in_one_model_call_however_many_one_response_holds():
    config = ToolFilterConfig(top_k=2, provider_search=FILTER)
    searches = [client_tool_search(f"track shipment number {i}", call_id=f"call_{i}") for i in range(50)]
    with ScriptedResponsesServer([searches, [message("ok")]]) as server:
        agent, _ = await openai_agent(server, config, store=False)
        await agent.run(CALENDAR)
    given = answers(server.requests[1])
    assert len(given) == 50  # every call paired with an output (an unpaired one is a 400)
    assert sum(bool(a["tools"]) for a in given) == 3  # only three ranked; the rest answered empty


def test_a_replayed_search_with_arguments_too_deep_or_too_long_replays_as_a_search_for_nothing():
    from sk_toolfilter.agent_framework.provider_search import replayed_arguments

    assert replayed_arguments("[" * 100_000 + "]" * 100_000) == {}
    assert replayed_arguments('{"query": "' + "x" * 100_000 + '"}') == {}
    assert replayed_arguments('{"query": "track"}') == {"query": "track"}
    assert replayed_arguments({"query": "track"}) == {"query": "track"}


def test_namespace_names_are_unique_across_the_catalog_and_the_same_on_every_request():
    from sk_toolfilter.provider_wire.namespaces import NAMESPACE_MAX, namespace_layout

    crm = [(f"Crm-f{i}", "Crm", f"f{i}") for i in range(NAMESPACE_MAX)] + [("Crm-purge_record", "Crm", "purge_record")]
    tools = [*crm, ("Crm_2-purge_record", "Crm_2", "purge_record"), ("lonely", "", "lonely")]
    layout = namespace_layout(tools)
    assert layout["Crm-purge_record"] == ("Crm_3", "purge_record")  # Crm_2 is a real plugin's name
    assert layout["Crm_2-purge_record"] == ("Crm_2", "purge_record")
    assert "lonely" not in layout  # no plugin: a plain function
    pairs = list(layout.values())
    assert len(pairs) == len(set(pairs))  # one (namespace, function) per tool: every one reachable
    # The layout is the catalog's: a request deferring one tool names it as a request deferring all of them.
    from sk_toolfilter.provider_wire.namespaces import Namespaces

    def spaces_of(deferred: list[str]) -> dict[str, str]:
        body = {"tools": [{"type": "function", "name": n, "defer_loading": True} for n in deferred]}
        sent = Namespaces(layout.get).outgoing(body)["tools"]
        return {f["name"]: s["name"] for s in sent if s["type"] == "namespace" for f in s["tools"]}

    alone = spaces_of(["Crm-purge_record"])
    every = spaces_of([name for name, _, _ in tools])
    assert alone == {"purge_record": "Crm_3"} and every["purge_record"] in {"Crm_2", "Crm_3"}


async def test_a_claude_agent_tool_named_like_the_filters_search_tool_is_refused_at_start():
    from agent_framework import FunctionTool

    from sk_toolfilter.agent_framework.anthropic_search import ToolSearchAnthropicClient

    def tool_search(query: str) -> str:
        """Search the knowledge base."""
        return query

    client = ToolSearchAnthropicClient(model="claude-sonnet-4-5", api_key="offline")
    tools = [*TOOLS, FunctionTool(func=tool_search, name="tool_search", description="Search the knowledge base.")]
    with pytest.raises(ConfigError, match="'tool_search'"):
        await create_agent_framework_filter(tools, ToolFilterConfig(provider_search=FILTER), agent_client=client)
    await create_agent_framework_filter(tools, ToolFilterConfig(provider_search={**FILTER, "search": "provider"}))


def test_a_proxy_or_azure_deployment_name_is_accepted_when_the_user_says_the_model_has_tool_search():
    with pytest.raises(ConfigError, match="model_supports_tool_search"):
        ToolSearchOpenAIChatClient(model="my-gpt54", api_key="offline")
    client = ToolSearchOpenAIChatClient(model="my-gpt54", api_key="offline", model_supports_tool_search=True)
    assert client.model_supports_tool_search


async def test_the_sdk_clients_own_http_client_is_kept_and_the_search_still_answered():
    import httpx
    from agent_framework import Agent
    from openai import AsyncOpenAI

    seen: list[str] = []

    class Counting(httpx.AsyncBaseTransport):  # the application's own transport (a proxy, say)
        def __init__(self) -> None:
            self.inner = httpx.AsyncHTTPTransport()

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            seen.append(request.url.path)
            return await self.inner.handle_async_request(request)

    config = ToolFilterConfig(top_k=2, provider_search=FILTER)
    script = [[client_tool_search("track a shipment")], [message("It is in Memphis.")]]
    with ScriptedResponsesServer(script) as server:
        http = httpx.AsyncClient(transport=Counting(), timeout=httpx.Timeout(42.0))
        sdk = AsyncOpenAI(api_key="offline", base_url=server.base_url, http_client=http)
        client = ToolSearchOpenAIChatClient(model=MODEL, async_client=sdk)
        assert client.client._client is http and http.timeout.read == 42.0  # the application's client, as set
        tool_filter = await create_agent_framework_filter(list(TOOLS), config, agent_client=client)
        agent = Agent(client=client, tools=tool_filter.tools, middleware=tool_filter.middleware)
        response = await agent.run(CALENDAR, options={"store": False})
    assert response.text == "It is in Memphis."
    assert seen == ["/v1/responses", "/v1/responses"]  # both requests through the application's transport
    assert answers(server.requests[1])  # and the search was answered on the way


@pytest.mark.parametrize("stream", [False, True], ids=["not streamed", "streamed"])
async def test_a_stored_chain_keeps_its_loaded_tools_on_every_request_as_a_stateless_one_does(stream):
    """The default store (``previous_response_id``): Agent Framework sends a stored chain's later calls
    with only their new messages; every request of the run, and of the next run on the session, loads
    the tools the conversation's first request loaded."""
    config = ToolFilterConfig(top_k=2, provider_search=FILTER)
    script = [
        [function_call("track_package", {"tracking_number": "1Z999"})],
        [message("It is in Memphis.")],
        [function_call("track_package", {"tracking_number": "1Z998"}, 2)],
        [message("And that one is in Reno.")],
    ]
    ask = "Where is my package 1Z999? Track it please"

    async def run(agent, text: str, session) -> None:
        if stream:
            async for _ in agent.run(text, session=session, stream=True):
                pass
        else:
            await agent.run(text, session=session)

    with ScriptedResponsesServer(script) as server:
        agent, _ = await openai_agent(server, config)  # store: the default
        session = agent.create_session()
        await run(agent, ask, session)
        await run(agent, "and 1Z998?", session)
    assert [r.get("previous_response_id") for r in server.requests] == [None, "resp_1", "resp_2", "resp_3"]
    loaded = [wire(server, i)[0] for i in range(4)]
    assert loaded[0] and "track_package" in loaded[0]
    assert all(each == loaded[0] for each in loaded)  # after a tool call too, streamed or not
    assert ran == ["track_package", "track_package"]


@pytest.mark.postgres
async def test_two_replicas_on_one_store_answer_a_replay_and_continue_a_stored_chain_the_same(postgres):
    """Two replicas behind one load balancer (two filters on one PostgreSQL store): a search replayed on
    the replica that did not answer it gets the first replica's tools back, and a stored chain's next
    turn reaching the other replica loads the tools its first request loaded."""
    from agent_framework import Agent, AgentSession

    from tests.test_shared_index import store_config

    config = store_config(postgres.dsn).updated(top_k=2, provider_search=FILTER)

    async def replica(server: ScriptedResponsesServer):
        client = ToolSearchOpenAIChatClient(model=MODEL, api_key="offline", base_url=server.base_url)
        tool_filter = await create_agent_framework_filter(list(TOOLS), config, agent_client=client)
        agent = Agent(client=client, tools=tool_filter.tools, middleware=tool_filter.middleware)
        return agent, tool_filter

    script = [
        [function_call("track_package", {"tracking_number": "1Z999"})],
        [message("It is in Memphis.")],
        [message("You're welcome.")],
    ]
    with ScriptedResponsesServer(script) as server:
        first, first_filter = await replica(server)
        second, second_filter = await replica(server)
        await first.run("Where is my package 1Z999? Track it please")  # a stored chain: resp_1, resp_2
        await first_filter.chat_middleware.settled()
        await second.run("thanks!", session=AgentSession(service_session_id="resp_2"))  # the other replica
    assert server.requests[2]["previous_response_id"] == "resp_2"
    assert wire(server, 2)[0] == wire(server, 0)[0]  # the loaded tools of the chain's first request

    # The answers: a replay of call_1 on the second replica is the first replica's answer.
    a, b = first_filter.manager, second_filter.manager
    usable = usable_tools(a)
    shared = a.index_store.conversation_state()
    answered = await SearchSession(a, (), usable, 3, owner="talk-1", shared=shared).answer(
        "call_1", {"query": "track a shipment"}
    )
    again = SearchSession(b, (), usable, 3, owner="talk-1", shared=b.index_store.conversation_state())
    assert (await again.answer("call_1", {"query": "reschedule an event"})).names == answered.names
    other = SearchSession(b, (), usable, 3, owner="talk-2", shared=b.index_store.conversation_state())
    assert (await other.answer("call_1", {"query": "reschedule an event"})).names != answered.names
    for tool_filter in (first_filter, second_filter):
        await tool_filter.aclose()


@pytest.mark.parametrize("loaded_now", [False, True])
def test_a_replayed_namespaced_call_is_reachable_whether_its_function_is_deferred_or_loaded_now(loaded_now):
    """OpenAI rejects a replayed call that names no function of the request ("Missing namespace for
    function_call"): a call the model made in a namespace goes back in that namespace while its function
    is deferred (the replayed search output holds it there), and under its plain name once the function
    is loaded (the output, narrowed to what this call defers, no longer holds it)."""
    from sk_toolfilter.provider_wire.namespaces import Namespaces, namespace_layout

    layout = namespace_layout([("Math-percentage", "Math", "percentage"), ("Math-add", "Math", "add")])
    percentage = {"type": "function", "name": "Math-percentage", "parameters": {"type": "object"}}
    add = {"type": "function", "name": "Math-add", "parameters": {"type": "object"}, "defer_loading": True}
    tools = [percentage, add] if loaded_now else [{**percentage, "defer_loading": True}, add]
    found = [add] if loaded_now else [percentage, add]  # the replayed answer, narrowed to the deferred tools
    body = {
        "tools": [*tools, {"type": "tool_search", "execution": "client"}],
        "input": [
            {"type": "tool_search_call", "call_id": "s1", "execution": "client", "arguments": {"query": "%"}},
            {"type": "tool_search_output", "call_id": "s1", "execution": "client",
             "tools": [{k: v for k, v in t.items() if k != "defer_loading"} for t in found]},
            {"type": "function_call", "call_id": "c1", "name": "Math-percentage", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "18.75%"},
        ],
    }  # fmt: skip
    sent = Namespaces(layout.get).outgoing(body)
    flat = {t["name"] for t in sent["tools"] if t["type"] == "function"}
    spaced = {
        (space["name"], inner["name"])
        for holder in [*sent["tools"], *(i.get("tools") or [] for i in sent["input"])]
        for space in (holder if isinstance(holder, list) else [holder])
        if space.get("type") == "namespace"
        for inner in space["tools"]
    }
    (call,) = [i for i in sent["input"] if i["type"] == "function_call"]
    if "namespace" in call:
        assert (call["namespace"], call["name"]) in spaced and not loaded_now
    else:
        assert call["name"] in flat and loaded_now
