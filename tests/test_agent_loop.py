"""Agent loops: one user turn, several tool calls in sequence, every request offering the next tool.

Real kernel, real OpenAIChatCompletion on a recording HTTP transport, the offline embedding model,
canned model replies; SK's own auto-invoke loop runs the functions.
"""

import asyncio
import logging
from typing import Annotated

import pytest
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
from semantic_kernel.contents import ChatHistory
from semantic_kernel.functions import kernel_function

from sk_toolfilter import ToolFilterConfig, create_tool_filter, wrap_chat_service
from sk_toolfilter.demo import ALL_PLUGINS
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply
from sk_toolfilter.selection.learning import learning_context


class Shipping:
    def __init__(self) -> None:
        self.calls: list[str] = []

    @kernel_function(description="Track a package by its tracking number and return where it is and when it arrives.")
    def track_package(self, tracking_number: Annotated[str, "Carrier tracking number"]) -> str:
        self.calls.append("track_package")
        return '{"status": "in transit", "arrives": "Friday 10:00"}'

    @kernel_function(description="Create a shipping label for a parcel to an address.")
    def create_label(self, address: Annotated[str, "Destination address"]) -> str:
        return "label created"


class Calendar:
    def __init__(self) -> None:
        self.calls: list[str] = []

    @kernel_function(description="List the calendar events of a day.")
    def list_events(self, day: Annotated[str, "The day, e.g. Friday"]) -> str:
        self.calls.append("list_events")
        return '[{"id": "e1", "title": "Dentist", "time": "Friday 10:00"}]'

    @kernel_function(description="Move a calendar event to a new date and time.")
    def reschedule_event(
        self, event_id: Annotated[str, "Id of the event"], new_time: Annotated[str, "New date and time"]
    ) -> str:
        self.calls.append("reschedule_event")
        return "rescheduled"

    @kernel_function(description="Delete a calendar event.")
    def delete_event(self, event_id: Annotated[str, "Id of the event"]) -> str:
        return "deleted"


@pytest.fixture
def loop_kernel():
    kernel = Kernel()
    for name, plugin in ALL_PLUGINS.items():
        kernel.add_plugin(plugin(), name)
    kernel.add_plugin(Shipping(), "Shipping")
    kernel.add_plugin(Calendar(), "Calendar")
    return kernel


def settings() -> OpenAIChatPromptExecutionSettings:
    return OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())


async def test_each_request_of_a_three_step_turn_offers_the_tool_called_next(loop_kernel, caplog):
    steps = [
        ("Shipping-track_package", {"tracking_number": "1Z999"}),
        ("Calendar-list_events", {"day": "Friday"}),
        ("Calendar-reschedule_event", {"event_id": "e1", "new_time": "Monday 09:00"}),
    ]
    transport = RecordingTransport([*(tool_call_reply(step) for step in steps), text_reply("All done.")])
    manager = await create_tool_filter(loop_kernel, ToolFilterConfig())
    service = wrap_chat_service(offline_chat_service(transport), manager)
    history = ChatHistory()
    history.add_user_message(
        "My package 1Z999 arrives during my dentist appointment: track it, look at Friday's events, "
        "and reschedule the dentist to Monday morning."
    )
    with caplog.at_level(logging.INFO):
        await service.get_chat_message_contents(history, settings(), kernel=loop_kernel)

    assert len(transport.requests) == 4
    for number, (name, _) in enumerate(steps):
        assert name in transport.tool_names(number), f"request {number} did not offer {name}"
    for number in range(3):  # the last need of the request stays on offer until it is called
        assert "Calendar-reschedule_event" in transport.tool_names(number)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert not any("did not run" in r.getMessage() for r in caplog.records)
    assert transport.requests[3]["messages"][-1]["content"] == "rescheduled"
    assert len(transport.tool_names(3)) <= 8


async def test_a_request_listing_three_actions_keeps_each_actions_tool_until_it_is_called(loop_kernel, caplog):
    # A fresh filter (nothing learned from past turns): only the request itself can carry the three needs.
    steps = [
        ("Shipping-create_label", {"address": "1 Main St"}),
        ("Math-add", {"a": 17, "b": 25}),
        ("Time-current_time", {"timezone": "Asia/Tokyo"}),
    ]
    transport = RecordingTransport([*(tool_call_reply(step) for step in steps), text_reply("Done.")])
    manager = await create_tool_filter(loop_kernel, ToolFilterConfig())
    service = wrap_chat_service(offline_chat_service(transport), manager)
    history = ChatHistory()
    history.add_user_message("Create a shipping label for 1 Main St, add 17 and 25, and tell me the time in Tokyo")
    selection = await manager.select_for_history(history)
    reasons = {d.full_name: d.reason for d in selection.decisions if d.kept}
    assert reasons["Math-add"] == "kept: best match for 'add 17 and 25', one part of the request"
    without = await create_tool_filter(loop_kernel, ToolFilterConfig(agent_loop={"split_request": False}))
    assert "Math-add" not in (await without.select_for_history(history)).names
    with caplog.at_level(logging.INFO):
        await service.get_chat_message_contents(history, settings(), kernel=loop_kernel)

    for number in range(len(steps)):
        offered = transport.tool_names(number)
        assert all(later in offered for later, _ in steps[number:]), f"request {number}: {offered}"
    assert not any("did not run" in r.getMessage() for r in caplog.records)


async def test_a_part_of_the_request_no_tool_has_evidence_for_adds_no_tool(loop_kernel):
    # No cosine passes this floor, and the second part shares no word with any tool: it has no best tool.
    manager = await create_tool_filter(loop_kernel, ToolFilterConfig(semantic_floor=0.99))
    history = ChatHistory()
    history.add_user_message("Create a shipping label for 1 Main St, and hum a quiet lullaby for me")
    selection = await manager.select_for_history(history)
    reasons = [d.reason for d in selection.decisions if d.kept]
    assert "Shipping-create_label" in selection.names
    assert not any("lullaby" in r for r in reasons), reasons


async def test_explain_says_why_a_tool_of_the_turn_was_kept(loop_kernel):
    manager = await create_tool_filter(loop_kernel, ToolFilterConfig())
    transport = RecordingTransport([tool_call_reply(("Shipping-track_package", {"tracking_number": "1"}))])
    service = wrap_chat_service(offline_chat_service(transport), manager)
    history = ChatHistory()
    history.add_user_message("track package 1 and then tell me what is on my calendar on Friday")
    await service.get_chat_message_contents(history, settings(), kernel=loop_kernel)
    selection = await manager.select_for_history(history)
    reasons = {d.full_name: d.reason for d in selection.decisions if d.kept}
    assert reasons["Shipping-track_package"] == "kept: called earlier in this turn"


async def test_a_visible_tool_the_model_was_not_offered_gets_a_clear_answer_and_is_loaded_next(loop_kernel, caplog):
    transport = RecordingTransport(
        [tool_call_reply(("Shipping-create_label", {"address": "1 Main St"})), text_reply("ok")]
    )
    manager = await create_tool_filter(loop_kernel, ToolFilterConfig(top_k=1, agent_loop={"max_tools": 1}))
    service = wrap_chat_service(offline_chat_service(transport), manager)
    history = ChatHistory()
    history.add_user_message("what time is it in Tokyo?")
    with caplog.at_level(logging.INFO):
        await service.get_chat_message_contents(history, settings(), kernel=loop_kernel)

    assert "Shipping-create_label" not in transport.tool_names(0)
    answer = transport.requests[1]["messages"][-1]["content"]
    assert "was not among the tools loaded for this step" in answer and "call it again" in answer
    assert "Shipping-create_label" in transport.tool_names(1)  # loaded for the next step
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    notes = [r for r in caplog.records if "did not run Shipping-create_label" in r.getMessage()]
    assert len(notes) == 1 and notes[0].levelno == logging.INFO and notes[0].exc_info is None


async def test_an_excluded_tool_stays_refused_even_inside_the_turn(loop_kernel, caplog):
    transport = RecordingTransport([tool_call_reply(("Calendar-delete_event", {"event_id": "e1"})), text_reply("ok")])
    config = ToolFilterConfig(exclude=["Calendar-delete_event"])
    manager = await create_tool_filter(loop_kernel, config)
    service = wrap_chat_service(offline_chat_service(transport), manager)
    history = ChatHistory()
    history.add_user_message("delete the dentist event")
    await service.get_chat_message_contents(history, settings(), kernel=loop_kernel)
    assert "is not available to this agent" in transport.requests[1]["messages"][-1]["content"]
    assert "Calendar-delete_event" not in transport.tool_names(1)


async def test_concurrent_conversations_with_the_same_opening_keep_separate_sticky_lists(loop_kernel):
    manager = await create_tool_filter(loop_kernel, ToolFilterConfig(selection_mode="sticky"))
    transport = RecordingTransport()
    service = wrap_chat_service(offline_chat_service(transport), manager)
    plain = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto(auto_invoke=False))

    lockstep = Lockstep(2)  # the two conversations interleave step by step (an event, not a scheduling accident)

    async def converse(follow_ups: list[str]) -> list[list[str]]:
        history = ChatHistory()
        sent = []
        for message in ["hi", *follow_ups]:
            history.add_user_message(message)
            await service.get_chat_message_contents(history, plain, kernel=loop_kernel)
            sent.append(list(service.last_selection))
            history.add_assistant_message("ok")
            await lockstep.wait()
        return sent

    shipping, calendar = await asyncio.gather(
        converse(["track my package 1Z999", "and when does it arrive?"]),
        converse(["what is on my calendar on Friday?", "anything on Saturday?"]),
    )
    assert shipping[0] == calendar[0]  # the same opening: the same list
    assert "Shipping-track_package" in shipping[2]
    assert not any(name.startswith("Calendar-") for name in shipping[2])
    assert "Calendar-list_events" in calendar[2]
    assert not any(name.startswith("Shipping-") for name in calendar[2])


class Lockstep:
    """`parties` coroutines take their steps together: none starts step n + 1 before all finished step n
    (``asyncio.Barrier`` from Python 3.11)."""

    def __init__(self, parties: int) -> None:
        self.parties, self.arrived, self.generation = parties, 0, 0
        self.condition = asyncio.Condition()

    async def wait(self) -> None:
        async with self.condition:
            generation = self.generation
            self.arrived += 1
            if self.arrived == self.parties:
                self.arrived, self.generation = 0, generation + 1
                self.condition.notify_all()
            else:
                await self.condition.wait_for(lambda: self.generation != generation)


def completed_turns(*turns: tuple[str, list[str]]) -> ChatHistory:
    """A history of answered turns: each request, its tool calls with results, then a text answer."""
    from semantic_kernel.contents import AuthorRole, ChatMessageContent, FunctionCallContent, FunctionResultContent

    history = ChatHistory()
    for number, (request, calls) in enumerate(turns):
        history.add_user_message(request)
        for position, name in enumerate(calls):
            call_id = f"call_{number}_{position}"
            history.add_message(
                ChatMessageContent(role=AuthorRole.ASSISTANT, items=[FunctionCallContent(id=call_id, name=name)])
            )
            result = FunctionResultContent(id=call_id, name=name, result="ok")
            history.add_message(ChatMessageContent(role=AuthorRole.TOOL, items=[result]))
        history.add_assistant_message("Done.")
    return history


async def test_what_co_usage_learned_survives_a_restart_through_the_learning_file(loop_kernel, tmp_path):
    path = tmp_path / "learned" / "learned.npz"
    config = ToolFilterConfig(learning={"file": str(path)})
    first = await create_tool_filter(loop_kernel, config)
    pair = ["Shipping-track_package", "Calendar-list_events"]
    for opening, request in (
        ("c1", "where is parcel 1Z1 and what is on Friday, my dentist day?"),
        ("c2", "parcel 2Z2 and Monday's events please"),
    ):
        history = completed_turns((request, pair))
        history.add_user_message("thanks")
        with learning_context(conversation=opening):  # two conversations: the rule's evidence
            await first.select_for_history(history)
    await first.learning.settled()
    await first.aclose()
    saved = path.read_bytes()
    for text in ("dentist", "1Z1"):  # no request text, in any encoding the file's arrays use
        assert text.encode() not in saved and text.encode("utf-32-le") not in saved

    restarted = await create_tool_filter(loop_kernel, config)  # a new process: nothing seen yet
    assert {tool for row in restarted.learning.memory.rows() for tool in row.tools} == set(pair)
    fresh = ChatHistory()
    fresh.add_user_message("track parcel 4Z4")
    selection = await restarted.select_for_history(fresh)
    reasons = {d.full_name: d.reason for d in selection.decisions if d.kept}
    assert reasons["Calendar-list_events"] == "kept: used with Shipping-track_package in 2 of 2 past conversations"


def test_a_relative_co_usage_file_in_an_agent_file_is_relative_to_the_file(tmp_path):
    from sk_toolfilter.agents.agent_file import parse_agent

    spec = parse_agent(
        {"name": "a", "tools": [], "tool_filtering": {"agent_loop": {"co_usage_file": "state/co.json"}}},
        base_dir=tmp_path,
    )
    assert spec.tool_filtering.agent_loop.co_usage_file == str(tmp_path / "state" / "co.json")


class Shop:
    def __init__(self) -> None:
        self.refunded: list[str] = []

    @kernel_function(description="Refund an order to the customer's card.")
    def refund_order(self, order_id: Annotated[str, "ID of the order to refund."]) -> str:
        self.refunded.append(order_id)
        return "refunded"

    @kernel_function(description="Get the customer's order history: every order with its id, items and date.")
    def get_order_history(self) -> str:
        return '[{"id": "A17", "items": ["blue jacket"], "date": "last Tuesday"}]'

    @kernel_function(description="Return policy of the shop: how many days a customer has to return an item.")
    def return_policy(self) -> str:
        return "30 days"


async def test_a_lookup_that_gives_the_best_tools_argument_is_offered_from_the_first_step(loop_kernel, caplog):
    # The request names the goal; the order id the refund needs comes from a lookup the request never
    # mentions. A fresh filter (nothing learned): only the schemas link the two.
    shop = Shop()
    loop_kernel.add_plugin(shop, "Shop")
    steps = [("Shop-get_order_history", {}), ("Shop-refund_order", {"order_id": "A17"})]
    transport = RecordingTransport([*(tool_call_reply(step) for step in steps), text_reply("Refunded.")])
    history = ChatHistory()
    history.add_user_message("Refund the blue jacket I bought last week.")

    without = await create_tool_filter(loop_kernel, ToolFilterConfig(agent_loop={"lookup_tools": False}))
    assert "Shop-get_order_history" not in (await without.select_for_history(history)).names
    manager = await create_tool_filter(loop_kernel, ToolFilterConfig())
    selection = await manager.select_for_history(history)
    reasons = {d.full_name: d.reason for d in selection.decisions if d.kept}
    assert selection.names[0] == "Shop-refund_order"
    assert reasons["Shop-get_order_history"] == "kept: gives 'order_id' of Shop-refund_order"

    service = wrap_chat_service(offline_chat_service(transport), manager)
    with caplog.at_level(logging.INFO):
        await service.get_chat_message_contents(history, settings(), kernel=loop_kernel)
    for number, (name, _) in enumerate(steps):
        assert name in transport.tool_names(number), f"request {number} did not offer {name}"
    assert not any("did not run" in r.getMessage() for r in caplog.records)
    assert shop.refunded == ["A17"]


async def test_once_past_turns_used_a_tool_they_decide_its_companions_instead_of_the_schemas(loop_kernel):
    loop_kernel.add_plugin(Shop(), "Shop")
    manager = await create_tool_filter(loop_kernel, ToolFilterConfig())
    # Past turns refunded orders whose ids the user gave: the history lookup was never needed.
    history = completed_turns(("Refund order A17 please", ["Shop-refund_order"]))
    history.add_user_message("Refund the blue jacket I bought last week.")
    selection = await manager.select_for_history(history)
    assert selection.names[0] == "Shop-refund_order"
    assert "Shop-get_order_history" not in selection.names


def test_a_turn_ranks_with_the_blend_chosen_for_the_model_unless_the_agent_file_sets_one():
    chosen = {"semantic": 0.9, "bm25": 0.1}  # what the shipped model's manifest says
    assert ToolFilterConfig().for_turn(chosen).method_weights == chosen
    assert ToolFilterConfig().method_weights == {"semantic": 0.7, "bm25": 0.3}  # single requests keep theirs
    assert ToolFilterConfig().for_turn(None).method_weights == {"semantic": 0.7, "bm25": 0.3}  # none chosen
    mine = ToolFilterConfig(method_weights={"semantic": 0.5, "bm25": 0.5})
    assert mine.for_turn(chosen).method_weights == {"semantic": 0.5, "bm25": 0.5}  # set by the user: everywhere
    loop = ToolFilterConfig(agent_loop={"method_weights": {"semantic": 0.6}})
    assert loop.for_turn(chosen).method_weights == {"semantic": 0.6, "bm25": 0.3}


async def test_the_shipped_model_carries_its_turn_blend_to_the_index(loop_kernel):
    manager = await create_tool_filter(loop_kernel, ToolFilterConfig())
    assert manager.index.loop_fusion_weights == {"semantic": 0.9, "bm25": 0.1}
    assert manager.index.fusion_weights is None  # single requests: the default blend


@pytest.mark.parametrize("weights", [{"semantic": 1.0, "bm25": 0.0}, {"semantic": 0.0, "bm25": 1.0}])
async def test_the_requests_of_a_turn_are_ranked_with_the_turn_blend(loop_kernel, weights):
    from semantic_kernel.contents import AuthorRole, ChatMessageContent, FunctionCallContent, FunctionResultContent

    from sk_toolfilter.retrieval.search import rank_tools

    manager = await create_tool_filter(loop_kernel, ToolFilterConfig(agent_loop={"method_weights": weights}))
    request = "track package 1Z999 and tell me what is on my calendar on Friday"
    history = ChatHistory()
    history.add_user_message(request)
    call = FunctionCallContent(id="call_0", name="Shipping-track_package")
    history.add_message(ChatMessageContent(role=AuthorRole.ASSISTANT, items=[call]))
    result = FunctionResultContent(id="call_0", name="Shipping-track_package", result="in transit")
    history.add_message(ChatMessageContent(role=AuthorRole.TOOL, items=[result]))
    in_turn = (await manager.select_for_history(history)).ranking  # the turn's second request
    alone = await rank_tools(manager.index, request, ToolFilterConfig(method_weights=weights), limit=20, fill=False)
    assert [t.tool.full_name for t in in_turn.tools][:8] == [t.tool.full_name for t in alone.tools][:8]
    single = await rank_tools(manager.index, request, manager.config, limit=20, fill=False)
    assert [round(t.score, 6) for t in in_turn.tools] != [round(t.score, 6) for t in single.tools]


@pytest.mark.parametrize("first_request_weights", ["plain", "turn"])
async def test_a_conversations_first_request_ranks_as_filter_tools_unless_told_otherwise(
    loop_kernel, first_request_weights
):
    """The first request (one user message, no tool called) ranks with the plain blend by default: the
    turn blend gained on the dev families and lost on every catalog family held out
    (benchmarks/first_request_benchmark.py); ``first_request_weights: turn`` keeps the turn blend."""
    from sk_toolfilter.retrieval.search import rank_tools

    weights = {"semantic": 0.0, "bm25": 1.0}  # a turn blend far from the plain one: the two orders differ
    loop = {"method_weights": weights, "first_request_weights": first_request_weights}
    manager = await create_tool_filter(loop_kernel, ToolFilterConfig(agent_loop=loop))
    request = "track package 1Z999 and tell me what is on my calendar on Friday"
    history = ChatHistory()
    history.add_user_message(request)
    first = (await manager.select_for_history(history)).ranking
    blend = ToolFilterConfig() if first_request_weights == "plain" else ToolFilterConfig(method_weights=weights)
    alone = await rank_tools(manager.index, request, blend, limit=20, fill=False)
    assert [t.tool.full_name for t in first.tools][:8] == [t.tool.full_name for t in alone.tools][:8]
    if first_request_weights == "plain":  # exactly what filter_tools ranks for the same words
        plain = await manager.select(request)
        assert [t.tool.full_name for t in first.tools] == [t.tool.full_name for t in plain.ranking.tools]


async def test_a_request_and_its_listed_actions_are_ranked_in_one_batch_with_one_embedding_call(
    demo_kernel, hash_embedder
):
    from semantic_kernel.contents import ChatHistory

    from sk_toolfilter.retrieval.search import rank_many, rank_tools

    config = ToolFilterConfig(agent_loop={"enabled": True, "split_request": True})
    manager = await create_tool_filter(demo_kernel, config, embedding_service=hash_embedder)
    await manager.vectors_ready()  # the small-talk descriptions and exemplars, embedded once
    history = ChatHistory()
    history.add_user_message("convert 5 km to miles, then email the result to bob, and finally add a note about it")
    before = hash_embedder.calls
    selection = await manager.select_for_history(history)
    assert hash_embedder.calls - before == 1  # the request, its intents and its three actions: one call
    assert {"Math-convert_units", "Messaging-send_email"} <= set(selection.names)
    # rank_tools is the batch of one: the same ranking as rank_many's.
    query = "read the file notes.txt and count its words"
    single = await rank_tools(manager.index, query, manager.config, limit=8)
    (batched,) = await rank_many(manager.index, [query], manager.config, limit=8, fill=True)
    assert [t.full_name for t in single.tools] == [t.full_name for t in batched.tools]
