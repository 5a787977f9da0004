"""Reading the files a user hands over (catalogs, query and conversation files, documents): one boundary.

Whatever bytes a file holds, what comes out is its text or parsed JSON, or a :class:`ConfigError`
naming the file (and line) and the problem — never a ``UnicodeDecodeError``, ``RecursionError``
or ``AttributeError`` from deeper down.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

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


MAX_STATE_FILE_BYTES = 64 * 2**20
"""What a small state or model file (a ranker, a manifest, a co-usage file) may weigh before it is refused."""

_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def open_regular(
    path: str | Path, what: str, max_bytes: int = MAX_STATE_FILE_BYTES, *, own_only: bool = False
) -> BinaryIO:
    """`path` open for binary reading when it is a regular file (a link is followed) of at most
    `max_bytes`; else ConfigError naming the file and why. A FIFO, a device or a socket is refused
    without blocking (opened non-blocking, checked with ``fstat`` on the open descriptor: no race
    between the check and the read). A missing file raises FileNotFoundError (callers decide).
    `own_only` (state this process writes): a symbolic link is refused, not followed, and so is a file
    another user owns (in a folder others may write, they could plant or swap it)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if own_only:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(Path(path).expanduser(), flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if own_only and exc.errno == errno.ELOOP:
            raise ConfigError(f"{path}: {what} is a symbolic link: refused (it is never followed)") from None
        raise ConfigError(f"{path}: cannot read {what} ({exc.strerror or type(exc).__name__})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
            raise ConfigError(f"{path}: {what} must be a regular file, and this is {kind}")
        if own_only and hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise ConfigError(f"{path}: {what} is owned by another user (uid {info.st_uid}): refused")
        if info.st_size > max_bytes:
            raise ConfigError(f"{path}: {what} is {info.st_size:,} bytes, over the bound of {max_bytes:,} bytes")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded_text(path: str | Path, what: str, max_bytes: int = MAX_STATE_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most `max_bytes` (:func:`open_regular`); ConfigError otherwise."""
    with open_regular(path, what, max_bytes) as handle:
        raw = handle.read(max_bytes + 1)
    if len(raw) > max_bytes:  # it grew since the check
        raise ConfigError(f"{path}: {what} is over the bound of {max_bytes:,} bytes")
    try:
        return raw.decode("utf-8")
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
