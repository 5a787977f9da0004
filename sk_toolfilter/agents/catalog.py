"""Tool definitions from files: the public benchmarks' ``tools.jsonl`` or OpenAI ``tools`` JSON."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.basics.input_files import json_lines, json_object, parse_json, read_text
from sk_toolfilter.retrieval.metadata import ParameterMetadata, ToolMetadata

_PLUGIN_SAFE = re.compile(r"[^0-9A-Za-z_]")
_FUNCTION_SAFE = re.compile(r"[^0-9A-Za-z_\-]")


def _parameters(schema: dict[str, Any] | None, where: str) -> tuple[ParameterMetadata, ...]:
    schema = schema or {}
    properties, required = schema.get("properties") or {}, schema.get("required") or []
    if not isinstance(properties, dict):
        raise ConfigError(f"{where}: 'parameters.properties' must be a mapping of parameter names to schemas")
    if not isinstance(required, list):
        raise ConfigError(f"{where}: 'parameters.required' must be a list of parameter names")
    required = {str(r) for r in required if isinstance(r, str | int)}
    params = []
    for name, prop in properties.items():
        prop = prop if isinstance(prop, dict) else {}
        params.append(
            ParameterMetadata(
                name=str(name),
                type=str(prop.get("type", "string")),
                description=str(prop.get("description") or ""),
                required=name in required,
                schema=prop,
            )
        )
    return tuple(params)


def _record(raw: dict[str, Any], default_plugin: str, where: str) -> tuple[ToolMetadata, dict[str, Any]]:
    if raw.get("type") == "function" and isinstance(raw.get("function"), dict):  # OpenAI tools format
        raw = {**raw["function"]}
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}: tool has no 'name'")
    plugin = _PLUGIN_SAFE.sub("_", str(raw.get("plugin") or default_plugin)) or "catalog"
    function = _FUNCTION_SAFE.sub("_", name.strip())
    schema = raw.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(schema, dict):
        raise ConfigError(f"{where}: 'parameters' of {name!r} must be a JSON schema object")
    tool = ToolMetadata(
        plugin=plugin,
        name=function,
        full_name=f"{plugin}-{function}",
        description=str(raw.get("description") or ""),
        parameters=_parameters(schema, where),
    )
    return tool, schema


def load_catalog(path: str | Path, default_plugin: str = "catalog") -> list[tuple[ToolMetadata, dict[str, Any]]]:
    """Tools and their JSON schemas from a ``.jsonl`` file (one tool per line) or a ``.json`` list.

    Accepts the benchmarks' ``{"plugin", "name", "description", "parameters"}`` records and OpenAI
    ``{"type": "function", "function": {...}}`` entries. Errors name the file and line.
    """
    path = Path(path)
    entries: list[tuple[str, Any]]
    if path.suffix == ".jsonl":
        entries = list(json_lines(path, "tool catalog"))
    else:
        data = parse_json(read_text(path, "tool catalog"), str(path))
        data = data.get("tools", data) if isinstance(data, dict) else data
        if not isinstance(data, list):
            raise ConfigError(f"{path}: expected a list of tools")
        entries = [(f"{path}[{i}]", item) for i, item in enumerate(data)]
    records, seen = [], set()
    for where, raw in entries:
        tool, schema = _record(json_object(raw, where), default_plugin, where)
        if tool.full_name in seen:
            raise ConfigError(f"{where}: duplicate tool {tool.full_name!r}")
        seen.add(tool.full_name)
        records.append((tool, schema))
    return records
