"""A calls file: past requests and the tools they called, learned before serving (``sk-toolfilter learn``,
``eval --learn``).

JSON lines, one request per line: ``{"query": "...", "tools": ["Plugin-function", ...]}``
(``gold`` or ``calls`` are read for ``tools``, ``request`` for ``query``: a queries file is a calls
file). Tool names are resolved as everywhere else (bare, near and long spellings). A tool that is
not in the catalog, or not visible and allowed, is never learned: it is counted and named in the
summary. The file is read line by line in batches (one embedding call per batch), so a file of any
length needs the memory of one batch and of the bounded memory it fills.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sk_toolfilter.basics.errors import ConfigError, closest_names
from sk_toolfilter.basics.input_files import json_lines, json_object
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.memory import LearningMemory
from sk_toolfilter.selection.learning import request_key
from sk_toolfilter.selection.visibility import NameResolver

BATCH = 256
MAX_LINE_CHARS = 100_000  # a longer line is not a request and its tools


@dataclass
class LearnedCalls:
    """What a calls file taught: rows learned, lines read, tool names refused (and why)."""

    lines: int = 0
    learned: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    """Tool names not learned: not in the catalog, or not visible and allowed to this agent."""
    without_tools: int = 0
    closest: dict[str, str] = field(default_factory=dict)
    """Refused names that name no tool of the catalog, with the closest name that does (a misspelling)."""

    def summary(self, path: str | Path) -> str:
        text = f"learned {self.learned} requests from {self.lines} lines of {path}"
        if self.without_tools:
            text += f"; {self.without_tools} lines had no tool this agent may use"
        if self.refused:
            names = ", ".join(self._refusal(n, c) for n, c in self.refused.most_common(5))
            more = len(self.refused) - 5
            text += f"; never learned (not in the catalog, or hidden or not allowed): {names}"
            text += f" and {more} more" if more > 0 else ""
        return text

    def _refusal(self, name: str, count: int) -> str:
        near = self.closest.get(name)
        return f"{name} ({count}) - not in the catalog, did you mean {near}?" if near else f"{name} ({count})"


def _lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(``file:line``, object) of each non-blank line, read one at a time."""
    for where, value in json_lines(path, "calls file", max_line_chars=MAX_LINE_CHARS):
        yield where, json_object(value, where)


def _parse(where: str, row: dict[str, Any]) -> tuple[str, list[str]]:
    query = row.get("query", row.get("request"))
    tools = row.get("tools", row.get("gold", row.get("calls")))
    if not isinstance(query, str) or not query.strip():
        raise ConfigError(f"{where}: expected 'query' (the request's text)")
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise ConfigError(f"{where}: expected 'tools' (a list of tool names)")
    return query, tools


async def learn_calls_file(
    path: str | Path,
    index: ToolIndex,
    memory: LearningMemory,
    catalog: str,
    permitted: Callable[[str], bool],
    progress: Callable[[int, int], None] | None = None,
) -> LearnedCalls:
    """Learn every line of the calls file at `path` into `memory` (see the module docstring)."""
    path = Path(path)
    resolver = NameResolver(index.names)
    result = LearnedCalls()
    batch: list[tuple[str, list[str]]] = []
    total = _count_lines(path)
    for where, row in _lines(path):
        query, tools = _parse(where, row)
        result.lines += 1
        kept = []
        for name in tools:
            full = resolver.resolve(name, f"{where} tools")
            if full in index and permitted(full):
                kept.append(full)
            else:
                result.refused[name[:80]] += 1
                if full not in index and name[:80] not in result.closest:
                    result.closest.update({name[:80]: near for near in closest_names(name, index.names)[:1]})
        if kept:
            batch.append((query, kept))
        else:
            result.without_tools += 1
        if len(batch) >= BATCH:
            result.learned += await _learn_batch(batch, index, memory, catalog)
            batch.clear()
            if progress is not None:
                progress(result.lines, total)
    if batch:
        result.learned += await _learn_batch(batch, index, memory, catalog)
    if progress is not None:
        progress(result.lines, total)
    return result


async def _learn_batch(
    batch: list[tuple[str, list[str]]], index: ToolIndex, memory: LearningMemory, catalog: str
) -> int:
    vectors = await index.embed_queries([query for query, _ in batch])
    rows = zip(batch, vectors, strict=True)
    return sum(memory.learn(vector, tools, request_key(catalog, query)) for (query, tools), vector in rows)


def _count_lines(path: Path) -> int:
    try:
        with path.open("rb") as handle:
            return sum(1 for line in handle if line.strip())
    except OSError as exc:
        raise ConfigError(f"calls file {path}: {exc.strerror or exc}") from None
