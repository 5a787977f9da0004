"""Real MCP servers from the registries: start-up, tools, and one tool result on the wire, against SK's plugin.

    .ci/install-mcp-servers ~/.cache/sk-toolfilter-ci/mcp-servers
    SK_TOOLFILTER_MCP_SERVERS=~/.cache/sk-toolfilter-ci/mcp-servers python benchmarks/mcp_servers_benchmark.py

For each server: the start-up time of sk-toolfilter's MCP source (process start to tools listed,
median of 3), the number of tools, and the tool message the model receives for one call, in o200k
tokens, through the real SK agent loop on the recording transport — once with this library's MCP
source and once with Semantic Kernel's own ``MCPStdioPlugin`` (bounded by a timeout: it hangs on
some servers). Prints a Markdown table; nothing here is a pass/fail test.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from semantic_kernel import Kernel
from semantic_kernel.agents import ChatCompletionAgent
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import OpenAIChatPromptExecutionSettings
from semantic_kernel.connectors.mcp import MCPStdioPlugin
from semantic_kernel.functions import KernelArguments

from sk_toolfilter.agents.agent_file import MCPSource
from sk_toolfilter.agents.mcp import MCPConnection, build_plugin
from sk_toolfilter.basics.tokenizer import count_tokens
from sk_toolfilter.measure.wire import RecordingTransport, offline_chat_service, text_reply, tool_call_reply

SK_TIMEOUT = 15.0


def servers(root: Path, tmp: Path) -> list[tuple[str, list[str], dict[str, str], str, dict[str, Any]]]:
    npm = root / "npm/node_modules/.bin"
    (tmp / "files").mkdir(exist_ok=True)
    (tmp / "files" / "hello.txt").write_text("hello from the filesystem server\n")
    repo = tmp / "repo"
    if not repo.exists():
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        (repo / "README.md").write_text("hello\n")
        git = ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@example.com"]
        subprocess.run([*git, "add", "README.md"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "Add the README"], check=True)
    return [
        (
            "everything",
            [str(npm / "mcp-server-everything"), "stdio"],
            {},
            "get-structured-content",
            {"location": "Chicago"},
        ),
        (
            "sequential-thinking",
            [str(npm / "mcp-server-sequential-thinking")],
            {},
            "sequentialthinking",
            {"thought": "List the facts.", "nextThoughtNeeded": True, "thoughtNumber": 1, "totalThoughts": 2},
        ),
        (
            "memory",
            [str(npm / "mcp-server-memory")],
            {"MEMORY_FILE_PATH": str(tmp / "memory.jsonl")},
            "create_entities",
            {"entities": [{"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}]},
        ),
        (
            "filesystem",
            [str(npm / "mcp-server-filesystem"), str(tmp / "files")],
            {},
            "list_directory",
            {"path": str(tmp / "files")},
        ),
        ("time", [str(root / "py/bin/mcp-server-time")], {}, "get_current_time", {"timezone": "Europe/Paris"}),
        (
            "git",
            [str(root / "py/bin/mcp-server-git"), "--repository", str(repo)],
            {},
            "git_log",
            {"repo_path": str(repo), "max_count": 1},
        ),
    ]


async def tool_message(kernel: Kernel, function: str, arguments: dict[str, Any]) -> str:
    """The tool message SK's agent loop puts on the wire after the model calls `function`."""
    transport = RecordingTransport([tool_call_reply((function, arguments)), text_reply("done")])
    settings = OpenAIChatPromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
    agent = ChatCompletionAgent(
        kernel=kernel, service=offline_chat_service(transport), arguments=KernelArguments(settings=settings)
    )
    await agent.get_response(messages="go")
    return str(transport.requests[1]["messages"][-1]["content"])


async def ours(command: list[str], env: dict[str, str], tool: str, args: dict[str, Any]) -> tuple[float, int, str]:
    source = MCPSource(type="mcp", name="S", command=command[0], args=command[1:], env=env or None)
    times = []
    for _ in range(3):
        connection = MCPConnection(source, cwd=Path.cwd(), where="bench")
        started = time.perf_counter()
        await connection.start()
        times.append(time.perf_counter() - started)
        await connection.aclose()
    connection = MCPConnection(source, cwd=Path.cwd(), where="bench")
    await connection.start()
    try:
        kernel = Kernel()
        plugin = build_plugin(connection)
        kernel.add_plugin(plugin)
        name = next(n for n in plugin.functions if n == tool.replace(".", "_"))
        message = await tool_message(kernel, f"S-{name}", args)
    finally:
        await connection.aclose()
    return statistics.median(times), len(plugin.functions), message


async def semantic_kernels(command: list[str], env: dict[str, str], tool: str, args: dict[str, Any]) -> str:
    plugin = MCPStdioPlugin(name="S", command=command[0], args=command[1:], env=env or None)
    try:
        await asyncio.wait_for(plugin.connect(), SK_TIMEOUT)
    except asyncio.TimeoutError:
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(plugin.close(), 5)
        return f"hangs (>{SK_TIMEOUT:g}s)"
    except Exception as exc:
        return f"fails: {type(exc).__name__}"
    try:
        kernel = Kernel()
        kernel.add_plugin(plugin)
        return await tool_message(kernel, f"S-{tool}", args)
    except Exception as exc:
        return f"fails: {type(exc).__name__}"
    finally:
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(plugin.close(), 5)


async def main() -> None:
    root = os.environ.get("SK_TOOLFILTER_MCP_SERVERS")
    if not root:
        sys.exit("set SK_TOOLFILTER_MCP_SERVERS to the folder .ci/install-mcp-servers filled")
    print("| server | start-up (s) | tools | tool called | result tokens, SK plugin | result tokens, sk-toolfilter |")
    print("|---|---:|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, command, env, tool, args in servers(Path(root), Path(tmp)):
            startup, n_tools, mine = await ours(command, env, tool, args)
            theirs = await semantic_kernels(command, env, tool, args)
            sk_tokens = theirs if theirs.startswith(("hangs", "fails")) else str(count_tokens(theirs))
            print(f"| {name} | {startup:.2f} | {n_tools} | {tool} | {sk_tokens} | {count_tokens(mine)} |", flush=True)
            if os.environ.get("SHOW_RESULTS"):
                print(f"\n    SK: {theirs[:400]!r}\n    ours: {mine[:400]!r}\n")


if __name__ == "__main__":
    asyncio.run(main())
