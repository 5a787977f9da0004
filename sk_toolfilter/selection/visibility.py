"""Who may see and run which tool: exclusions and per-tool overrides, applied before anything else.

An excluded or disabled tool is left out of the index, so no search, discovery or pin can bring it
back, and the execution guard refuses a model's call to it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

from sk_toolfilter.basics.errors import ConfigError, UnknownToolError, closest_names
from sk_toolfilter.config import ToolFilterConfig, ToolOverride
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.names import sent_full_name

DESTRUCTIVE_VERBS = frozenset(
    {"delete", "remove", "purge", "drop", "destroy", "erase", "wipe", "truncate", "revoke", "terminate", "kill"}
    | {"uninstall", "rm", "rmdir"}
)
"""Words of a function name that mark a tool destructive when no override or MCP hint says."""


class ToolPolicy:
    """Visibility rules of one agent (``exclude`` patterns and ``tools_overrides``)."""

    def __init__(self, config: ToolFilterConfig) -> None:
        self.exclude = list(config.exclude)
        self.allow = {plugin: list(patterns) for plugin, patterns in config.allow.items()}
        self.overrides = dict(config.tools_overrides)
        # The names a policy hides are matched as at start (:func:`resolve_bare_names`): by case and
        # separators too, so a tool a source adds later under a variant of an excluded name stays hidden.
        globs = [p for p in self.exclude if _is_glob(p)]
        self._excluded = {_near_key(p) for p in self.exclude if not _is_glob(p)}
        self._excluded_globs = [p.casefold() for p in globs]
        self._allow_near = {_near_key(plugin): patterns for plugin, patterns in self.allow.items()}
        self._disabled = {_near_key(n) for n, o in self.overrides.items() if not o.enabled}

    def is_hidden(self, full_name: str) -> bool:
        """Excluded by a pattern (full name or plugin name), outside its plugin's ``allow`` list, or
        disabled by an override. Names match as at start: a name that differs from an excluded or
        disabled one only by case or separators is hidden too, and a plugin's ``allow`` list holds
        for every spelling of the plugin (whose functions it names exactly)."""
        plugin, _, function = full_name.partition("-")
        if self._excluded or self._disabled:  # (no key is made for a policy that names nothing)
            whole = _near_key(full_name)
            if whole in self._excluded or whole in self._disabled or _near_key(plugin) in self._excluded:
                return True
        folded, folded_plugin = full_name.casefold(), plugin.casefold()
        if any(fnmatchcase(folded, p) or fnmatchcase(folded_plugin, p) for p in self._excluded_globs):
            return True
        allowed = self._allow_near.get(_near_key(plugin)) if self._allow_near else None
        return allowed is not None and not any(fnmatchcase(function, p) or fnmatchcase(full_name, p) for p in allowed)

    def check_pins(self, always_include: Sequence[str], known: Sequence[str]) -> None:
        """ConfigError for an ``always_include`` name that is excluded or disabled; UnknownToolError
        (with the closest real names) for one that names no tool of `known`."""
        known_set = set(known)
        for position, name in enumerate(always_include):
            if self.is_hidden(name):
                raise ConfigError(
                    f"tool_filtering.always_include[{position}]: {name!r} is excluded or disabled for this agent"
                )
            if name not in known_set:
                raise UnknownToolError(f"tool_filtering.always_include[{position}]", name, list(known))

    def is_destructive(self, full_name: str) -> bool:
        """The tool destroys or deletes: its override's ``destructive`` (an MCP tool's ``destructiveHint``
        arrives as one), else a destructive verb in its function name."""
        override = self.overrides.get(full_name)
        if override is not None and override.destructive is not None:
            return override.destructive
        function = full_name.partition("-")[2] or full_name
        words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", function).lower().replace("-", "_").split("_")
        return any(word in DESTRUCTIVE_VERBS for word in words)

    def is_searchable(self, full_name: str) -> bool:
        override = self.overrides.get(full_name)
        return override is None or override.searchable

    def pinned(self) -> list[tuple[str, str]]:
        """(name, reason) of every tool an override pins; the configuration's own first, then those a
        tool source or server pinned (``pinned_by``)."""
        pins = [(n, o) for n, o in self.overrides.items() if o.always_include and o.enabled]
        return [(n, "pinned: tools_overrides (always_include)") for n, o in pins if o.pinned_by is None] + [
            (n, f"pinned: {o.pinned_by}") for n, o in pins if o.pinned_by is not None
        ]

    def unmatched(self, known: Sequence[str]) -> list[str]:
        """One message per ``exclude`` pattern and ``tools_overrides`` entry that names no tool of
        `known`, with the closest real names (a typo in an exclude would silently expose a tool)."""
        known_set = set(known)
        plugins = {name.split("-", 1)[0] for name in known}
        messages = []
        for position, pattern in enumerate(self.exclude):
            if not any(fnmatchcase(n, pattern) for n in known) and not any(fnmatchcase(p, pattern) for p in plugins):
                messages.append(_unmatched(f"tool_filtering.exclude[{position}]", pattern, [*plugins, *known]))
        for plugin, patterns in self.allow.items():
            functions = [n.partition("-")[2] for n in known if n.partition("-")[0] == plugin]
            if not functions:
                messages.append(_unmatched("tool_filtering.allow", plugin, sorted(plugins)))
            for position, pattern in enumerate(patterns):
                if functions and not any(
                    fnmatchcase(f, pattern) or fnmatchcase(f"{plugin}-{f}", pattern) for f in functions
                ):
                    messages.append(_unmatched(f"tool_filtering.allow.{plugin}[{position}]", pattern, functions))
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


def _near_key(name: str) -> str:
    """What two spellings of one name share: case and separators (``-``, ``_``, ``.``, ``/``, ``:``, spaces) dropped."""
    return re.sub(r"[\s\-_./:]+", "", name).casefold()


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


class NameResolver:
    """Resolves a tool name as people write it to the one full name it denotes (see
    :func:`resolve_bare_names`): exact, bare (``search_papers``), or differing only by case or
    separators, or a catalog's own name that is sent shortened (:func:`sent_full_name`). Ambiguous names
    are a ConfigError listing the candidates; unknown ones come back as written."""

    def __init__(self, full_names: Sequence[str]) -> None:
        self.known = set(full_names)
        self.by_function: dict[str, list[str]] = {}
        self.near: dict[str, set[str]] = {}
        for full in full_names:
            function = full.split("-", 1)[-1]
            self.by_function.setdefault(function, []).append(full)
            self.near.setdefault(_near_key(full), set()).add(full)
            self.near.setdefault(_near_key(function), set()).add(full)
        self.plugins = {full.split("-", 1)[0] for full in full_names}
        self.near_plugins: dict[str, set[str]] = {}
        for plugin in self.plugins:
            self.near_plugins.setdefault(_near_key(plugin), set()).add(plugin)

    def resolve(self, name: str, key: str, plugin_ok: bool = False) -> str:
        if name in self.known or _is_glob(name) or (plugin_ok and name in self.plugins):
            return name
        if (sent := sent_full_name(name)) in self.known:  # the catalog's own long name, as it is sent
            return sent
        candidates = sorted(set(self.by_function.get(name, []))) if "-" not in name else []
        if not candidates:
            candidates = sorted(self.near.get(_near_key(name), set()))
        if not candidates and plugin_ok:
            candidates = sorted(self.near_plugins.get(_near_key(name), set()))
        if len(candidates) > 1:
            raise ConfigError(f"{key}: {name!r} is ambiguous; write one of: {', '.join(candidates)}")
        return candidates[0] if candidates else name


def resolve_bare_names(config: ToolFilterConfig, full_names: Sequence[str]) -> ToolFilterConfig:
    """`config` with bare function names (``search_papers``) in ``always_include``,
    ``tools_overrides`` and ``exclude`` replaced by the one full name they denote
    (``Papers-search_papers``), as agent files from other tools write them.

    A name that differs from a real one only by case or separators (``files-delete_file``,
    ``Files.delete_file``, ``Files-delete-file``) is resolved to it too: a policy name that nearly
    matches must not leave the tool it meant exposed. An exact full name, a glob, or (in ``exclude``)
    a plugin's name is left as written; a name several tools share is a :class:`ConfigError` listing
    them; one that names no tool is left for the usual unknown-name checks.
    """
    resolve = NameResolver(full_names).resolve

    always = [resolve(n, f"tool_filtering.always_include[{i}]") for i, n in enumerate(config.always_include)]
    exclude = [resolve(n, f"tool_filtering.exclude[{i}]", plugin_ok=True) for i, n in enumerate(config.exclude)]
    overrides = {resolve(n, f"tool_filtering.tools_overrides.{n}"): o for n, o in config.tools_overrides.items()}
    if (always, exclude, overrides) == (config.always_include, config.exclude, config.tools_overrides):
        return config
    return config.updated(always_include=always, exclude=exclude, tools_overrides=overrides)
