import contextlib
import sys
from pathlib import Path

import pytest
from semantic_kernel import Kernel

from sk_toolfilter import ConfigError, ToolSourceError
from sk_toolfilter.agents.agent_file import parse_agent
from sk_toolfilter.agents.sources import add_sources

FIXTURES = Path(__file__).parent / "fixtures"
MCP_SERVER = str(FIXTURES / "mcp_weather_server.py")


async def load(tools, base_dir=FIXTURES):
    spec = parse_agent({"name": "t", "tools": tools}, base_dir=base_dir)
    stack = contextlib.AsyncExitStack()
    kernel = Kernel()
    counts = await add_sources(kernel, spec, stack)
    return kernel, counts, stack


async def test_native_plugin_from_an_import_path(tmp_path):
    kernel, counts, _ = await load(
        [
            {
                "type": "plugin",
                "name": "Files",
                "import": "sk_toolfilter.demo:FilesPlugin",
                "init": {"root": str(tmp_path)},
            }
        ]
    )
    assert counts == {"Files": 8}
    result = await kernel.invoke(plugin_name="Files", function_name="write_file", path="a.txt", content="hi")
    assert "wrote 2 characters" in str(result)
    assert (tmp_path / "a.txt").read_text() == "hi"


@pytest.mark.parametrize(
    ("import_path", "message"),
    [
        ("no_such_module_xyz:Thing", "cannot import module 'no_such_module_xyz'"),
        ("sk_toolfilter.demo:NoSuchPlugin", "has no attribute 'NoSuchPlugin'"),
        ("sk_toolfilter.basics.errors", "has no @kernel_function methods"),
    ],
)
async def test_bad_plugin_sources_are_errors_naming_the_source(import_path, message):
    with pytest.raises(ConfigError) as info:
        await load([{"type": "plugin", "name": "P", "import": import_path}])
    assert "tools[0] (P)" in str(info.value) and message in str(info.value)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        ("import no_such_dependency_xyz\n", "was found, but importing it failed: it imports 'no_such_dependency_xyz'"),
        ("raise RuntimeError('no config file')\n", "was found, but importing it failed (RuntimeError: no config file)"),
        ("def broken(:\n", "has a syntax error"),
    ],
    ids=["missing-dependency", "raises", "syntax-error"],
)
async def test_a_plugin_module_whose_own_import_fails_is_not_reported_as_missing(tmp_path, code, message):
    module = f"user_plugin_{abs(hash(code)) % 10_000}"
    (tmp_path / f"{module}.py").write_text(code)
    with pytest.raises(ConfigError) as info:
        await load([{"type": "plugin", "name": "P", "import": f"{module}:Plugin"}], base_dir=tmp_path)
    text = str(info.value)
    assert text.startswith("tools[0] (P).import: ") and message in text and "no module of that name" not in text


async def test_a_catalog_that_cannot_be_read_names_its_key(tmp_path):
    with pytest.raises(ConfigError) as info:
        await load([{"type": "catalog", "name": "bfcl", "path": "nothere/tools.jsonl"}], base_dir=tmp_path)
    assert str(info.value).startswith("tools[0] (bfcl).path: ") and "nothere/tools.jsonl" in str(info.value)


async def test_optional_sources_that_fail_are_skipped(caplog):
    _, counts, _ = await load(
        [
            {"type": "plugin", "name": "Gone", "import": "no_such_module_xyz:X", "optional": True},
            {"type": "plugin", "name": "Math", "import": "sk_toolfilter.demo:MathPlugin"},
        ]
    )
    assert counts == {"Math": 11}
    assert "skipping optional tool source" in caplog.text


async def test_catalog_tools_are_registered_with_their_schemas_and_refuse_to_run():
    kernel, counts, _ = await load([{"type": "catalog", "name": "cat", "path": "tools.jsonl"}])
    assert counts == {"cat": 3}
    function = kernel.get_function("shop", "find_product")
    params = {p.name: p for p in function.metadata.parameters}
    assert params["keyword"].is_required and not params["max_results"].is_required
    assert params["max_results"].schema_data == {"type": "integer", "description": "How many results"}
    result = await kernel.invoke(function, keyword="lamp")
    assert "definition-only tool" in str(result)


async def test_catalog_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"name": "ok"}\nnot json\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl: invalid JSON at line"):
        await load([{"type": "catalog", "name": "c", "path": str(bad)}])


async def test_mcp_server_tools_are_indexed_including_dotted_names():
    kernel, counts, stack = await load(
        [{"type": "mcp", "name": "Weather", "command": sys.executable, "args": [MCP_SERVER]}]
    )
    async with stack:
        assert counts == {"Weather": 2}
        names = sorted(kernel.plugins["Weather"].functions)
        assert names == ["alerts_list", "get_forecast"]
        params = kernel.get_function("Weather", "get_forecast").metadata.parameters
        assert all("title" not in (p.schema_data or {}) for p in params)
        result = await kernel.invoke(plugin_name="Weather", function_name="alerts_list", region="north")
        assert "no alerts in north" in str(result)


async def test_an_mcp_server_that_fails_to_start_is_a_clear_error():
    with pytest.raises(ToolSourceError) as info:
        await load([{"type": "mcp", "name": "Broken", "command": "/no/such/binary-xyz"}])
    assert "tools[0] (Broken): MCP server command '/no/such/binary-xyz' cannot be run" in str(info.value)


async def test_an_optional_mcp_server_that_fails_is_skipped():
    _, counts, _ = await load([{"type": "mcp", "name": "Broken", "command": "/no/such/binary-xyz", "optional": True}])
    assert counts == {}


async def test_an_mcp_server_that_never_answers_times_out_with_a_clear_error():
    source = {
        "type": "mcp",
        "name": "Silent",
        "command": "python",
        "args": ["-c", "import time; time.sleep(30)"],
        "startup_timeout_seconds": 1,
    }
    with pytest.raises(ToolSourceError, match=r"tools\[0\] \(Silent\): MCP server 'python -c .*' did not answer"):
        await load([source])


async def test_a_plugin_module_next_to_the_agent_file_imports_without_pythonpath(tmp_path):
    folder = tmp_path / "desk"
    folder.mkdir()
    (folder / "tickets_plugin_xyz.py").write_text(
        "from semantic_kernel.functions import kernel_function\n\n"
        "class TicketsPlugin:\n"
        "    @kernel_function(description='Open a support ticket.')\n"
        "    def open_ticket(self, title: str) -> str:\n"
        "        return f'opened: {title}'\n"
    )
    kernel, counts, _ = await load(
        [{"type": "plugin", "name": "Tickets", "import": "tickets_plugin_xyz:TicketsPlugin"}], base_dir=folder
    )
    assert counts == {"Tickets": 1}
    assert str(await kernel.invoke(plugin_name="Tickets", function_name="open_ticket", title="VPN")) == "opened: VPN"
