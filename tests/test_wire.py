"""The tools array actually sent by SK's real OpenAI connector (HTTP intercepted, no network)."""

import pytest
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
from semantic_kernel.contents import ChatHistory

from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply


def base_settings():
    return OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())


async def send(kernel, transport, settings, query):
    service = offline_chat_service(transport)
    history = ChatHistory()
    history.add_user_message(query)
    return await service.get_chat_message_contents(history, settings, kernel=kernel)


@pytest.fixture
async def manager(demo_kernel, hash_embedder):
    return await create_tool_filter(demo_kernel, ToolFilterConfig(top_k=3), embedding_service=hash_embedder)


async def test_filtering_on_sends_exactly_the_selected_functions(demo_kernel, manager):
    transport = RecordingTransport()
    query = "send an email to bob@example.com"
    selected = await manager.filter_tools(query)
    settings = await manager.prepare_execution_settings(query, base_settings())
    await send(demo_kernel, transport, settings, query)
    assert selected and "Messaging-send_email" in selected
    assert sorted(transport.tool_names()) == sorted(selected)
    email = next(t for t in transport.last["tools"] if t["function"]["name"] == "Messaging-send_email")
    assert set(email["function"]["parameters"]["properties"]) == {"to", "subject", "body"}


async def test_filtering_off_sends_every_function(demo_kernel):
    transport = RecordingTransport()
    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(enabled=False, search_method="bm25"))
    settings = await manager.prepare_execution_settings("send an email", base_settings())
    await send(demo_kernel, transport, settings, "send an email")
    assert len(transport.tool_names()) == 46


async def test_an_empty_selection_sends_no_tools_at_all(demo_kernel, hash_embedder):
    config = ToolFilterConfig.from_mapping({"discovery": {"enabled": False}})
    manager = await create_tool_filter(demo_kernel, config, embedding_service=hash_embedder)
    transport = RecordingTransport()
    settings = await manager.prepare_execution_settings("hi", base_settings())
    await send(demo_kernel, transport, settings, "hi")
    assert "tools" not in transport.last and "tool_choice" not in transport.last


async def test_the_model_calls_a_selected_tool_sk_runs_it_and_usage_counts_it(demo_kernel, manager):
    transport = RecordingTransport([tool_call_reply(("Math-multiply", {"a": 6, "b": 7})), text_reply("42")])
    settings = await manager.prepare_execution_settings("multiply 6 by 7", base_settings())
    result = await send(demo_kernel, transport, settings, "multiply 6 by 7")
    assert str(result[0]) == "42"
    assert len(transport.requests) == 2
    tool_message = transport.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == "42.0"
    assert manager.usage.count("Math-multiply") == 1


async def test_a_vague_query_sends_only_the_pinned_discovery_tools(demo_kernel, manager):
    transport = RecordingTransport()
    settings = await manager.prepare_execution_settings("hi", base_settings())
    await send(demo_kernel, transport, settings, "hi")
    assert transport.tool_names() == ["ToolSearch-describe_tool", "ToolSearch-search_tools"]


# --- the caller's own filters narrow the candidates before the cut -----------------------------------
@pytest.mark.parametrize(
    ("filters", "query"),
    [
        ({"included_functions": ["Math-convert_units"]}, "hi there"),
        ({"included_functions": ["Math-convert_units"]}, "send an email to bob"),
        ({"included_plugins": ["Messaging"]}, "what's the weather like"),
        ({"included_plugins": ["Time"], "excluded_functions": ["Time-today"]}, "hello"),
    ],
)
async def test_the_wrapper_sends_what_plain_sk_sends_when_the_callers_filters_fit_the_budget(
    demo_kernel, hash_embedder, filters, query
):
    from sk_toolfilter import wrap_chat_service

    manager = await create_tool_filter(demo_kernel, ToolFilterConfig(top_k=8), embedding_service=hash_embedder)
    settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto(filters=filters))
    plain, filtered = RecordingTransport(), RecordingTransport()
    await send(demo_kernel, plain, settings, query)
    history = ChatHistory()
    history.add_user_message(query)
    service = wrap_chat_service(offline_chat_service(filtered), manager)
    await service.get_chat_message_contents(history, settings, kernel=demo_kernel)
    assert plain.tool_names()
    assert sorted(filtered.tool_names()) == sorted(plain.tool_names())
    assert filtered.last.get("tool_choice") == plain.last.get("tool_choice")


async def test_a_catalog_no_larger_than_the_budget_is_sent_whole_and_explain_says_why(hash_embedder):
    from semantic_kernel import Kernel
    from semantic_kernel.functions import kernel_function

    class Shop:
        @kernel_function(description="Get the price of an item in the catalog.")
        def get_item_price(self, item: str) -> str:
            return item

        @kernel_function(description="List the items on sale.")
        def list_items(self) -> str:
            return ""

    kernel = Kernel()
    kernel.add_plugin(Shop(), "Shop")
    config = ToolFilterConfig.from_mapping({"top_k": 5, "discovery": {"enabled": False}})
    manager = await create_tool_filter(kernel, config, embedding_service=hash_embedder)
    for query in ("how much does a lamp cost?", "hi", ""):
        assert sorted(await manager.filter_tools(query)) == ["Shop-get_item_price", "Shop-list_items"]
    decisions = await manager.explain("how much does a lamp cost?")
    assert all(d.kept and "fit the budget of 5" in d.reason for d in decisions)
