"""Every code block of README.md and the docs site runs (or validates), or says why it cannot.

The rules a page follows (docs/development.md):

- ``python`` blocks run, top-level ``await`` included, against a loopback OpenAI-compatible server
  (``OPENAI_BASE_URL``); a block that needs objects the page introduced earlier names a setup with
  ``<!-- setup: NAME -->`` on the line before it (``SETUPS`` below).
- ``yaml`` blocks validate: a whole agent file (``name:``), a ``tools:`` list, or a
  ``tool_filtering:`` block, through the same validation ``load_agent`` uses.
- ``bash`` blocks are the README's two commands, which ``.ci/run`` runs, or are marked
  ``<!-- fragment: why -->`` (an install line for another machine, a server a user starts).
- ``text`` blocks are output or drawings, never run; a block without a language fails.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GENERATED = {"docs/reference/configuration.md", "docs/reference/cli.md", "docs/changelog.md"}
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```", re.S | re.M)
MARK = re.compile(r"<!--\s*(?P<kind>fragment|setup):\s*(?P<value>.*?)\s*-->\s*$")
README_COMMANDS = ("python3 -m venv .venv && .venv/bin/pip install", "bash .ci/run")

# Objects a page introduced before the block (kept to what a reader of that page already has).
SETUPS = {
    "agent-framework": """
from agent_framework import tool
from sk_toolfilter.measure.wire import RecordingTransport, offline_agent_framework_client, text_reply

@tool
def track_package(tracking_number: str) -> str:
    '''Track a package by its tracking number.'''
    return "in transit"

@tool
def get_weather(city: str) -> str:
    '''Current weather of a city.'''
    return "sunny"

@tool
def convert_currency(amount: float, source: str, target: str) -> str:
    '''Convert an amount of money from one currency to another.'''
    return "1.10"

tools = [track_package, get_weather, convert_currency]
client = offline_agent_framework_client(RecordingTransport([text_reply("It arrives Friday.")]))
""",
    "kernel-and-manager": """
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.open_ai import OpenAIChatCompletion
from sk_toolfilter import ToolFilterConfig, create_tool_filter
from sk_toolfilter.demo import MathPlugin

kernel = Kernel()
kernel.add_plugin(MathPlugin(), "Math")
kernel.add_service(OpenAIChatCompletion(ai_model_id="gpt-4o-mini", api_key="sk-docs"))
manager = await create_tool_filter(kernel, ToolFilterConfig(top_k=5))
""",
    "sk-declarative": """
import os
from tests.test_sk_declarative import BookingPlugin, MenuPlugin
os.chdir(os.path.join(ROOT, "tests", "fixtures", "sk_declarative"))
""",
}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    body: str
    fragment: str | None
    setup: str | None

    def __str__(self) -> str:
        return f"{self.page}:{self.line} ({self.lang or 'no language'})"


def blocks() -> list[Block]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found = []
    for page in pages:
        name = page.relative_to(ROOT).as_posix()
        if name in GENERATED:
            continue
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            mark = MARK.search(before)
            kind, value = (mark["kind"], mark["value"]) if mark else (None, None)
            found.append(
                Block(
                    name,
                    text.count("\n", 0, match.start()) + 1,
                    match["lang"],
                    match["body"],
                    value if kind == "fragment" else None,
                    value if kind == "setup" else None,
                )
            )
    return found


ALL = blocks()


def test_the_pages_have_code_blocks_and_each_has_a_language_and_fragments_say_why():
    assert len(ALL) >= 25 and {b.lang for b in ALL} >= {"python", "yaml", "bash"}
    assert [str(b) for b in ALL if not b.lang] == []
    assert [str(b) for b in ALL if b.fragment is not None and len(b.fragment) < 10] == []
    assert [str(b) for b in ALL if b.setup is not None and b.setup not in SETUPS] == []


@pytest.mark.parametrize("block", [b for b in ALL if b.lang == "bash"], ids=str)
def test_bash_blocks_are_what_ci_runs_or_are_marked(block):
    if block.fragment is not None:
        return
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = block.body.strip()
    assert block.page in {"README.md", "docs/getting-started.md"} and command.startswith(README_COMMANDS), (
        f"{block}: a bash block must be one of the README's two commands or be marked <!-- fragment: why -->"
    )
    if command == "bash .ci/run":
        return
    # The quick start: .ci/run installs the built wheel into a fresh venv and runs the same report.
    report = command.split("&&")[-1].strip().removeprefix(".venv/bin/")
    assert report.startswith("sk-toolfilter report agent.yaml")
    assert [line for line in ci.splitlines() if "sk-toolfilter" in line and " report " in line and "agent.yaml" in line]


@pytest.mark.parametrize("block", [b for b in ALL if b.lang == "yaml" and b.fragment is None], ids=str)
def test_yaml_blocks_validate(block, monkeypatch):
    from sk_toolfilter.agents.agent_file import parse_agent
    from sk_toolfilter.agents.yaml_reader import parse_yaml
    from sk_toolfilter.config import ToolFilterConfig

    monkeypatch.setenv("TOOLS_DB_URL", "postgresql://docs@127.0.0.1:5432/tools")
    monkeypatch.setenv("TICKETS_TOKEN", "docs-token")
    data = parse_yaml(block.body, str(block))
    assert isinstance(data, dict), block
    if "name" in data:
        parse_agent(data, source=str(block), base_dir=ROOT)
    elif "tools" in data:
        parse_agent({"name": "docs", **data}, source=str(block), base_dir=ROOT)
    elif "callers" in data:  # the MCP gateway's callers file
        from sk_toolfilter.gateway.callers import CallersFile

        CallersFile.model_validate(data)
    else:
        assert set(data) == {"tool_filtering"}, f"{block}: an agent file, a tools list or a tool_filtering block"
        ToolFilterConfig.from_mapping(data["tool_filtering"], where=str(block))


@pytest.mark.parametrize("block", [b for b in ALL if b.lang == "python" and b.fragment is None], ids=str)
async def test_python_blocks_run(block, monkeypatch, openai_compatible_server, isolated_embedding_cache):
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-docs")
    monkeypatch.setenv("OPENAI_CHAT_MODEL_ID", "gpt-4o-mini")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{openai_compatible_server.server_port}/v1")
    namespace: dict = {"ROOT": str(ROOT)}
    source = (SETUPS[block.setup] if block.setup else "") + "\n" + block.body
    code = compile(source, str(block), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)  # a coroutine when the block awaits
    if result is not None:
        await result
