"""Who may see and run which tool: exclusions and per-tool overrides, applied before anything else.

An excluded or disabled tool is left out of the index, so no search, discovery or pin can bring it
back, and the execution guard refuses a model's call to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from sk_toolfilter.config import ToolFilterConfig, ToolOverride
from sk_toolfilter.errors import ConfigError, closest_names
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

    def check_names(self, known: Sequence[str]) -> None:
        """Every override names a real tool (the error lists the closest real names)."""
        known_set = set(known)
        for name in self.overrides:
            if name not in known_set:
                suggestions = closest_names(name, known)
                hint = f"; closest real names: {', '.join(suggestions)}" if suggestions else ""
                raise ConfigError(f"tool_filtering.tools_overrides: {name!r} is not a kernel function{hint}")

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
