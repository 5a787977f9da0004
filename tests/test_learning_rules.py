"""One learning mechanism, one set of rules, in the default configuration: co-usage (the agent loop's
companions) reads the one memory of learning from use, so it obeys the same scope, the same
two-conversation rule and the same forget; a destructive tool never reaches another conversation's
tools on others' requests alone."""

from __future__ import annotations

import numpy as np
from semantic_kernel.contents import ChatHistory

from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.retrieval.memory import LearningMemory
from sk_toolfilter.selection.learning import learning_context
from sk_toolfilter.selection.visibility import ToolPolicy
from tests.test_agent_loop import completed_turns

DELETE = "Notes-delete_note"
ANCHOR = "Time-current_time"
ATTACK = [(f"what time is it in time zone number {i} right now", [ANCHOR, DELETE]) for i in range(3)]
VICTIM = "what time is it in Tokyo right now"


async def teach(manager, turns, *, conversation: str, scope: str | None = None) -> None:
    history = completed_turns(*turns)
    history.add_user_message("thanks")
    with learning_context(conversation=conversation, scope=scope):
        await manager.select_for_history(history)
    await manager.learning.settled()


async def sent(manager, request: str, *, conversation: str, scope: str | None = None) -> list[str]:
    history = ChatHistory()
    history.add_user_message(request)
    with learning_context(conversation=conversation, scope=scope):
        return (await manager.select_for_history(history)).names


async def test_one_injected_conversation_moves_no_companion_for_anyone_else_by_default(demo_kernel):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig())
    assert ANCHOR in await sent(manager, VICTIM, conversation="victim")
    assert DELETE not in await sent(manager, VICTIM, conversation="victim")
    await teach(manager, ATTACK, conversation="attacker")  # one conversation, the pair three times
    for victim in ("v1", "v2", "v3"):
        assert DELETE not in await sent(manager, VICTIM, conversation=victim)


async def test_companions_need_two_conversations_and_stay_in_their_tenant(demo_kernel):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(learning={"scope": "tenant_id"}))
    companion = "Messaging-send_email"
    pair = [(f"what time is it in office number {i}, and email it to the team", [ANCHOR, companion]) for i in range(2)]
    await teach(manager, pair[:1], conversation="a1", scope="acme")
    assert companion not in await sent(manager, VICTIM, conversation="a9", scope="acme")  # one conversation
    await teach(manager, pair[1:], conversation="a2", scope="acme")
    assert companion in await sent(manager, VICTIM, conversation="a9", scope="acme")  # two: it enters
    assert companion not in await sent(manager, VICTIM, conversation="g1", scope="globex")  # another tenant
    await manager.learning.forget()
    assert companion not in await sent(manager, VICTIM, conversation="a9", scope="acme")  # forget: gone too


async def test_a_destructive_companion_never_enters_on_other_conversations_however_many(demo_kernel):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig())
    exposed = await create_tool_filter(demo_kernel, ToolFilterConfig(tools_overrides={DELETE: {"destructive": False}}))
    for number, turn in enumerate(ATTACK):  # three attacker conversations
        await teach(manager, [turn], conversation=f"attacker{number}")
        await teach(exposed, [turn], conversation=f"attacker{number}")
    assert DELETE not in await sent(manager, VICTIM, conversation="victim")
    assert DELETE in await sent(exposed, VICTIM, conversation="victim")  # the attack is real for other tools
    # A benign companion on the same evidence does enter: the rule is the tool's, not the attack's.
    benign = await create_tool_filter(demo_kernel, ToolFilterConfig())
    for number, (request, _) in enumerate(ATTACK):
        await teach(benign, [(request, [ANCHOR, "Notes-list_notes"])], conversation=f"user{number}")
    assert "Notes-list_notes" in await sent(benign, VICTIM, conversation="victim")


async def test_a_destructive_tool_is_never_brought_in_by_learning_alone_with_co_usage_off(demo_kernel):
    config = ToolFilterConfig(agent_loop={"co_usage": False})
    manager = await create_tool_filter(demo_kernel, config)
    exposed = await create_tool_filter(demo_kernel, config.updated(tools_overrides={DELETE: {"destructive": False}}))
    genuine = [(f"what time is it in city number {i} right now", ["Time-current_time"]) for i in range(30)]
    for number, turn in enumerate(genuine):  # many users: trust in the neighbour signal rises
        await teach(manager, [turn], conversation=f"user{number}")
        await teach(exposed, [turn], conversation=f"user{number}")
    attack = [(f"{VICTIM}{end}", [DELETE]) for end in ("?", " please", ", thanks")]  # near-copies of the victim's
    for number, turn in enumerate(attack):
        await teach(manager, [turn], conversation=f"attacker{number}")
        await teach(exposed, [turn], conversation=f"attacker{number}")
    for victim in ("v1", "v2", "v3"):
        assert DELETE not in await sent(manager, VICTIM, conversation=victim)
    assert DELETE in await sent(exposed, VICTIM, conversation="v1")  # the attack is real for other tools


def test_what_makes_a_tool_destructive():
    policy = ToolPolicy(ToolFilterConfig(tools_overrides={"Shop-archive_order": {"destructive": True}}))
    assert policy.is_destructive("Notes-delete_note") and policy.is_destructive("Files-removeFile")
    assert policy.is_destructive("Shop-archive_order")  # the override says so
    assert not policy.is_destructive("Notes-add_note") and not policy.is_destructive("Shop-dropdown_values")
    kept = ToolPolicy(ToolFilterConfig(tools_overrides={"Db-drop_table": {"destructive": False}}))
    assert not kept.is_destructive("Db-drop_table")  # an override (or an MCP hint) wins over the name


def test_companions_count_conversations_not_requests_and_follow_eviction():
    memory = LearningMemory(max_requests=3)
    rng = np.random.default_rng(0)
    for i in range(3):  # one conversation, three requests: one conversation's evidence
        memory.learn(rng.standard_normal(8), ["A", "B"], key=f"k{i}", conversation="c1")
    assert memory.companions(["A"], scope="", conversation="c2", min_share=0.3) == []
    assert [c.name for c in memory.companions(["A"], scope="", conversation="c1", min_share=0.3)] == ["B"]
    memory.learn(rng.standard_normal(8), ["A", "B"], key="k9", conversation="c2")
    assert [c.together for c in memory.companions(["A"], scope="", conversation="c3", min_share=0.3)] == [2]
    for i in range(3):  # evicted rows leave the counts with them
        memory.learn(rng.standard_normal(8), ["X"], key=f"x{i}", conversation=f"d{i}")
    assert memory.companions(["A"], scope="", conversation="c1", min_share=0.3) == []


def test_one_tenant_learning_more_never_evicts_another_tenants_rows():
    memory = LearningMemory(max_requests=300)
    rng = np.random.default_rng(2)
    for i in range(20):
        memory.learn(rng.standard_normal(8), ["Crm-find"], key=f"g{i}", conversation=f"g{i}", scope="globex")
    for i in range(1000):  # acme learns far past the bound
        memory.learn(rng.standard_normal(8), ["Crm-find"], key=f"a{i}", conversation=f"a{i}", scope="acme")
    assert memory.scopes() == {"globex": 20, "acme": 280}
    assert {row.key for row in memory.rows() if row.scope == "acme"} == {f"a{i}" for i in range(720, 1000)}
    for i in range(200):  # a newcomer takes rows from the scope that holds the most, never below its own
        memory.learn(rng.standard_normal(8), ["Crm-find"], key=f"n{i}", conversation=f"n{i}", scope="initech")
    assert memory.scopes() == {"globex": 20, "acme": 140, "initech": 140}


async def test_trust_is_each_tenants_own(demo_kernel):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(learning={"scope": "tenant_id"}))
    for i in range(60):  # acme: many users asking alike and calling the same tool (its trust rises)
        await teach(
            manager,
            [(f"what time is it in city number {i}", ["Time-current_time"])],
            conversation=f"a{i}",
            scope="acme",
        )
    for i in range(3):
        await teach(
            manager,
            [(f"email the team the minutes number {i}", ["Messaging-send_email"])],
            conversation=f"g{i}",
            scope="globex",
        )
    memory = manager.learning.memory
    memory.settle()
    acme, globex = (manager.learning.scope_of(tenant) for tenant in ("acme", "globex"))
    assert acme is not None and globex is not None
    assert memory.trust_of(acme) > 0.5
    assert memory.trust_of(globex) < 0.1  # acme's traffic moves nothing of globex's


def test_a_tool_that_entered_but_overtook_nothing_is_said_with_where_it_landed():
    from sk_toolfilter.retrieval.memory import DEFAULT_RULE, PastEvidence, reorder_by_past_calls

    evidence = {"Ops-service_status": PastEvidence(0.75, 2, 0.93)}
    reordered = reorder_by_past_calls(["Ops-restart", "Ops-logs"], [0.9, 0.8], evidence, 0.1, DEFAULT_RULE)
    assert not reordered.moved
    note = reordered.entered["Ops-service_status"]
    assert note.startswith("Ops-service_status entered at place 3, below Ops-logs (0.80 against 0.08)")
    assert "2 past requests like this one (best 0.93) called it" in note


async def test_a_turn_whose_request_was_already_embedded_is_learned_before_the_next_request(demo_kernel):
    """An agent loop: the turn's request was the query of its first request, so its vector is known; the
    turn is learned at once (no embedding, no task), and the conversation's next request reads it."""
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig())
    asked = "what time is it in Oslo right now"
    first = ChatHistory()
    first.add_user_message(asked)
    with learning_context(conversation="c1"):
        await manager.select_for_history(first)  # the request's vector is computed here
        history = completed_turns((asked, [ANCHOR, "Messaging-send_email"]))
        history.add_user_message("and in Lima?")
        await manager.select_for_history(history)
    assert len(manager.learning.memory) == 1  # learned in the request that saw the turn, not later
    assert not manager.learning._tasks


STATELESS = [  # ten requests of a stateless endpoint, each its own conversation, and the tool each called
    ("shout this text", "Text-change_case"),
    ("make the text uppercase", "Text-change_case"),
    ("note down that the meeting moved", "Notes-add_note"),
    ("how big is my todo file?", "Files-file_info"),
    ("shout this text please", "Text-change_case"),
    ("add 17 and 25", "Math-add"),
    ("remember that I like green tea", "Notes-remember_fact"),
    ("what time is it in Tokyo?", "Time-current_time"),
    ("count the words in 'a b c'", "Text-count_words"),
    ("convert 10 km to miles", "Math-convert_units"),
]
SIMILAR = ["shout this text!", "please shout this text", "shout the text"]


async def test_plain_evidence_moves_a_tool_after_ten_stateless_requests_before_trust_has_grown(demo_kernel):
    """Near-copies of a request that called one tool in two conversations move it on the next similar
    request, with the memory's trust still 0 (nothing waits for the background estimate); near-copies in
    one conversation move nothing for another."""
    cold = await create_tool_filter(demo_kernel, ToolFilterConfig(learning={"enabled": False}))
    assert [(await cold.filter_tools(q))[0] for q in SIMILAR].count("Text-change_case") == 0
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig())
    for number, (request, tool) in enumerate(STATELESS):
        with learning_context(conversation=f"request {number}"):
            await manager.record(request, [tool])
    assert manager.learning.memory.trust_now() == 0.0  # trust has not grown: plain evidence acts alone
    for request in SIMILAR:
        ranking = (await manager.select(request)).ranking
        assert ranking.tools[0].full_name == "Text-change_case", request
        assert "past requests like this one" in ranking.learned["Text-change_case"]  # the near-copies moved it
    single = await create_tool_filter(demo_kernel, ToolFilterConfig())
    with learning_context(conversation="one user"):  # two near-copies, one conversation
        for request in ("shout this text", "shout this text please"):
            await single.record(request, ["Text-change_case"])
    with learning_context(conversation="another user"):
        assert [(await single.filter_tools(q))[0] for q in SIMILAR].count("Text-change_case") == 0
