"""One name per tool across frameworks: the same functions as Agent Framework tools (grouped with
``plugin_tools``) and as an agent file's plugins are one catalog — the same tool names, the same
selection for the same requests and configuration, and one learning file read by both."""

from __future__ import annotations

import inspect
from pathlib import Path

import yaml
from agent_framework import tool
from semantic_kernel.contents import ChatHistory

from sk_toolfilter import ToolFilterConfig
from sk_toolfilter.agent_framework import create_agent_framework_filter, plugin_tools
from sk_toolfilter.agents.agent import open_toolset
from sk_toolfilter.agents.agent_file import load_agent_file
from sk_toolfilter.demo import ALL_PLUGINS
from sk_toolfilter.selection.learning import learning_context

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = yaml.safe_load((ROOT / "agent.yaml").read_text())["sample_queries"]
REQUESTS = [q["query"] if isinstance(q, dict) else str(q) for q in SAMPLES] + [
    "add 17 and 25",
    "what is 2 to the power of 10",
    "convert 30 celsius to fahrenheit",
    "how many kilometers is 26 miles",
    "what day of the week is 2026-12-25",
    "what time is it in Tokyo",
    "add 10 days to 2026-01-31",
    "count the words in this sentence please",
    "make this text upper case: hello",
    "find the email addresses in: mail bob@example.com or ann@example.org",
    "summarize the file report.txt",
    "list the files in the workspace",
    "write 'hello' to notes.txt",
    "append a line to log.txt",
    "search the files for the word invoice",
    "save a note called groceries: milk, eggs",
    "show me my notes",
    "delete the note called groceries",
    "remember that my locker code is 1234",
    "what is my locker code",
    "send an email to ann@example.org about lunch",
    "post 'deploy done' to #ops",
    "send a direct message to bob: call me",
    "what is in my outbox",
    "what is the square root of 144",
    "average of 3, 5 and 10",
    "what percentage is 15 of 80",
    "divide 100 by 7",
    "how many days between 2026-01-01 and 2026-03-01",
    "reverse the string 'stressed'",
]


def agent_framework_tools(root: str) -> list:
    """The demo plugins' functions as Agent Framework tools, each plugin's grouped with plugin_tools."""
    grouped = []
    for plugin, cls in ALL_PLUGINS.items():
        instance = cls(root) if "root" in inspect.signature(cls).parameters else cls()
        functions = [
            tool(name=method.__kernel_function_name__, description=method.__kernel_function_description__)(method)
            for _, method in inspect.getmembers(instance, inspect.ismethod)
            if getattr(method, "__kernel_function__", False)
        ]
        grouped += plugin_tools(plugin, functions)
    return grouped


def agent_file(tmp_path: Path, learned: Path) -> Path:
    spec = yaml.safe_load((ROOT / "agent.yaml").read_text().replace("root: sandbox", f"root: {tmp_path / 'sandbox'}"))
    spec["name"] = "deskbot"
    spec["tool_filtering"] = {"learning": {"file": str(learned)}}
    (tmp_path / "instructions").mkdir(exist_ok=True)
    (tmp_path / "instructions" / "assistant.md").write_text("Be helpful.")
    path = tmp_path / "deskbot.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


async def test_the_same_functions_as_agent_framework_tools_and_an_agent_files_plugins_are_one_catalog(tmp_path):
    assert len(REQUESTS) >= 50
    learned = tmp_path / "learned.npz"
    config = ToolFilterConfig(learning={"file": str(learned)})
    app = await create_agent_framework_filter(agent_framework_tools(str(tmp_path / "sandbox")), config)
    async with await open_toolset(load_agent_file(agent_file(tmp_path, learned))) as toolset:
        assert set(app.manager.index.names) == set(toolset.manager.index.names)  # Plugin-function, both
        differing = []
        for request in REQUESTS:
            sent = []
            for manager in (app.manager, toolset.manager):
                history = ChatHistory()
                history.add_user_message(request)
                sent.append((await manager.select_for_history(history)).names)
            if sent[0] != sent[1]:
                differing.append((request, *sent))
        assert differing == []
    # What the app learned, the agent file reads and applies: the same names.
    for number in range(3):
        with learning_context(conversation=f"c{number}"):
            await app.manager.record(
                f"let the ops crew know the backup finished, run {number}", ["Messaging-post_to_channel"]
            )
    await app.manager.aclose()
    async with await open_toolset(load_agent_file(agent_file(tmp_path, learned))) as toolset:
        rows = toolset.manager.learning.memory.rows()
        assert [row.tools for row in rows] == [("Messaging-post_to_channel",)] * 3
