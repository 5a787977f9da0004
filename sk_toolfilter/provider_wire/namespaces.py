"""OpenAI namespaces for deferred plugins (``provider_search.unit: plugin``).

Each plugin or MCP server's deferred functions go as one ``namespace`` entry (OpenAI's models are
trained to search namespaces), at most :data:`NAMESPACE_MAX` functions each (a larger plugin is split:
``Crm``, ``Crm_2``, …), each function under its own name in the plugin (``record_opt_out``). The model
calls ``{"namespace": "Crm", "name": "record_opt_out"}``; frameworks know ``Crm-record_opt_out``. The
transport keeps the framework's names on its side and the namespace form on the wire: :meth:`outgoing`
rewrites a request body (tools, replayed calls, search answers), :meth:`incoming` a response's items.
Functions without a plugin, and loaded ones, stay plain functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NAMESPACE_MAX = 9
"""Functions per namespace (OpenAI advises namespaces of fewer than 10 functions)."""

PluginOf = Callable[[str], "tuple[str, str] | None"]
"""A tool's ``(plugin, function name)`` by full name, or None (no plugin: never namespaced)."""


def plugin_of(manager: Any) -> PluginOf:
    """`manager`'s tools as ``(plugin, function name)`` by full name (the index it has when asked)."""

    def find(full_name: str) -> tuple[str, str] | None:
        index = manager.index
        if full_name not in index:
            return None
        tool = index.tools[index.position(full_name)]
        return tool.plugin, tool.name

    return find


class Namespaces:
    """One request's namespaces: which full name is which (namespace, function)."""

    def __init__(self, plugin_of: PluginOf) -> None:
        self.plugin_of = plugin_of
        self._wire: dict[str, tuple[str, str]] = {}
        self._full: dict[tuple[str, str], str] = {}
        self._count: dict[str, int] = {}
        self._plugin: dict[str, str] = {}

    def outgoing(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body` with its deferred functions grouped into namespaces, and its replayed function calls and
        search answers in namespace form."""
        tools = self._grouped(body.get("tools") or [])
        items = body.get("input")
        if isinstance(items, list):
            items = [self._outgoing_item(i) for i in items]
        return {**body, "tools": tools, **({"input": items} if items is not None else {})}

    def incoming(self, item: Any) -> Any:
        """A response item with a namespaced function call back under its full name."""
        if isinstance(item, dict) and item.get("type") == "function_call" and item.get("namespace"):
            full = self._full.get((str(item["namespace"]), str(item.get("name"))))
            if full is not None:
                return {k: v for k, v in item.items() if k != "namespace"} | {"name": full}
        return item

    def _grouped(self, tools: list[Any]) -> list[Any]:
        plain: list[Any] = []
        spaces: dict[str, list[dict[str, Any]]] = {}
        for tool in tools:
            where = self._placed(tool)
            if where is None:
                plain.append(tool)
            else:
                spaces.setdefault(where[0], []).append({**tool, "name": where[1]})
        grouped = [
            {"type": "namespace", "name": name, "description": self._description(name, members), "tools": members}
            for name, members in spaces.items()
        ]
        return [*plain[:-1], *grouped, *plain[-1:]] if plain and _is_search(plain[-1]) else [*plain, *grouped]

    def _placed(self, tool: Any) -> tuple[str, str] | None:
        """(namespace, function) for a deferred function with a plugin; None for anything else."""
        if not (isinstance(tool, dict) and tool.get("type") == "function" and tool.get("defer_loading")):
            return None
        name = str(tool.get("name"))
        if name not in self._wire:
            found = self.plugin_of(name)
            if not found or not found[0]:
                return None
            plugin, function = found
            taken = self._count.get(plugin, 0)
            self._count[plugin] = taken + 1
            space = plugin if taken < NAMESPACE_MAX else f"{plugin}_{taken // NAMESPACE_MAX + 1}"
            self._plugin[space] = plugin
            self._wire[name] = (space, function)
            self._full[(space, function)] = name
        return self._wire[name]

    def _description(self, space: str, members: list[dict[str, Any]]) -> str:
        return f"{self._plugin.get(space, space)} tools: " + ", ".join(str(m.get("name")) for m in members)

    def _outgoing_item(self, item: Any) -> Any:
        if not isinstance(item, dict):
            return item
        if item.get("type") == "function_call" and item.get("name") in self._wire:
            space, function = self._wire[str(item["name"])]
            return {**item, "namespace": space, "name": function}
        if item.get("type") == "tool_search_output":
            loaded = [{**t, "defer_loading": True} if isinstance(t, dict) else t for t in item.get("tools") or []]
            return {**item, "tools": [_loaded(t) for t in self._grouped(loaded)]}
        return item


def _loaded(tool: Any) -> Any:
    """A search answer's entry without ``defer_loading`` (inside a namespace too)."""
    if not isinstance(tool, dict):
        return tool
    tool = {k: v for k, v in tool.items() if k != "defer_loading"}
    if tool.get("type") == "namespace":
        tool["tools"] = [_loaded(t) for t in tool.get("tools") or []]
    return tool


def _is_search(tool: Any) -> bool:
    return isinstance(tool, dict) and tool.get("type") == "tool_search"
