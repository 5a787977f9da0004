import pytest

from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.retrieval.metadata import ParameterMetadata, ToolMetadata
from sk_toolfilter.selection.discovery import coerce_limit, one_line_summary, render_matches


def make_tools(n, plugins=3):
    return [
        ToolMetadata(
            plugin=f"P{i % plugins}",
            name=f"tool_{i}",
            full_name=f"P{i % plugins}-tool_{i}",
            description=f"Does thing number {i}. More detail here.",
            parameters=(ParameterMetadata("x", "int", "An input", True),),
        )
        for i in range(n)
    ]


@pytest.mark.parametrize(
    ("n", "tier", "marker"),
    [
        (3, "full", "P0-tool_0(x: int)"),
        (20, "summary", "P0-tool_0 — Does thing number 0."),
        (200, "names", "P0-tool_0"),
    ],
)
def test_output_degrades_with_the_number_of_matches(n, tier, marker):
    text, shown = render_matches(make_tools(n), "thing", max_chars=50_000)
    assert marker in text.splitlines()[0]
    assert f"[{n} tools matching 'thing'; showing {len(shown)} ({tier})." in text
    assert len(shown) == n


def test_many_matches_become_counts_per_plugin():
    text, shown = render_matches(make_tools(1000), "thing", max_chars=50_000)
    assert text.splitlines()[:3] == ["P0: 334 tools", "P1: 333 tools", "P2: 333 tools"]
    assert "1000 tools matching 'thing'; too many to list: counts for 3 of 3 plugins shown." in text and shown == []


def test_every_answer_ends_with_a_footer_saying_how_to_narrow():
    text, _ = render_matches(make_tools(40), "thing", max_chars=50_000)
    assert text.splitlines()[-1].startswith("[40 tools matching 'thing'; showing 40 (names).")
    assert "Narrow with a more specific query" in text
    empty, _ = render_matches([], "zzz")
    assert empty.startswith("[0 tools matching 'zzz'")


def test_the_size_cap_is_hard():
    text, shown = render_matches(make_tools(300), "thing", detail="full", limit=300, max_chars=2000)
    assert len(text) <= 2000
    huge_query, _ = render_matches(make_tools(300), "thing " * 5000, detail="summary", max_chars=2000)
    assert len(huge_query) <= 2000
    assert 0 < len(shown) < 300 and f"showing {len(shown)} (full)" in text


def test_detail_and_limit_override_the_tier_and_accept_numeric_strings():
    text, shown = render_matches(make_tools(3), "thing", detail="names", limit="2")
    assert shown == ["P0-tool_0", "P1-tool_1"] and "(names)" in text
    assert coerce_limit("5", 10) == 5 and coerce_limit(" 7 ", 10) == 7
    assert coerce_limit("many", 10) == 10 and coerce_limit("-3", 10) == 10 and coerce_limit(None, 10) == 10


@pytest.mark.parametrize(
    ("description", "summary"),
    [
        ("Convert units, e.g. km to miles. Supports many units.", "Convert units, e.g. km to miles."),
        ("Search files, i.e. grep them. Fast.", "Search files, i.e. grep them."),
        ("Costs approx. 3.5 dollars per call. Billing applies.", "Costs approx. 3.5 dollars per call."),
        ("No trailing period", "No trailing period"),
        ("", "(no description)"),
    ],
)
def test_one_line_summaries_do_not_stop_at_abbreviations(description, summary):
    assert one_line_summary(description) == summary


def test_few_matches_are_followed_by_the_nearest_tools_and_the_footer_says_which():
    tools = make_tools(5)
    text, shown = render_matches(tools[:1], "thing", nearest=tools[1:3])
    assert shown == [t.full_name for t in tools[:3]]
    assert "[1 tools matching 'thing'; showing 1 (full), then the 2 nearest without a match." in text
    text, shown = render_matches([], "thing", nearest=tools[:2])
    assert len(shown) == 2 and "[0 tools matching 'thing'; showing the 2 nearest (full), none a clear match." in text


@pytest.mark.parametrize("query", ["Is nginx running on the proxy box?", "reboot the database cluster"])
async def test_a_search_without_a_clear_match_answers_with_the_nearest_tools_not_nothing(demo_kernel, query):
    await create_tool_filter(demo_kernel, ToolFilterConfig())
    search = demo_kernel.get_function("ToolSearch", "search_tools")
    text = str(await demo_kernel.invoke(search, query=query))
    assert "nearest" in text and len(text.splitlines()) > 1  # tools listed above the footer
    assert str(await demo_kernel.invoke(search, query="thanks!")).startswith("[0 tools matching")  # small talk


@pytest.fixture
async def manager(demo_kernel):
    config = ToolFilterConfig.from_mapping(
        {
            "search_method": "bm25",
            "exclude": ["Files-delete_*", "Messaging-send_direct_message"],
            "tools_overrides": {
                "Time-today": {"searchable": False, "always_include": True},
                "Text-reverse_text": {"enabled": False},
                "Notes-recall_fact": {"keywords": ["favourite", "preference"]},
            },
        }
    )
    return await create_tool_filter(demo_kernel, config)


async def test_discovery_search_lists_matches_and_hides_what_is_not_searchable(demo_kernel, manager):
    search = demo_kernel.get_function("ToolSearch", "search_tools")
    text = str(await demo_kernel.invoke(search, query="delete a file"))
    assert "Files-delete_file" not in text
    everything = str(await demo_kernel.invoke(search, query="", detail="names", limit="500"))
    for hidden in (
        "Files-delete_file",
        "Messaging-send_direct_message",
        "Text-reverse_text",
        "Time-today",
        "ToolSearch-",
    ):
        assert hidden not in everything
    assert "Files-read_file" in everything


async def test_keywords_from_overrides_make_a_tool_findable(manager):
    assert (await manager.filter_tools("my favourite"))[0] == "Notes-recall_fact"


async def test_describe_tool_shows_the_signature_or_says_it_does_not_exist(demo_kernel, manager):
    describe = demo_kernel.get_function("ToolSearch", "describe_tool")
    assert "Messaging-send_email(to: str, subject: str, body: str)" in str(
        await demo_kernel.invoke(describe, name="Messaging.send_email")
    )
    assert "No tool named" in str(await demo_kernel.invoke(describe, name="Files-delete_file"))


async def test_limit_accepts_numbers_and_numeric_strings_through_the_kernel(demo_kernel, manager):
    search = demo_kernel.get_function("ToolSearch", "search_tools")
    for limit in (2, "2"):
        text = str(await demo_kernel.invoke(search, query="", detail="names", limit=limit))
        assert "showing 2 (names)" in text


async def test_tools_found_with_discovery_are_selected_for_the_next_request(demo_kernel, manager):
    from semantic_kernel.contents import ChatHistory, ChatMessageContent, FunctionCallContent, FunctionResultContent

    search = FunctionCallContent(id="1", name="ToolSearch-search_tools", arguments='{"query": "units"}')
    describe = FunctionCallContent(id="2", name="ToolSearch-describe_tool", arguments='{"name": "Text.slugify"}')
    describe_hidden = FunctionCallContent(
        id="3", name="ToolSearch-describe_tool", arguments='{"name": "Text-reverse_text"}'
    )
    answer = str(
        await demo_kernel.invoke(demo_kernel.get_function("ToolSearch", "search_tools"), query="convert units")
    )
    history = ChatHistory()
    history.add_user_message("hi")
    history.add_message(ChatMessageContent(role="assistant", items=[search]))
    history.add_message(
        ChatMessageContent(
            role="tool", items=[FunctionResultContent.from_function_call_content_and_result(search, answer)]
        )
    )
    history.add_message(ChatMessageContent(role="assistant", items=[describe, describe_hidden]))
    selection = await manager.select_for_history(history)
    assert "Math-convert_units" in answer and "Math-convert_units" in selection.names
    assert "Text-slugify" in selection.names
    assert "Text-reverse_text" not in selection.names  # disabled by an override: describe_tool cannot load it
    reasons = {d.full_name: d.reason for d in selection.decisions}
    assert {reasons["Math-convert_units"], reasons["Text-slugify"]} <= {
        "pinned: found with discovery",
        *(r for r in reasons.values() if r.startswith("kept")),
    }


async def test_describe_tool_names_the_lookup_that_gives_a_parameter_and_loads_it_next(demo_kernel):
    from semantic_kernel.contents import ChatHistory, ChatMessageContent, FunctionCallContent

    from tests.test_agent_loop import Shop

    demo_kernel.add_plugin(Shop(), "Shop")
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig())
    answer = str(
        await demo_kernel.invoke(demo_kernel.get_function("ToolSearch", "describe_tool"), name="Shop-refund_order")
    )
    assert "(order_id: Shop-get_order_history looks it up; loaded for your next step too)" in answer

    describe = FunctionCallContent(id="1", name="ToolSearch-describe_tool", arguments='{"name": "Shop-refund_order"}')
    history = ChatHistory()
    history.add_user_message("hi")
    history.add_message(ChatMessageContent(role="assistant", items=[describe]))
    selection = await manager.select_for_history(history)
    assert {"Shop-refund_order", "Shop-get_order_history"} <= set(selection.names)
