from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
from semantic_kernel.contents import ChatHistory, ChatMessageContent, FunctionCallContent

from sk_toolfilter import ToolFilterConfig, create_tool_filter, wrap_chat_service
from sk_toolfilter.measure.report import prefix_stable_share
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, tool_call_reply
from sk_toolfilter.retrieval.text import split_query_parts, split_request_clauses
from sk_toolfilter.selection.query import build_query
from sk_toolfilter.selection.sticky import StickyLists

TURNS = [
    "Save a note titled trip with the flight LH 400",
    "How many days until 2026-12-24?",
    "What day of the week is 2026-12-24?",
    "Convert 30 degrees Celsius to Fahrenheit",
    "Email the trip note to anna@example.com",
]


async def play(kernel, mode):
    config = ToolFilterConfig.from_mapping({"search_method": "bm25", "selection_mode": mode, "sticky_max_tools": 40})
    manager = await create_tool_filter(kernel, config)
    transport = RecordingTransport()
    service = wrap_chat_service(offline_chat_service(transport), manager)
    settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    history = ChatHistory(system_message="You help.")
    for turn in TURNS:
        history.add_user_message(turn)
        history.add_message((await service.get_chat_message_contents(history, settings, kernel=kernel))[0])
    return [transport.tool_names(i) for i in range(len(TURNS))]


async def test_sticky_lists_keep_every_loaded_tool_in_order(demo_kernel):
    lists = await play(demo_kernel, "sticky")
    assert prefix_stable_share(lists) == 1.0
    assert "Notes-add_note" in lists[-1] and "Math-convert_temperature" in lists[-1]


async def test_fresh_lists_change_with_each_request(demo_kernel):
    assert prefix_stable_share(await play(demo_kernel, "fresh")) < 0.5


def grow(history: ChatHistory, user: str) -> ChatHistory:
    history.add_user_message(user)
    return history


def test_sticky_lists_evict_least_recently_used_in_batches_and_never_current_tools():
    lists = StickyLists(max_tools=4)
    history = ChatHistory()
    assert lists.update(grow(history, "one"), ["a", "b"]) == ["a", "b"]
    assert lists.update(grow(history, "two"), ["c"]) == ["a", "b", "c"]
    assert lists.update(grow(history, "three"), ["a", "d"]) == ["a", "b", "c", "d"]
    assert lists.update(grow(history, "four"), ["e"]) == ["a", "d", "e"]  # over the cap: b and c leave together
    assert lists.update(grow(ChatHistory(), "other"), ["x"]) == ["x"]  # another conversation starts empty


def test_sticky_lists_of_conversations_with_the_same_opening_evolve_independently():
    lists = StickyLists(max_tools=10)
    first, second = grow(ChatHistory(), "hi"), grow(ChatHistory(), "hi")
    assert lists.update(first, ["search"]) == ["search"]
    assert lists.update(second, ["search"]) == ["search"]  # same messages so far: same list
    first.add_assistant_message("Hello!")
    second.add_assistant_message("Hello!")
    assert lists.update(grow(first, "what time is it?"), ["clock"]) == ["search", "clock"]
    assert lists.update(grow(second, "email Bob"), ["email"]) == ["search", "email"]
    assert lists.update(grow(first, "and in Tokyo?"), ["clock"]) == ["search", "clock"]  # no "email" here


def test_prefix_stable_share_counts_requests_extending_the_previous_list():
    assert prefix_stable_share([["a"], ["a", "b"], ["b"], ["b", "c"]]) == 2 / 3
    assert prefix_stable_share([["a"]]) is None


def test_conversation_query_puts_the_turns_request_first_and_leaves_tool_names_out():
    history = ChatHistory(system_message="sys")
    history.add_user_message("Summarize the Q3 files")
    history.add_message(
        ChatMessageContent(
            role="assistant", items=[FunctionCallContent(id="1", name="Files-read_file", arguments="{}")]
        )
    )
    history.add_assistant_message("Here is the summary of Q3.")
    history.add_user_message("do the same for March")
    history.add_message(
        ChatMessageContent(role="assistant", items=[FunctionCallContent(id="2", name="Files-list_files")])
    )
    query = build_query(history, "conversation")
    assert query.splitlines()[0] == "do the same for March"  # the current turn's request leads
    assert "Summarize the Q3 files" not in query  # earlier turns are not this request
    assert "Files-" not in query  # calls made so far would outweigh the request
    assert "Here is the summary of Q3." not in query  # an earlier turn's answer is not this request
    assert build_query(history, "last_message") == "do the same for March"
    assert len(build_query(history, "conversation", max_chars=30)) <= 30


def test_a_pivot_is_led_by_the_new_request():
    history = ChatHistory()
    history.add_user_message("read the files in reports/")
    history.add_assistant_message("Done reading.")
    history.add_user_message("now post a summary to Slack")
    assert build_query(history).startswith("now post a summary to Slack")


def test_multi_part_requests_are_split_into_sentences():
    assert split_query_parts(
        "Get the film details. After that, restore it; then email Bob. Price is 3.5 USD, e.g. cheap."
    ) == ["Get the film details.", "After that, restore it", "then email Bob.", "Price is 3.5 USD, e.g. cheap."]
    assert split_query_parts("Buy bread and butter") == ["Buy bread and butter"]


def test_a_request_listing_actions_is_split_into_its_needs():
    assert split_request_clauses("lock the doors, press the brake and start the engine") == [
        "lock the doors",
        "press the brake",
        "start the engine",
    ]
    assert split_request_clauses("Go to the docs folder and then copy a.txt to b.txt. Show me b.txt") == [
        "Go to the docs folder",
        "copy a.txt to b.txt.",
        "Show me b.txt",
    ]
    # A piece with fewer than two content words stays with its neighbour: lists of things, not of actions.
    assert split_request_clauses("Buy bread and butter") == ["Buy bread and butter"]
    assert split_request_clauses("Average 3, 5 and 10, then round it to an integer") == [
        "Average 3, 5 and 10",
        "round it to an integer",
    ]
    assert split_request_clauses("Hi, and thanks") == ["Hi, and thanks"]


async def test_after_maximum_auto_invoke_attempts_the_last_request_has_no_tools(demo_kernel):
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(search_method="bm25"))
    transport = RecordingTransport([tool_call_reply(("Math-add", {"a": 1, "b": 2}))] * 2)
    service = wrap_chat_service(offline_chat_service(transport), manager)
    settings = OpenAIChatPromptExecutionSettings(
        function_choice_behavior=FunctionChoiceBehavior.Auto(maximum_auto_invoke_attempts=1)
    )
    history = ChatHistory()
    history.add_user_message("add 1 and 2")
    await service.get_chat_message_contents(history, settings, kernel=demo_kernel)
    assert "Math-add" in transport.tool_names(0)
    assert "tools" not in transport.requests[-1]
