"""Finding tools that a query names outright (``send_email``, ``Email-send_email``, ``Email.send_email``)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.text import split_identifier

_IDENTIFIER = re.compile(r"[\w][\w\-.:/]*[\w]|[\w]", re.UNICODE)


def _variants(full_name: str, plugin: str, name: str) -> set[str]:
    lowered = {full_name.lower()}
    if plugin:
        for sep in (".", "_", ":", "/", "__"):
            lowered.add(f"{plugin}{sep}{name}".lower())
    return lowered


class NameMatcher:
    """Maps spellings of tool names to tool positions.

    A full name matches in any common spelling (``Plugin-fn``, ``Plugin.fn``, ``Plugin_fn``). A bare
    function name matches only when it is identifier-like (two or more words such as
    ``send_email`` or ``getWeather``), so an ordinary word like "search" is not taken as a name.
    """

    def __init__(self, tools: Sequence[ToolMetadata]) -> None:
        self._by_spelling: dict[str, list[int]] = {}
        for position, tool in enumerate(tools):
            spellings = _variants(tool.full_name, tool.plugin, tool.name)
            if len(split_identifier(tool.name)) >= 2:
                spellings.add(tool.name.lower())
            for spelling in spellings:
                self._by_spelling.setdefault(spelling, []).append(position)

    def named_in(self, query: str) -> list[int]:
        """Positions of the tools the query names, in order of first mention."""
        found: dict[int, None] = {}
        for word in _IDENTIFIER.findall(query):
            for position in self._by_spelling.get(word.lower(), ()):
                found.setdefault(position)
        return list(found)
