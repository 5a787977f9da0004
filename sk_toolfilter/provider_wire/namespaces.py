"""OpenAI namespaces for deferred plugins (``provider_search.unit: plugin``).

Each plugin or MCP server's deferred functions go as one ``namespace`` entry (OpenAI's models are
trained to search namespaces), at most :data:`NAMESPACE_MAX` functions each (a larger plugin is split:
``Crm``, ``Crm_2``, …; names unique across the whole catalog and the same on every request,
:func:`namespace_layout`), each function under its own name in the plugin (``record_opt_out``). The model
calls ``{"namespace": "Crm", "name": "record_opt_out"}``; frameworks know ``Crm-record_opt_out``. The
transport keeps the framework's names on its side and the namespace form on the wire: :meth:`outgoing`
rewrites a request body (tools, replayed calls, search answers), :meth:`incoming` a response's items.
Functions without a plugin, and loaded ones, stay plain functions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

NAMESPACE_MAX = 9
"""Functions per namespace (OpenAI advises namespaces of fewer than 10 functions)."""

PluginOf = Callable[[str], "tuple[str, str] | None"]
"""A tool's ``(namespace, function name)`` by full name, or None (no plugin: never namespaced)."""


def plugin_of(manager: Any) -> PluginOf:
    """`manager`'s tools as ``(namespace, function name)`` by full name, from the layout of the index it
    has when asked (:func:`namespace_layout`: the same for every request of that catalog)."""
    layouts: dict[int, tuple[Any, dict[str, tuple[str, str]]]] = {}

    def find(full_name: str) -> tuple[str, str] | None:
        index = manager.index
        known = layouts.get(id(index))
        if known is None or known[0] is not index:
            layouts.clear()
            known = layouts[id(index)] = (index, namespace_layout((t.full_name, t.plugin, t.name) for t in index.tools))
        return known[1].get(full_name)

    return find


def namespace_layout(tools: Iterable[tuple[str, str, str]]) -> dict[str, tuple[str, str]]:
    """Each tool ``(full name, plugin, function)`` of a catalog as ``(namespace, function)``, from the whole
    catalog at once (so every request, and its replay, names a function the same way): each plugin's
    functions in catalog order, :data:`NAMESPACE_MAX` per namespace (``Crm``, ``Crm_2``, …); a name taken by
    a real plugin or an earlier split is never reused (``Crm_2`` split from ``Crm`` beside a plugin named
    ``Crm_2`` becomes ``Crm_3``), so two functions of one name never share a namespace. Tools without a
    plugin are left out (never namespaced)."""
    members: dict[str, list[tuple[str, str]]] = {}
    for full_name, plugin, function in tools:
        if plugin:
            members.setdefault(plugin, []).append((full_name, function))
    taken = {plugin.casefold() for plugin in members}
    layout: dict[str, tuple[str, str]] = {}
    for plugin, functions in members.items():
        suffix = 1
        for start in range(0, len(functions), NAMESPACE_MAX):
            space = plugin
            if start:
                suffix += 1
                while f"{plugin}_{suffix}".casefold() in taken:
                    suffix += 1
                space = f"{plugin}_{suffix}"
                taken.add(space.casefold())
            for full_name, function in functions[start : start + NAMESPACE_MAX]:
                layout[full_name] = (space, function)
    return layout


class Namespaces:
    """One request's namespaces: which full name is which (namespace, function)."""

    def __init__(self, plugin_of: PluginOf) -> None:
        self.plugin_of = plugin_of
        self._wire: dict[str, tuple[str, str]] = {}
        self._full: dict[tuple[str, str], str] = {}

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
            self._wire[name] = found
            self._full[found] = name
        return self._wire[name]

    def _description(self, space: str, members: list[dict[str, Any]]) -> str:
        return f"{space} tools: " + ", ".join(str(m.get("name")) for m in members)

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
