"""Reading agent YAML with bounds: size, nesting depth, alias expansion; duplicate keys are errors.

PyYAML's ``safe_load`` is safe from code execution, not from resource exhaustion: a 513-byte alias
bomb expands into billions of values in whatever walks the result, a 900-deep list overflows the
recursion limit, and a repeated key silently replaces the first one (with it, say, an
``exclude``). Every error here names the file and, where there is one, the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from sk_toolfilter.basics.errors import ConfigError

MAX_FILE_BYTES = 1_000_000
"""Agent files larger than this are refused (real ones are a few KB)."""
MAX_DEPTH = 64
"""Deepest nesting of mappings and lists."""
MAX_VALUES = 100_000
"""Values in the document once aliases are expanded (a bomb reuses a few nodes billions of times)."""


def read_yaml(path: str | Path) -> Any:
    """Parse `path` as YAML within the bounds above; raises :class:`ConfigError` naming the file."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(f"{path}: {size:,} bytes; agent files are limited to {MAX_FILE_BYTES:,}")
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read agent file ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}: not UTF-8 text (invalid byte at line {line}); save the file as UTF-8") from None
    return parse_yaml(text, str(path))


def parse_yaml(text: str, source: str = "<string>") -> Any:
    """Parse YAML text within the bounds; errors name `source`."""
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_size(node, source)
        return loader.construct_document(node)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or "malformed YAML"
        raise ConfigError(f"{source}: invalid YAML{where}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{source}: nested more than {MAX_DEPTH} levels deep") from None
    finally:
        if loader is not None:
            loader.dispose()


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` that bounds nesting while composing and refuses duplicate keys."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise ConfigError(f"nested more than {MAX_DEPTH} levels deep at line {mark.line + 1}")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_scalar(self, node: Any) -> Any:
        value = super().construct_scalar(node)
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:  # a "\ud800" escape: a lone surrogate is not text
                raise ConfigError(
                    f"line {node.start_mark.line + 1}: {value[exc.start]!r} (a lone surrogate, from a \\u escape) is "
                    "not text any model or service accepts; remove it"
                ) from None
        return value

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, ScalarNode):
                key = key_node.value
                if key in seen:
                    raise ConfigError(
                        f"duplicate key {key!r} at line {key_node.start_mark.line + 1} "
                        f"(first at line {seen[key]}); the second would silently replace the first"
                    )
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def _check_size(root: Node, source: str) -> None:
    """Count the values the document has once aliases are expanded, without expanding them."""
    sizes: dict[int, int] = {}
    in_progress: set[int] = set()

    def size(node: Node) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in in_progress:  # a recursive alias (&a [*a]): infinite when expanded
            raise ConfigError(f"a recursive alias at line {node.start_mark.line + 1}")
        in_progress.add(key)
        total = 1
        if isinstance(node, SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        in_progress.discard(key)
        sizes[key] = total
        if total > MAX_VALUES:
            raise ConfigError(
                f"expands to more than {MAX_VALUES:,} values (aliases reused at line {node.start_mark.line + 1}); "
                "agent files are limited to that"
            )
        return total

    size(root)
