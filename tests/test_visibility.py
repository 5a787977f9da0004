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


async def test_excludes_and_overrides_that_match_no_tool_are_warnings_naming_the_closest_tools(demo_kernel, caplog):
    config = {"exclude": ["Messagng", "Files-delete_*"], "tools_overrides": {"Text-slugifyy": {"enabled": False}}}
    await create_tool_filter(demo_kernel, ToolFilterConfig.from_mapping(config))
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(
        "exclude[0]: 'Messagng' matches no tool of the kernel; closest real names: Messaging" in w for w in warnings
    )
    assert any("tools_overrides: 'Text-slugifyy' matches no tool" in w and "Text-slugify" in w for w in warnings)
    assert not any("exclude[1]" in w for w in warnings)  # a glob that matches is fine


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


# --- the policy holds everywhere ----------------------------------------------------------------
async def test_exclusions_hold_when_filtering_is_disabled(demo_kernel):
    manager = await manager_for(demo_kernel, enabled=False)
    transport = RecordingTransport([text_reply("ok")])
    service = wrap_chat_service(offline_chat_service(transport), manager)
    settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    history = ChatHistory()
    history.add_user_message("send an email to bob")
    await service.get_chat_message_contents(history, settings, kernel=demo_kernel)
    sent = transport.tool_names(0)
    assert "Math-add" in sent and len(sent) > 30  # no ranking: everything visible goes
    assert not set(FORBIDDEN) & set(sent)
    clone = await manager.prepare_execution_settings("send an email", settings)
    offered = clone.function_choice_behavior.filters["included_functions"]
    assert "Math-add" in offered and not set(FORBIDDEN) & set(offered)


async def test_two_agents_on_one_kernel_each_see_and_run_only_their_own_tools(demo_kernel):
    mail_desk = await create_tool_filter(demo_kernel, ToolFilterConfig(search_method="bm25", exclude=["Files"]))
    file_desk = await create_tool_filter(demo_kernel, ToolFilterConfig(search_method="bm25", exclude=["Messaging"]))

    async def ask(manager, *replies):
        transport = RecordingTransport([*replies, text_reply("done")])
        service = wrap_chat_service(offline_chat_service(transport), manager)
        settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
        history = ChatHistory()
        history.add_user_message("find a tool")
        await service.get_chat_message_contents(history, settings, kernel=demo_kernel)
        return transport.requests[1]["messages"][-1]["content"]

    search = ("ToolSearch-search_tools", {"query": "send an email message", "detail": "names"})
    assert "Messaging-send_email" in await ask(mail_desk, tool_call_reply(search))
    assert "Messaging-" not in await ask(file_desk, tool_call_reply(search))
    listing = ("Files-list_files", {})
    assert "not available to this agent" in await ask(mail_desk, tool_call_reply(listing))
    assert "not available" not in await ask(file_desk, tool_call_reply(listing))


async def test_discovery_outside_any_request_shows_only_what_every_agent_on_the_kernel_may_see(demo_kernel):
    """A direct kernel.invoke, a test harness, a scheduled job: no request, so no one agent's view."""
    await create_tool_filter(demo_kernel, ToolFilterConfig(search_method="bm25", exclude=["Files"]))
    await create_tool_filter(demo_kernel, ToolFilterConfig(search_method="bm25", exclude=["Messaging"]))
    search = demo_kernel.get_function("ToolSearch", "search_tools")
    listing = str(await demo_kernel.invoke(search, query="", detail="names", limit="100"))
    assert "Math-add" in listing
    assert "Files-" not in listing and "Messaging-" not in listing
    for hidden in ("Files-delete_file", "Messaging-send_email"):
        described = str(await demo_kernel.invoke(demo_kernel.get_function("ToolSearch", "describe_tool"), name=hidden))
        assert described.startswith("No tool named")
    shown = str(await demo_kernel.invoke(demo_kernel.get_function("ToolSearch", "describe_tool"), name="Math-add"))
    assert shown.startswith("Math-add")


async def test_a_source_whose_plugin_name_is_taken_is_an_error_naming_both(tmp_path):
    import contextlib

    from semantic_kernel import Kernel

    from sk_toolfilter.agents.agent_file import parse_agent
    from sk_toolfilter.agents.sources import add_sources

    catalog = tmp_path / "tools.jsonl"
    catalog.write_text('{"plugin": "Math", "name": "add", "description": "Add."}\n')
    spec = parse_agent(
        {
            "name": "a",
            "tools": [
                {"type": "plugin", "name": "Math", "import": "sk_toolfilter.demo:MathPlugin"},
                {"type": "catalog", "name": "extra", "path": str(catalog)},
            ],
        }
    )
    with pytest.raises(ConfigError) as info:
        await add_sources(Kernel(), spec, contextlib.AsyncExitStack())
    assert str(info.value) == "tools[1] (extra): plugin name 'Math' is already used by tools[0] (Math)"


async def test_a_discovery_plugin_name_that_is_a_tool_plugin_is_an_error(demo_kernel):
    with pytest.raises(ConfigError, match=r"discovery\.plugin_name: 'Math' is already the name of a plugin"):
        await create_tool_filter(demo_kernel, ToolFilterConfig(discovery={"plugin_name": "Math"}))
    assert "search_tools" not in demo_kernel.plugins["Math"].functions


# --- bare names, as other tools' agent files write them --------------------------------------
async def test_bare_function_names_resolve_when_unambiguous(demo_kernel):
    config = ToolFilterConfig(
        search_method="bm25",
        always_include=["convert_units"],
        exclude=["send_email", "Files"],
        tools_overrides={"slugify": {"enabled": False}},
    )
    manager = await create_tool_filter(demo_kernel, config)
    assert manager.config.always_include == ["Math-convert_units"]
    assert manager.config.exclude == ["Messaging-send_email", "Files"]  # a plugin name stays a plugin
    assert manager.is_hidden("Messaging-send_email") and manager.is_hidden("Text-slugify")
    assert "Math-convert_units" in await manager.filter_tools("what's the weather")


async def test_an_ambiguous_bare_name_is_an_error_listing_the_candidates(demo_kernel):
    from semantic_kernel.functions import kernel_function

    class Inbox:
        @kernel_function(description="Send an email from the shared inbox.")
        def send_email(self, to: str) -> str:
            return to

    demo_kernel.add_plugin(Inbox(), "Inbox")
    with pytest.raises(ConfigError) as info:
        await create_tool_filter(demo_kernel, ToolFilterConfig(always_include=["send_email"]))
    assert str(info.value) == (
        "tool_filtering.always_include[0]: 'send_email' is ambiguous; write one of: "
        "Inbox-send_email, Messaging-send_email"
    )


# --- policy names that nearly match --------------------------------------------------------------
@pytest.mark.parametrize(
    "spelling", ["files-delete_file", "Files.delete_file", "Files-delete-file", "FILES/delete file", "delete-file"]
)
async def test_an_exclude_spelled_differently_still_hides_the_tool(demo_kernel, hash_embedder, spelling):
    config = ToolFilterConfig.from_mapping({"exclude": [spelling], "top_k": 20})
    manager = await create_tool_filter(demo_kernel, config, embedding_service=hash_embedder)
    assert manager.is_hidden("Files-delete_file")
    assert "Files-delete_file" not in await manager.filter_tools("delete the file notes.txt")
    assert not manager.is_hidden("Files-read_file")


async def test_a_near_plugin_name_in_exclude_hides_the_plugin(demo_kernel, hash_embedder):
    config = ToolFilterConfig.from_mapping({"exclude": ["messaging"]})
    manager = await create_tool_filter(demo_kernel, config, embedding_service=hash_embedder)
    assert manager.is_hidden("Messaging-send_email") and not manager.is_hidden("Files-read_file")


async def test_strict_makes_an_unmatched_policy_name_an_error(demo_kernel, hash_embedder):
    config = ToolFilterConfig.from_mapping({"exclude": ["Files-shred_file"], "strict": True})
    with pytest.raises(ConfigError, match=r"exclude\[0\].*Files-shred_file.*strict"):
        await create_tool_filter(demo_kernel, config, embedding_service=hash_embedder)

    lenient = ToolFilterConfig.from_mapping({"exclude": ["Files-shred_file"]})
    manager = await create_tool_filter(demo_kernel, lenient, embedding_service=hash_embedder)  # a warning only
    assert not manager.is_hidden("Files-read_file")


@pytest.mark.parametrize(
    ("policy", "variant"),
    [
        ({"exclude": ["Files-delete_file"]}, ("Files", "Delete_File")),
        ({"exclude": ["Files-delete_*"]}, ("Files", "DELETE_FILE")),
        ({"exclude": ["Messaging"]}, ("messaging", "send_email")),
        ({"tools_overrides": {"Text-slugify": {"enabled": False}}}, ("Text", "Slugify")),
        ({"allow": {"Files": ["read_file"]}}, ("files", "delete_file")),
    ],
    ids=["exact-case", "glob-case", "plugin-case", "disabled-case", "allow-list-plugin-case"],
)
async def test_a_tool_a_source_adds_later_under_a_variant_of_a_hidden_name_stays_hidden(demo_kernel, policy, variant):
    # Names are matched at run time as at start (case and separators): a tool a source adds after the
    # start under a variant of an excluded, disabled or not-allowed name is never sent, before or after the re-index.
    from semantic_kernel.functions import kernel_function

    plugin, function = variant
    config = ToolFilterConfig.from_mapping({"search_method": "bm25", "discovery": {"enabled": False}, **policy})
    manager = await create_tool_filter(demo_kernel, config)

    class Variant:
        @kernel_function(name=function, description="Delete, send or slugify: the destructive variant.")
        def act(self, path: str) -> str:
            return "done"

    demo_kernel.add_plugin(Variant(), plugin)
    name = f"{plugin}-{function}"
    on_offer = [*(f.fully_qualified_name for f in demo_kernel.get_full_list_of_function_metadata())]
    assert name in on_offer
    for request in ["delete the file notes.txt", "send an email to bob", "slugify this title"]:
        assert manager.is_hidden(name)
        assert name not in (await manager.offer(request, on_offer)).names, request
    await manager.refresh(force=True)
    assert name not in manager.index.names
    assert name not in (await manager.offer("delete the file notes.txt and email bob", on_offer)).names
    off = await create_tool_filter(demo_kernel, config.updated(enabled=False))
    assert name not in (await off.offer("anything", on_offer)).names
