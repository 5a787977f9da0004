"""Finding tools that a query names outright (``send_email``, ``Email-send_email``, ``Email.send_email``)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from sk_toolfilter.basics.text_cache import bounded_text_cache
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.text import split_identifier

MAX_TOOL_NAME = 64
"""The longest ``Plugin-function`` name the model's API accepts."""

UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
"""Characters Semantic Kernel and the model's API refuse in a function name."""


def sent_name(plugin: str, raw: str) -> str:
    """The name `raw` gets in `plugin` before it is made unique: cleaned, and shortened with a stable hash
    suffix when ``Plugin-function`` would pass 64 characters (what a labelled query's gold name becomes)."""
    name = UNSAFE_NAME_CHARS.sub("_", raw.strip()) or "tool"
    room = max(8, MAX_TOOL_NAME - len(plugin) - 1)
    if len(name) > room:
        digest = hashlib.sha1(raw.encode("utf-8", "surrogatepass")).hexdigest()[:6]
        name = f"{name[: room - 7]}_{digest}"
    return name


def sent_full_name(full_name: str) -> str:
    """``Plugin-function`` as it is sent (:func:`sent_name`): a catalog's own long name → its short one."""
    plugin, _, function = full_name.partition("-")
    return f"{plugin}-{sent_name(plugin, function)}" if function else full_name


_IDENTIFIER = re.compile(r"[\w][\w\-.:/]*[\w]|[\w]", re.UNICODE)


SEPARATORS = ("-", ".", "_", ":", "/", "__")
"""How a query may join a plugin and a function name (``Email-send_email``, ``Email.send_email``…)."""
_SEPARATOR = re.compile("|".join(re.escape(sep) for sep in SEPARATORS))


@bounded_text_cache(max_bytes=4 << 20)
def _is_compound(name: str) -> bool:
    """Two or more words (``send_email``, ``getWeather``): specific enough to be taken as a name."""
    return len(split_identifier(name)) >= 2


class NameMatcher:
    """Maps spellings of tool names to tool positions.

    A full name matches in any common spelling (``Plugin-fn``, ``Plugin.fn``, ``Plugin_fn``). A bare
    function name matches only when it is identifier-like (two or more words such as
    ``send_email`` or ``getWeather``), so an ordinary word like "search" is not taken as a name.

    Two small maps (the full name and compound bare name; plugin and name) rather than every
    spelling of every tool: a query word is tried at each separator it contains instead.
    """

    def __init__(self, tools: Sequence[ToolMetadata]) -> None:
        exact: dict[str, list[int]] = {}
        parts: dict[str, list[int]] = {}
        for position, tool in enumerate(tools):
            full = tool.full_name.lower()
            exact.setdefault(full, []).append(position)
            if _is_compound(tool.name):
                bare = tool.name.lower()
                if bare != full:
                    exact.setdefault(bare, []).append(position)
            if tool.plugin:
                parts.setdefault(f"{tool.plugin}\x00{tool.name}".lower(), []).append(position)
        self._exact, self._parts = exact, parts

    def _positions(self, word: str) -> list[int]:
        if _SEPARATOR.search(word) is None:  # most words: one lookup, no spelling to split
            return self._exact.get(word, [])
        found = set(self._exact.get(word, ()))
        for sep in SEPARATORS:
            start = word.find(sep)
            while start > 0:
                found.update(self._parts.get(f"{word[:start]}\x00{word[start + len(sep) :]}", ()))
                start = word.find(sep, start + 1)
        return sorted(found)

    def named_in(self, query: str) -> list[int]:
        """Positions of the tools the query names, in order of first mention."""
        found: dict[int, None] = {}
        exact = self._exact
        ascii_query = query.isascii()  # lowered whole: the same words as lowering each one
        for word in _IDENTIFIER.findall(query.lower() if ascii_query else query):
            word = word if ascii_query else word.lower()
            # A word of letters and digits only has no separator: one lookup (most words).
            for position in exact.get(word, ()) if word.isalnum() else self._positions(word):
                found.setdefault(position)
        return list(found)
