"""Public tool catalogs outside the benchmarks, converted to the dev halves' ``tools.jsonl`` format.

They add tool texts (and so pseudo-queries, ``training.build_pairs``) from domains the benchmarks do
not cover; they hold no requests. Each is read from a local git clone at a pinned commit
(:data:`training.sources.EXTERNAL_CATALOGS` gives repository, commit and licence), so a rebuild
reads exactly the same texts. Tools that could tell the model about a benchmark's catalog are
dropped: a description equal to any dev-set tool's, and every tool of a server whose name is a
livemcpbench server's (the MCP benchmark). Writes ``<out>/<name>/tools.jsonl`` (and an empty
``dev.jsonl``) and links the dev halves beside them, so ``<out>`` serves as ``--root``:

    python -m training.experiments.external_catalogs --clone docker/mcp-registry=PATH \\
        --clone github/github-mcp-server=PATH --out training/out/catalogs
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from training.sources import BENCHMARKS, EXTERNAL_CATALOGS, SOURCES, ExternalCatalog


def _git(clone: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(clone), *args], capture_output=True, text=True, check=True).stdout


def _server_key(name: str) -> str:
    key = re.sub(r"[^a-z0-9]", "", name.lower())
    return re.sub(r"(mcp|server)", "", key) or key


def _schema(tool: dict) -> dict:
    """JSON schema of a tool: MCP's ``inputSchema``, or the registry's ``arguments`` list."""
    if isinstance(tool.get("inputSchema"), dict):
        return tool["inputSchema"]
    properties, required = {}, []
    for argument in tool.get("arguments") or []:
        if isinstance(argument, dict) and argument.get("name"):
            properties[argument["name"]] = {
                "type": argument.get("type", "string"),
                "description": argument.get("desc", ""),
            }
            if not argument.get("optional"):
                required.append(argument["name"])
    return {"type": "object", "properties": properties, "required": required}


def _docker_registry(clone: Path, commit: str) -> Iterator[tuple[str, dict]]:
    """Every ``servers/<server>/tools.json`` in the history of ``commit`` (its last version there)."""
    log = _git(clone, "log", commit, "--format=C %H", "--name-only", "--diff-filter=AM", "--", "servers/*/tools.json")
    latest: dict[str, str] = {}
    current = ""
    for line in log.splitlines():
        if line.startswith("C "):
            current = line[2:]
        elif line.endswith("tools.json"):
            latest.setdefault(line, current)
    for path, version in sorted(latest.items()):
        try:
            tools = json.loads(_git(clone, "show", f"{version}:{path}") or "[]")
        except json.JSONDecodeError:
            continue
        if isinstance(tools, dict):
            tools = tools.get("tools", [])
        for tool in tools if isinstance(tools, list) else []:
            if isinstance(tool, dict):
                yield path.split("/")[1], tool


def _github_toolsnaps(clone: Path, commit: str) -> Iterator[tuple[str, dict]]:
    """The GitHub MCP server's tool snapshots (one JSON file per tool; typed and feature-flag variants skipped)."""
    folder = "pkg/github/__toolsnaps__/"
    for path in sorted(_git(clone, "ls-tree", "--name-only", commit, folder).split()):
        if path.endswith(".snap") and not path.endswith("_typed.snap") and "_ff_" not in path:
            yield "github", json.loads(_git(clone, "show", f"{commit}:{path}"))


READERS = {"mcp_registry": _docker_registry, "github_mcp": _github_toolsnaps}


def convert(catalog: ExternalCatalog, clone: Path, out: Path, root: Path = BENCHMARKS) -> dict[str, int]:
    """Write ``<out>/<catalog.name>/tools.jsonl``; returns counts of what was kept and dropped."""
    dev_descriptions = set()
    for source in SOURCES:
        for line in (root / source.name / "tools.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                dev_descriptions.add(" ".join(str(json.loads(line).get("description", "")).lower().split()))
    livemcp_servers = {
        _server_key(json.loads(line)["plugin"])
        for line in (root / "livemcpbench" / "tools.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    }
    counts = {"kept": 0, "same description as a dev tool": 0, "livemcpbench server": 0, "duplicate": 0, "empty": 0}
    seen: set[tuple[str, str]] = set()
    rows = []
    for server, tool in READERS[catalog.name](clone, catalog.commit):
        name, description = str(tool.get("name", "")).strip(), " ".join(str(tool.get("description", "")).split())
        if not name or not description:
            counts["empty"] += 1
        elif _server_key(server) in livemcp_servers:
            counts["livemcpbench server"] += 1
        elif description.lower() in dev_descriptions:
            counts["same description as a dev tool"] += 1
        elif (server, name) in seen:
            counts["duplicate"] += 1
        else:
            seen.add((server, name))
            rows.append({"plugin": server, "name": name, "description": description, "parameters": _schema(tool)})
            counts["kept"] += 1
    folder = out / catalog.name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tools.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )
    (folder / "dev.jsonl").write_text("", encoding="utf-8")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clone", action="append", default=[], help="REPOSITORY=PATH of a local git clone")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--root", type=Path, default=BENCHMARKS, help="folder of the dev halves")
    args = parser.parse_args(argv)
    clones = dict(item.split("=", 1) for item in args.clone)
    args.out.mkdir(parents=True, exist_ok=True)
    for source in SOURCES:
        link = args.out / source.name
        if not link.exists():
            link.symlink_to((args.root / source.name).resolve(), target_is_directory=True)
    for catalog in EXTERNAL_CATALOGS:
        if catalog.repository not in clones:
            print(f"{catalog.name}: skipped (no --clone {catalog.repository}=PATH)", file=sys.stderr)
            continue
        counts = convert(catalog, Path(clones[catalog.repository]), args.out, args.root)
        print(f"{catalog.name} ({catalog.repository} @ {catalog.commit[:12]}): {counts}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
