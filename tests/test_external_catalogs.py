"""Public tool catalogs become training catalogs: read at a pinned commit, with anything that could
tell the model about a benchmark's catalog dropped."""

import json
import subprocess
from pathlib import Path

import pytest

from training.experiments.external_catalogs import convert
from training.sources import SOURCES, ExternalCatalog


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout.strip()


def _commit(repo: Path, files: dict[str, object], message: str) -> str:
    for path, content in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(json.dumps(content))
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def dev_root(tmp_path: Path) -> Path:
    root = tmp_path / "benchmarks"
    for source in SOURCES:
        (root / source.name).mkdir(parents=True)
        tools = [{"plugin": "p", "name": "t", "description": f"A tool of {source.name}."}]
        if source.name == "livemcpbench":
            tools.append({"plugin": "fetch_mcp", "name": "fetch", "description": "Fetch a URL."})
        (root / source.name / "tools.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tools))
    return root


def test_the_registry_is_read_at_the_pinned_commit_without_benchmark_tools(tmp_path, dev_root):
    repo = tmp_path / "registry"
    repo.mkdir()
    _git(repo, "init", "-q")
    weather = {"name": "forecast", "description": "Old text.", "arguments": []}
    _commit(repo, {"servers/weather/tools.json": [weather]}, "first")
    pinned = _commit(
        repo,
        {
            "servers/weather/tools.json": [
                {
                    **weather,
                    "description": "Weather forecast for a city.",
                    "arguments": [{"name": "city", "type": "string", "desc": "City"}],
                },
                {"name": "copy", "description": "A tool of metatool."},  # a dev tool's text
                {"name": "blank", "description": ""},
            ],
            "servers/fetch/tools.json": [{"name": "get", "description": "Download a page."}],  # a livemcpbench server
            "servers/empty/tools.json": [],
        },
        "second",
    )
    _commit(repo, {"servers/later/tools.json": [{"name": "x", "description": "Added after the pin."}]}, "third")

    catalog = ExternalCatalog("mcp_registry", "docker/mcp-registry", pinned, "MIT", "test")
    counts = convert(catalog, repo, tmp_path / "out", dev_root)

    rows = [json.loads(line) for line in (tmp_path / "out" / "mcp_registry" / "tools.jsonl").read_text().splitlines()]
    assert rows == [
        {
            "plugin": "weather",
            "name": "forecast",
            "description": "Weather forecast for a city.",  # the file's version at the pin, not the first
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City"}},
                "required": ["city"],
            },
        }
    ]
    assert counts == {
        "kept": 1,
        "same description as a dev tool": 1,
        "livemcpbench server": 1,
        "duplicate": 0,
        "empty": 1,
    }
    assert (tmp_path / "out" / "mcp_registry" / "dev.jsonl").read_text() == ""  # tool texts only, no requests


def test_small_talk_exemplars_come_from_clincs_train_split_at_the_pinned_commit(tmp_path):
    from training import small_talk_exemplars as builder

    repo = tmp_path / "clinc"
    repo.mkdir()
    _git(repo, "init", "-q")

    def split(prefix: str) -> list[list[str]]:
        rows = [[f"{prefix} {intent} {i}", intent] for intent in builder.NO_TOOL_INTENTS for i in range(40)]
        rows += [[f"{prefix} book a table {i}", "restaurant_reservation"] for i in range(30)]
        rows += [[f"{prefix} cancel that {i}", "cancel"] for i in range(5)]
        return rows

    data = {"train": split("train"), "val": split("val"), "test": split("test")}
    data["train"].append(["thanks!", "thank_you"])  # a measured small-talk request: never an exemplar
    pinned = _commit(repo, {"data/data_full.json": data}, "pinned")
    _commit(repo, {"data/data_full.json": {"train": [["later", "greeting"]], "val": [], "test": []}}, "later")
    content = builder.exemplars(builder.read_clinc(repo, pinned))
    texts = content["no_tool"] + content["tool_request"]
    written_here = {t for acts in builder.DIALOGUE_ACTS.values() for t in acts}
    assert all(t.startswith("train ") or t in written_here for t in texts)  # never val, test or a later commit
    assert sum(t.startswith("train ") for t in content["no_tool"]) == 30 * len(builder.NO_TOOL_INTENTS)
    assert len(content["tool_request"]) == 20 and not any("cancel" in t for t in texts)  # 'cancel' is either
    assert "thanks!" not in texts and "later" not in texts
    assert content["source"]["commit"] == builder.SMALL_TALK_SOURCE.commit
