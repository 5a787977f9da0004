"""Excluded and disabled tools are never sent, listed, pinned — or executed, whatever the path."""

import pytest
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
from semantic_kernel.contents import ChatHistory

from sk_toolfilter import ConfigError, ToolFilterConfig, create_tool_filter, wrap_chat_service
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply

BLOCK = {
    "search_method": "bm25",
    "exclude": ["Files-delete_*", "Messaging"],
    "tools_overrides": {"Text-slugify": {"enabled": False}},
}
FORBIDDEN = ["Files-delete_file", "Messaging-send_email", "Text-slugify"]


@pytest.fixture
def sandbox_file(tmp_path):
    path = tmp_path / "sandbox" / "keep.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("precious")
    return path


async def manager_for(kernel, **extra):
    return await create_tool_filter(kernel, ToolFilterConfig.from_mapping({**BLOCK, **extra}))


async def test_search_never_returns_excluded_tools(demo_kernel):
    manager = await manager_for(demo_kernel, top_k=50, similarity_threshold=0)
    for query in ("delete the file keep.txt", "send an email", "slugify this title", "Files-delete_file"):
        assert not set(FORBIDDEN) & set(await manager.filter_tools(query))


async def test_excluded_tools_cannot_be_pinned(demo_kernel):
    with pytest.raises(ConfigError, match="excluded or disabled"):
        await manager_for(demo_kernel, always_include=["Files-delete_file"])
    manager = await manager_for(demo_kernel, always_include_top_n_used=3)
    manager.usage.record("Files-delete_file")
    assert "Files-delete_file" not in await manager.filter_tools("hello")


async def test_overrides_must_name_real_tools(demo_kernel):
    with pytest.raises(ConfigError, match=r"tools_overrides: 'Text-slugifyy' is not a kernel function.*Text-slugify"):
        await create_tool_filter(
            demo_kernel, ToolFilterConfig.from_mapping({"tools_overrides": {"Text-slugifyy": {"enabled": False}}})
        )


async def forced_call(kernel, settings, service, name="Files-delete_file"):
    history = ChatHistory()
    history.add_user_message("please tidy up")
    return await service.get_chat_message_contents(history, settings, kernel=kernel)


async def test_forced_call_is_refused_through_the_filtering_wrapper(demo_kernel, sandbox_file):
    manager = await manager_for(demo_kernel)
    transport = RecordingTransport([tool_call_reply(("Files-delete_file", {"path": "keep.txt"})), text_reply("ok")])
    service = wrap_chat_service(offline_chat_service(transport), manager)
    settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    await forced_call(demo_kernel, settings, service)
    assert sandbox_file.read_text() == "precious"
    assert "Files-delete_file" not in transport.tool_names(0)
    assert transport.requests[1]["messages"][-1]["role"] == "tool"


async def test_forced_call_is_refused_with_prepare_execution_settings(demo_kernel, sandbox_file):
    manager = await manager_for(demo_kernel)
    transport = RecordingTransport([tool_call_reply(("Files-delete_file", {"path": "keep.txt"})), text_reply("ok")])
    base = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    settings = await manager.prepare_execution_settings("tidy up the files", base)
    await forced_call(demo_kernel, settings, offline_chat_service(transport))
    assert sandbox_file.read_text() == "precious"


async def test_forced_call_is_refused_even_when_the_caller_sends_every_tool(demo_kernel, sandbox_file):
    # The caller bypasses filtering entirely (its own unfiltered settings): only the guard stands.
    await manager_for(demo_kernel)
    transport = RecordingTransport([tool_call_reply(("Files-delete_file", {"path": "keep.txt"})), text_reply("ok")])
    settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    await forced_call(demo_kernel, settings, offline_chat_service(transport))
    assert "Files-delete_file" in transport.tool_names(0)  # SK itself would have run it
    assert sandbox_file.read_text() == "precious"
    assert "not available to this agent" in transport.requests[1]["messages"][-1]["content"]


async def test_a_call_to_a_tool_not_offered_in_this_request_is_refused(demo_kernel, sandbox_file):
    manager = await manager_for(demo_kernel)
    transport = RecordingTransport(
        [tool_call_reply(("Files-write_file", {"path": "keep.txt", "content": "x"})), text_reply("ok")]
    )
    base = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    settings = await manager.prepare_execution_settings("add 2 and 3", base)
    await forced_call(demo_kernel, settings, offline_chat_service(transport))
    assert sandbox_file.read_text() == "precious"
