"""Tool input schemas from the wild (MCP servers, catalogs) made safe for Semantic Kernel and the model.

Servers write JSON Schema the way their SDK emits it: ``$ref`` into ``$defs`` (pydantic, zod),
list-valued ``type`` (``["boolean", "string"]``), ``anyOf`` / ``oneOf`` / ``allOf``. Semantic Kernel
sends each parameter's schema on its own, so a ``$ref`` into the root's ``$defs`` dangles on the
wire, and its ``KernelParameterMetadata.type_`` accepts one string only. Here every local ``$ref`` is
inlined (recursion cut at the first repeat), combinators and list types stay as the server wrote
them, and each parameter gets a readable type label for ``describe_tool``.
"""

from __future__ import annotations

import json
import logging
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from sk_toolfilter.basics.redaction import library_logger

logger = library_logger(__name__)

MAX_REF_DEPTH = 16
"""Nested ``$ref`` expansions followed on one path before the rest is cut to ``{"type": "object"}``."""

MAX_INLINED_REFS = 2000
"""``$ref`` expansions per schema; later references are cut to ``{"type": "object"}``."""

RESERVED_PARAMETER_NAMES = frozenset({"kernel", "service", "execution_settings", "arguments", "settings"})
"""Names Semantic Kernel fills itself (or ``KernelArguments`` swallows): a tool parameter with one of
these names is renamed with a trailing "_" so its value reaches the tool."""

_JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object", "null")


def resolve_refs(schema: Any, root: dict[str, Any] | None = None) -> Any:
    """`schema` with every local ``$ref`` (``#/$defs/X``, ``#/definitions/X``, ``#``) inlined.

    Keys beside a ``$ref`` (e.g. its ``description``) win over the target's. A reference that
    repeats on its own path (a recursive model), nests deeper than :data:`MAX_REF_DEPTH`, cannot be
    resolved, or would grow the result past :data:`MAX_INLINED_REFS` expansions (a "billion laughs"
    of references) becomes ``{"type": "object"}`` plus its sibling keys, so the result is finite,
    small and has no dangling pointer. ``$defs`` / ``definitions`` are dropped.
    """
    root = schema if root is None and isinstance(schema, dict) else (root or {})
    return _Inliner(root).inline(schema, ())


class _Inliner:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.budget = MAX_INLINED_REFS

    def inline(self, node: Any, path: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [self.inline(item, path) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        siblings = {k: self.inline(v, path) for k, v in node.items() if k not in ("$ref", "$defs", "definitions")}
        if not isinstance(ref, str):
            return siblings
        target = _pointer(self.root, ref)
        if target is None or ref in path or len(path) >= MAX_REF_DEPTH or self.budget <= 0:
            return {"type": "object", **siblings}
        self.budget -= 1
        resolved = self.inline(target, (*path, ref))
        return {**resolved, **siblings} if isinstance(resolved, dict) else siblings


def _pointer(root: dict[str, Any], ref: str) -> Any:
    """The node a local JSON pointer names, or None."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for raw in ref[2:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node


def type_label(schema: Any) -> str:
    """A short type for signatures: ``string``, ``array[string]``, ``boolean|string``, ``integer|null``."""
    if not isinstance(schema, dict):
        return "any"
    kind = schema.get("type")
    if isinstance(kind, list):
        return "|".join(dict.fromkeys(str(k) for k in kind)) or "any"
    if kind == "array":
        items = schema.get("items")
        return f"array[{type_label(items)}]" if isinstance(items, dict) and items else "array"
    if isinstance(kind, str):
        return kind
    for combinator in ("anyOf", "oneOf"):
        branches = schema.get(combinator)
        if isinstance(branches, list) and branches:
            return "|".join(dict.fromkeys(type_label(b) for b in branches))
    branches = schema.get("allOf")
    if isinstance(branches, list):
        labels = [label for label in (type_label(b) for b in branches) if label != "any"]
        return labels[0] if labels else "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return "|".join(dict.fromkeys(_value_type(v) for v in schema["enum"])) or "any"
    if "const" in schema:
        return _value_type(schema["const"])
    if "properties" in schema:
        return "object"
    return "any"


def _value_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) else "any"


def safe_parameter_name(name: str) -> str:
    """SK accepts parameter names of ``[0-9A-Za-z_-]`` only: fold accents, replace the rest by "_"."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    safe = re.sub(r"[^0-9A-Za-z_-]", "_", folded) or "param"
    return f"{safe}_" if safe in RESERVED_PARAMETER_NAMES else safe


@dataclass(frozen=True)
class ToolParameters:
    """A tool's parameters as Semantic Kernel takes them, and the way back to the server's names."""

    dicts: list[dict[str, Any]]
    """``KernelParameterMetadata`` keyword dicts: name, is_required, type (a label), description,
    default_value, schema_data (the resolved schema, ``title`` dropped)."""
    original_names: dict[str, str]
    """SK parameter name → the name the server expects."""


def tool_parameters(input_schema: Any, where: str = "a tool") -> ToolParameters:
    """The parameters of a tool whose arguments `input_schema` (an object schema) describes.

    Property schemas that are JSON strings (some servers double-encode) are decoded; anything that
    is not a mapping counts as "any value". A name SK cannot take, or that collides with another
    once cleaned (``a.b`` and ``a_b``), is renamed with a warning naming `where` — never merged.
    """
    schema = input_schema if isinstance(input_schema, dict) else {}
    resolved = resolve_refs(schema)
    properties = resolved.get("properties")
    required = resolved.get("required")
    required_names = {str(n) for n in required} if isinstance(required, list) else set()
    dicts: list[dict[str, Any]] = []
    original: dict[str, str] = {}
    for raw_name, raw_prop in properties.items() if isinstance(properties, dict) else ():
        prop = raw_prop
        if isinstance(prop, str):
            try:
                prop = resolve_refs(json.loads(prop), schema)
            except ValueError:
                prop = {}
        prop = {k: v for k, v in prop.items() if k != "title"} if isinstance(prop, dict) else {}
        cleaned = name = safe_parameter_name(str(raw_name))
        while name in original:
            name += "_"
        if name != raw_name:
            # A collision (two parameters of one tool cleaned to one name) is worth a warning; a name SK would
            # swallow is renamed and mapped back on every call (said at -v, not on every command); a
            # cleaned character is not worth a line at all.
            swallowed = cleaned[:-1] in RESERVED_PARAMETER_NAMES
            level = logging.WARNING if name != cleaned else logging.INFO if swallowed else logging.DEBUG
            logger.log(level, "sk-toolfilter: parameter %r of %s is sent as %r", raw_name, where, name)
        original[name] = str(raw_name)
        description = prop.get("description")
        dicts.append(
            {
                "name": name,
                "is_required": str(raw_name) in required_names,
                "type": type_label(prop),
                "description": description if isinstance(description, str) else None,
                "default_value": prop.get("default"),
                "schema_data": prop,
            }
        )
    return ToolParameters(dicts, original)
