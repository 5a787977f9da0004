"""Reading the files a user hands over (catalogs, query and conversation files, documents): one boundary.

Whatever bytes a file holds, what comes out is its text or parsed JSON, or a :class:`ConfigError`
naming the file (and line) and the problem — never a ``UnicodeDecodeError``, ``RecursionError``
or ``AttributeError`` from deeper down.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sk_toolfilter.basics.errors import ConfigError


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of `path` (`what` it is, for the message), or ConfigError naming the file."""
    path = Path(path)
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror or type(exc).__name__})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {what} is not UTF-8 text (byte {exc.start})") from None


def parse_json(text: str, where: str, *, line: int | None = None) -> Any:
    """`text` parsed as JSON, or ConfigError naming `where` (a file, or ``file:line``); `line`: the text
    is that line of the file `where` (a JSON-lines file), and the error names it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: invalid JSON at line {exc.lineno if line is None else line}: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(f"{where}: JSON nested too deeply{'' if line is None else f' at line {line}'}") from None


def json_lines(path: str | Path, what: str, *, max_line_chars: int | None = None) -> Iterator[tuple[str, Any]]:
    """(``file:line``, value) for every non-blank line of a JSON-lines file, read one line at a time (a
    file of any length needs the memory of one line); a line longer than `max_line_chars` is refused."""
    try:
        with Path(path).open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                value = _json_line(raw, f"{path}", number, what, max_line_chars)
                if value is not _BLANK:
                    yield f"{path}:{number}", value
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror or type(exc).__name__})") from None


_BLANK = object()


def _json_line(raw: bytes, path: str, number: int, what: str, max_line_chars: int | None) -> Any:
    """One line's JSON value (``_BLANK`` for a blank line), or ConfigError naming the file and line."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: {what} is not UTF-8 text (byte {exc.start} of line {number})") from None
    if not line.strip():
        return _BLANK
    if max_line_chars is not None and len(line) > max_line_chars:
        raise ConfigError(f"{path}:{number}: line over {max_line_chars:,} characters")
    return parse_json(line, path, line=number)


def json_object(value: Any, where: str) -> dict[str, Any]:
    """`value` when it is a JSON object, else ConfigError naming `where`."""
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", bool: "true/false", type(None): "null"}.get(type(value), "a number")
