"""Who may see and run which tool: exclusions and per-tool overrides, applied before anything else.

An excluded or disabled tool is left out of the index, so no search, discovery or pin can bring it
back, and the execution guard refuses a model's call to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from sk_toolfilter.config import ToolFilterConfig, ToolOverride
from sk_toolfilter.errors import closest_names
from sk_toolfilter.retrieval.metadata import ToolMetadata


class ToolPolicy:
    """Visibility rules of one agent (``exclude`` patterns and ``tools_overrides``)."""

    def __init__(self, config: ToolFilterConfig) -> None:
        self.exclude = list(config.exclude)
        self.overrides = dict(config.tools_overrides)

    def is_hidden(self, full_name: str) -> bool:
        """Excluded by a pattern (full name or plugin name) or disabled by an override."""
        plugin = full_name.split("-", 1)[0]
        if any(fnmatchcase(full_name, p) or fnmatchcase(plugin, p) for p in self.exclude):
            return True
        override = self.overrides.get(full_name)
        return override is not None and not override.enabled

    def is_searchable(self, full_name: str) -> bool:
        override = self.overrides.get(full_name)
        return override is None or override.searchable

    def pinned(self) -> list[str]:
        return [name for name, o in self.overrides.items() if o.always_include and o.enabled]

    def unmatched(self, known: Sequence[str]) -> list[str]:
        """One message per ``exclude`` pattern and ``tools_overrides`` entry that names no tool of
        `known`, with the closest real names (a typo in an exclude would silently expose a tool)."""
        known_set = set(known)
        plugins = {name.split("-", 1)[0] for name in known}
        messages = []
        for position, pattern in enumerate(self.exclude):
            if not any(fnmatchcase(n, pattern) for n in known) and not any(fnmatchcase(p, pattern) for p in plugins):
                messages.append(_unmatched(f"tool_filtering.exclude[{position}]", pattern, [*plugins, *known]))
        for name in self.overrides:
            if name not in known_set:
                messages.append(_unmatched("tool_filtering.tools_overrides", name, known))
        return messages

    def apply(self, tools: Iterable[ToolMetadata]) -> list[ToolMetadata]:
        """Visible tools only, with override metadata (category, tags, keywords) merged in."""
        visible = []
        for tool in tools:
            if self.is_hidden(tool.full_name):
                continue
            override: ToolOverride | None = self.overrides.get(tool.full_name)
            if override is not None:
                extra = [*(override.tags or []), *(override.keywords or [])]
                if override.category:
                    extra.append(override.category)
                tool = dataclasses.replace(tool, keywords=tuple(dict.fromkeys([*tool.keywords, *extra])))
            visible.append(tool)
        return visible


def _unmatched(key: str, name: str, known: Sequence[str]) -> str:
    suggestions = closest_names(name, known)
    hint = f"; closest real names: {', '.join(suggestions)}" if suggestions else ""
    return f"{key}: {name!r} matches no tool of the kernel{hint}"
