import pytest
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings

from sk_toolfilter import ToolFilterConfig, ToolFilterManager, ToolIndex, UnknownToolError


@pytest.fixture
async def bm25_index(demo_kernel):
    return await ToolIndex.build_from_kernel(demo_kernel)


def manager_for(index, **config):
    return ToolFilterManager(index, ToolFilterConfig(search_method="bm25", **config))


async def test_filter_tools_returns_real_full_names_best_first(bm25_index):
    names = await manager_for(bm25_index).filter_tools("send an email to Bob")
    assert names[0] == "Messaging-send_email"
    assert all(name in bm25_index for name in names)


async def test_top_k_caps_the_selection(bm25_index):
    names = await manager_for(bm25_index, top_k=2, similarity_threshold=0.0).filter_tools("file")
    assert len(names) == 2


async def test_threshold_cuts_weak_matches(bm25_index):
    manager = manager_for(bm25_index, top_k=20, similarity_threshold=0.0)
    loose = await manager.filter_tools("convert the temperature to fahrenheit")
    strict = await manager_for(bm25_index, top_k=20, similarity_threshold=0.9).filter_tools(
        "convert the temperature to fahrenheit"
    )
    assert len(strict) < len(loose)
    assert strict[0] == "Math-convert_temperature"


async def test_always_include_is_added_whatever_the_query(bm25_index):
    manager = manager_for(bm25_index, always_include=["Time-today"])
    assert "Time-today" in await manager.filter_tools("send an email")
    assert await manager.filter_tools("") == ["Time-today"]


async def test_unknown_always_include_name_lists_closest_real_names(bm25_index):
    with pytest.raises(UnknownToolError) as info:
        manager_for(bm25_index, always_include=["Messaging.send_emails"])
    message = str(info.value)
    assert "tool_filtering.always_include[0]" in message and "Messaging-send_email" in message


async def test_empty_or_vague_query_selects_nothing_but_pins(bm25_index):
    manager = manager_for(bm25_index)
    assert await manager.filter_tools("") == []
    assert await manager.filter_tools("hi there!") == []


async def test_usage_pins_the_most_called_tools_only_after_use(bm25_index):
    manager = manager_for(bm25_index, always_include_top_n_used=2)
    assert await manager.filter_tools("hello") == []
    for name in ["Math-add", "Math-add", "Time-today", "Text-slugify"]:
        manager.usage.record(name)
    assert await manager.filter_tools("hello") == ["Math-add", "Text-slugify"]


async def test_explain_gives_method_scores_and_reasons(bm25_index):
    manager = manager_for(bm25_index, top_k=1, always_include=["Time-today"])
    decisions = await manager.explain("send an email")
    kept = [d for d in decisions if d.kept]
    assert [d.full_name for d in kept] == ["Messaging-send_email", "Time-today"]
    assert kept[0].method_scores == {"bm25": 1.0} and "threshold" in kept[0].reason
    assert kept[1].reason == "pinned: always_include"
    assert any(d.reason.startswith("cut: beyond top_k=1") for d in decisions)


async def test_prepare_execution_settings_returns_a_clone_and_never_mutates_the_base(bm25_index):
    base = OpenAIChatPromptExecutionSettings(
        service_id="svc",
        temperature=0.3,
        max_tokens=99,
        extension_data={"seed": 7},
        function_choice_behavior=FunctionChoiceBehavior.Auto(maximum_auto_invoke_attempts=3),
    )
    before = base.model_dump()
    manager = manager_for(bm25_index)
    clone = await manager.prepare_execution_settings("send an email", base)
    assert clone is not base
    assert base.model_dump() == before
    assert base.function_choice_behavior.filters is None
    included = clone.function_choice_behavior.filters["included_functions"]
    selected = (await manager.select("send an email")).names
    assert "Messaging-send_email" in included and sorted(included) == sorted(selected)
    assert clone.function_choice_behavior.maximum_auto_invoke_attempts == 3
    assert (clone.service_id, clone.temperature, clone.max_tokens) == ("svc", 0.3, 99)
    assert clone.extension_data["seed"] == 7


async def test_empty_selection_clone_offers_no_tools_rather_than_all(bm25_index):
    base = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    clone = await manager_for(bm25_index).prepare_execution_settings("hi", base)
    assert clone.function_choice_behavior is None


async def test_disabled_filtering_returns_the_base_unchanged(bm25_index):
    base = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    assert await manager_for(bm25_index, enabled=False).prepare_execution_settings("send", base) is base


async def test_callers_own_filters_are_respected(bm25_index):
    base = OpenAIChatPromptExecutionSettings(
        function_choice_behavior=FunctionChoiceBehavior.Auto(filters={"excluded_plugins": ["Messaging"]})
    )
    clone = await manager_for(bm25_index).prepare_execution_settings("send an email or a message", base)
    names = clone.function_choice_behavior.filters["included_functions"]
    assert names and not any(n.startswith("Messaging-") for n in names)
    assert "excluded_plugins" not in clone.function_choice_behavior.filters


async def test_from_kernel_builds_the_configured_index(demo_kernel, hash_embedder):
    manager = await ToolFilterManager.from_kernel(
        demo_kernel, ToolFilterConfig(top_k=3), embedding_service=hash_embedder
    )
    assert manager.index.has_embeddings
    assert (await manager.filter_tools("multiply two numbers"))[0] == "Math-multiply"


async def test_from_kernel_with_bm25_needs_no_embedding_service(demo_kernel):
    manager = await ToolFilterManager.from_kernel(demo_kernel, ToolFilterConfig(search_method="bm25"))
    assert not manager.index.has_embeddings


async def test_a_function_added_to_an_existing_plugin_is_indexed_at_the_next_deep_check(
    demo_kernel, hash_embedder, monkeypatch
):
    from semantic_kernel.functions import kernel_function

    import sk_toolfilter.selection.catalog_upkeep as upkeep_module

    manager = await ToolFilterManager.from_kernel(demo_kernel, embedding_service=hash_embedder)
    await manager.filter_tools("hello")  # the deep check just ran: the next one is a second away

    @kernel_function(name="translate_to_klingon", description="Translate English text into Klingon.")
    def translate_to_klingon(text: str) -> str:
        return text

    demo_kernel.add_function("Text", translate_to_klingon)  # the plugin object stays the same
    monkeypatch.setattr(upkeep_module.time, "monotonic", lambda: 10.0**9)  # ... and a second passes
    assert "Text-translate_to_klingon" in await manager.filter_tools("translate this into Klingon")


async def test_enable_tool_filtering_on_a_kernel_without_a_chat_service_is_an_error(demo_kernel):
    from sk_toolfilter import ConfigError, create_tool_filter, enable_tool_filtering

    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(search_method="bm25"))
    with pytest.raises(ConfigError, match=r"no chat completion service yet.*kernel.add_service"):
        enable_tool_filtering(demo_kernel, manager)


async def test_the_offer_keeps_unknown_tools_after_the_selection_and_cuts_them_first_at_the_cap(bm25_index, caplog):
    import logging

    on_offer = [*bm25_index.names, "RunOnly-lookup_ticket", "RunOnly-close_ticket"]
    offer = await manager_for(bm25_index, top_k=2).offer("send an email to Bob", on_offer)
    assert offer.narrowed and offer.names[-2:] == ["RunOnly-lookup_ticket", "RunOnly-close_ticket"]
    assert set(offer.names[:-2]) == set(offer.selection.names) and "Messaging-send_email" in offer.names
    with caplog.at_level(logging.WARNING):
        capped = await manager_for(bm25_index, top_k=2, max_tools_total=3).offer("send an email to Bob", on_offer)
    assert len(capped.names) == 3 and capped.names[-1] == "RunOnly-lookup_ticket"
    assert set(capped.selection.names) <= set(capped.names)  # the selection is never what the cap cuts
    assert "tools the index does not know are on offer beyond max_tools_total=3" in caplog.text


async def test_with_filtering_off_the_offer_hides_only_excluded_tools_and_says_when_nothing_changed(bm25_index):
    off = await manager_for(bm25_index, enabled=False).offer("anything", bm25_index.names)
    assert not off.narrowed and off.names == bm25_index.names and off.selection is None
    hidden = await manager_for(bm25_index, enabled=False, exclude=["Files-*"]).offer("anything", bm25_index.names)
    assert hidden.narrowed and hidden.names == [n for n in bm25_index.names if not n.startswith("Files-")]


async def test_a_function_removed_from_its_plugin_in_place_is_never_selected_before_the_next_deep_check(
    demo_kernel,
):
    """The kernel's cheap fingerprint notices a function removed from an existing plugin object only at
    its next deep check; meanwhile the selection still never names it (nor pins it)."""
    manager = await ToolFilterManager.from_kernel(
        demo_kernel, ToolFilterConfig(search_method="bm25", always_include=["Messaging-send_direct_message"])
    )
    query = "send an email to Bob, then add 2 and 3"
    before = await manager.filter_tools(query)
    assert {"Messaging-send_email", "Messaging-send_direct_message", "Math-add"} <= set(before)
    for name in ("send_email", "send_direct_message"):
        del demo_kernel.plugins["Messaging"].functions[name]
    names = await manager.filter_tools(query)
    assert "Math-add" in names and "Messaging-send_email" not in names
    assert "Messaging-send_direct_message" not in names


async def test_filter_tools_ranks_only_as_deep_as_sending_needs_and_sends_what_select_decides(demo_kernel):
    """filter_tools (and offer) rank as deep as the cut can keep; select and explain decide for every
    tool ranked as deep as explain shows; the names sent are the same."""
    manager = await ToolFilterManager.from_kernel(demo_kernel, ToolFilterConfig(search_method="bm25", top_k=3))
    # Ranked intent by intent, a request interleaves its intents' lists: a tool past the third scores
    # higher than one before it, and the cut reads on (here it keeps Messaging-send_direct_message).
    queries = ["send an email to Bob", "read the notes file, then send an email to Bob", "add 2 and 3", "hello"]
    for query in queries:
        explained = await manager.select(query)
        assert await manager.filter_tools(query) == explained.names
        assert set((await manager.offer(query, manager.index.names)).names) == set(explained.names)
    assert len(await manager.filter_tools(queries[1])) == 3
    whole = "send a message, an email or a direct message"
    sent = await manager.offer(whole, manager.index.names)
    assert sent.selection is not None and len(sent.selection.ranking.tools) == 3
    assert len((await manager.select(whole)).ranking.tools) > 3


async def test_when_a_tool_ranked_for_sending_left_its_plugin_in_place_the_cut_reaches_further(demo_kernel):
    """A function removed from its plugin in place (noticed at the next deep check only) among the few
    tools ranked for sending: the request ranks as deep as select does, so as many tools are sent."""
    config = ToolFilterConfig(search_method="bm25", top_k=2, similarity_threshold=0.0)
    manager = await ToolFilterManager.from_kernel(demo_kernel, config)
    query = "send a message, an email or a direct message"
    before = await manager.filter_tools(query)
    assert len(before) == 2
    plugin, function = before[0].split("-", 1)
    del demo_kernel.plugins[plugin].functions[function]
    names = await manager.filter_tools(query)
    assert len(names) == 2 and before[0] not in names and before[1] in names
    assert names == (await manager.select(query)).names
