"""MCP servers that misbehave: each ends within its bound, with a message that says what happened.

The server is ``tests/fixtures/mcp_fault_server.py`` (a real process speaking real MCP over stdio).
"""

import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path

import pytest
from semantic_kernel import Kernel

from sk_toolfilter import ToolFilterConfig, ToolSourceError
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.agents.sources import add_sources
from sk_toolfilter.integration.setup import create_tool_filter

FIXTURES = Path(__file__).parent / "fixtures"
FAULT_SERVER = str(FIXTURES / "mcp_fault_server.py")


def source(mode: str, **extra):
    return {"type": "mcp", "name": "Faulty", "command": sys.executable, "args": [FAULT_SERVER, mode], **extra}


async def load(*sources, skipped=None):
    spec = parse_agent({"name": "t", "tools": list(sources)}, base_dir=FIXTURES)
    stack = contextlib.AsyncExitStack()
    kernel = Kernel()
    counts = await add_sources(kernel, spec, stack, skipped)
    return kernel, counts, stack


@pytest.fixture
async def serving():
    kernel, _, stack = await load(source("serve", request_timeout_seconds=1.5))
    async with stack:
        yield kernel


async def timed_error(*sources) -> tuple[str, float]:
    started = time.perf_counter()
    with pytest.raises(ToolSourceError) as info:
        await load(*sources)
    return str(info.value), time.perf_counter() - started


async def test_a_server_that_exits_at_start_is_reported_at_once_with_its_stderr():
    message, seconds = await timed_error(source("exit", startup_timeout_seconds=120))
    assert seconds < 60  # reported when the process exits, not at the start-up timeout
    assert message.startswith("tools[0] (Faulty): MCP server '")
    assert "mcp_fault_server.py exit' exited during start-up" in message
    assert "Cannot find module '/srv/missing/index.js'" in message  # the last line of its stderr


async def test_a_command_that_does_not_exist_is_reported_at_once():
    gone = {"type": "mcp", "name": "Gone", "command": "/no/such/server-xyz", "startup_timeout_seconds": 120}
    message, seconds = await timed_error(gone)
    assert seconds < 60  # reported at once, not at the start-up timeout
    assert "tools[0] (Gone): MCP server command '/no/such/server-xyz' cannot be run" in message


async def test_a_server_that_never_answers_times_out_saying_what_was_seen():
    # The timeout is long enough for a loaded machine to start Python and print its line.
    message, seconds = await timed_error(source("silent", startup_timeout_seconds=8))
    assert seconds >= 8
    assert "did not answer 'initialize' within 8s (startup_timeout_seconds)" in message
    assert "no output on stdout" in message and "listening... (but never answering)" in message


async def test_a_server_that_writes_only_garbage_times_out_naming_the_garbage():
    message, _ = await timed_error(source("garbage", startup_timeout_seconds=8))
    assert "line(s) on stdout that are not JSON-RPC, first: 'this is not json-rpc'" in message


async def test_a_banner_line_on_stdout_is_ignored_with_one_warning(caplog):
    kernel, counts, stack = await load(source("banner"))
    async with stack:
        assert counts == {"Faulty": 6}
        assert str(await kernel.invoke(plugin_name="Faulty", function_name="echo", message="hi")) == "echo: hi"
    warnings = [r for r in caplog.records if "not JSON-RPC" in r.getMessage()]
    assert len(warnings) == 1 and "Server v1.0 starting" in warnings[0].getMessage()


async def test_list_changed_during_start_up_does_not_deadlock():
    # A deadlock would end in the start-up timeout's error instead of a loaded source.
    kernel, counts, stack = await load(source("list_changed", startup_timeout_seconds=120))
    async with stack:
        assert counts == {"Faulty": 6}
        assert str(await kernel.invoke(plugin_name="Faulty", function_name="echo", message="x")) == "echo: x"


async def test_an_optional_source_is_skipped_on_any_failure_with_one_warning(caplog):
    skipped: dict[str, str] = {}
    _, counts, stack = await load(
        source("exit", optional=True),
        {"type": "plugin", "name": "Math", "import": "sk_toolfilter.demo:MathPlugin"},
        skipped=skipped,
    )
    async with stack:
        assert counts == {"Math": 11}
    assert list(skipped) == ["Faulty"] and "exited during start-up" in skipped["Faulty"]
    assert len([r for r in caplog.records if "skipping optional tool source" in r.getMessage()]) == 1


async def test_a_call_that_hangs_returns_an_error_to_the_model_and_the_server_goes_on(serving):
    result = str(await serving.invoke(plugin_name="Faulty", function_name="hang"))  # returns: no hang
    assert result == "error: MCP server Faulty did not answer tool 'hang' within 1.5s (request_timeout_seconds)"
    assert str(await serving.invoke(plugin_name="Faulty", function_name="echo", message="still here")) == (
        "echo: still here"
    )


async def test_a_server_that_dies_mid_session_is_restarted_on_the_next_call(serving, caplog):
    died = str(await serving.invoke(plugin_name="Faulty", function_name="die"))
    assert died.startswith("error: MCP server Faulty stopped while running tool 'die'")
    assert "restarts on the next call" in died
    again = str(await serving.invoke(plugin_name="Faulty", function_name="echo", message="back"))
    assert again == "echo: back"
    assert any("restarting MCP server Faulty" in r.getMessage() for r in caplog.records)


async def test_a_server_that_cannot_be_restarted_gives_an_error_not_a_hang(tmp_path):
    script = tmp_path / "once.py"
    # Serves normally the first time; every later start exits at once (its marker file exists).
    script.write_text(
        "import pathlib, runpy, sys\n"
        f"marker = pathlib.Path({str(tmp_path / 'started')!r})\n"
        "if marker.exists():\n    sys.exit('second start refused')\n"
        "marker.write_text('x')\n"
        f"sys.argv = ['server', 'serve']\nrunpy.run_path({FAULT_SERVER!r}, run_name='__main__')\n"
    )
    kernel, _, stack = await load({"type": "mcp", "name": "Once", "command": sys.executable, "args": [str(script)]})
    async with stack:
        await kernel.invoke(plugin_name="Once", function_name="die")
        result = str(await kernel.invoke(plugin_name="Once", function_name="echo", message="x"))  # no hang
    assert result.startswith("error: MCP server Once stopped")
    assert "could not be restarted" in result and "second start refused" in result


async def test_a_tool_list_change_reindexes_the_filter_live(serving):
    manager = await create_tool_filter(serving, ToolFilterConfig(search_method="bm25", discovery={"enabled": False}))
    assert "Faulty-teleport" not in manager.index.names
    assert str(await serving.invoke(plugin_name="Faulty", function_name="grow", name="teleport")) == "grown"
    for _ in range(1200):  # the re-listing runs in its own task, right after the notification (waits until it has)
        if "teleport" in serving.plugins["Faulty"].functions:
            break
        await asyncio.sleep(0.05)
    selection = await manager.select("use the teleport tool")
    assert "Faulty-teleport" in manager.index.names
    assert selection.names[0] == "Faulty-teleport"
    assert str(await serving.invoke(plugin_name="Faulty", function_name="teleport")) == "teleport ran"


async def test_closing_stops_the_server_process_quickly():
    _, _, stack = await load(source("serve"))
    started = time.perf_counter()
    await stack.aclose()
    assert time.perf_counter() - started < 60  # not the SDK's unbounded wait


async def test_ref_and_combinator_schemas_reach_the_wire_resolved_and_describe_tool_reads_them(serving):
    from semantic_kernel.connectors.ai.function_calling_utils import kernel_function_metadata_to_function_call_format

    await create_tool_filter(serving, ToolFilterConfig(search_method="bm25"))  # adds describe_tool
    wire = kernel_function_metadata_to_function_call_format(serving.get_function("Faulty", "schema_zoo").metadata)
    parameters = wire["function"]["parameters"]
    assert "$ref" not in json.dumps(parameters)
    assert parameters["properties"]["address"]["properties"]["city"] == {"type": "string"}
    assert parameters["properties"]["when"]["anyOf"] == [{"type": "string", "format": "date"}, {"type": "null"}]
    assert sorted(parameters["required"]) == ["address", "flag"]
    described = await serving.invoke(plugin_name="ToolSearch", function_name="describe_tool", name="Faulty-schema_zoo")
    assert str(described).splitlines()[0] == (
        "Faulty-schema_zoo(flag: boolean|string, address: object, tree: object?, when: string|null?, "
        "unit: string?, arguments_: string?)"
    )
    echoed = await serving.invoke(
        plugin_name="Faulty", function_name="schema_zoo", flag="yes", address={"city": "Oslo"}, arguments_="kept"
    )
    assert str(echoed) == "[('address', {'city': 'Oslo'}), ('arguments', 'kept'), ('flag', 'yes')]"
