"""Function names from the wild (MCP servers, catalogs) as Semantic Kernel and the model's API take them.

SK accepts ``[A-Za-z0-9_-]`` in function names (a dot makes ``add_plugin`` fail for the whole
plugin), and OpenAI-style APIs reject a tool name — SK sends ``Plugin-function`` — longer than 64
characters. Names are cleaned, shortened with a stable hash suffix when too long, and kept unique;
every rename is logged once, so a user can map a name on the wire back to the server's.
"""

from __future__ import annotations

import logging

from sk_toolfilter.basics.redaction import library_logger, warn_once
from sk_toolfilter.retrieval.names import MAX_TOOL_NAME, UNSAFE_NAME_CHARS, sent_name

logger = library_logger(__name__)


def function_name(
    plugin: str, raw: str, taken: set[str] | None = None, renamed: list[tuple[str, str]] | None = None
) -> str:
    """A name for `raw` in `plugin` that SK and the API accept, not in `taken` (which it joins).

    Every rename is logged at debug level. A name shortened or made unique — no longer recognisable at
    a glance — joins `renamed` as ``(raw, name)`` for one summary per catalog (:func:`warn_renamed`);
    without `renamed` it is a warning of its own.
    """
    cleaned = UNSAFE_NAME_CHARS.sub("_", raw.strip()) or "tool"
    name = sent_name(plugin, raw)
    room = max(8, MAX_TOOL_NAME - len(plugin) - 1)
    if taken is not None:
        candidate, n = name, 2
        while candidate in taken:
            suffix = f"_{n}"
            candidate, n = name[: room - len(suffix)] + suffix, n + 1
        name = candidate
        taken.add(name)
    if name != raw:
        summarized = renamed is not None and name != cleaned
        if summarized:
            assert renamed is not None
            renamed.append((raw, name))
        logger.log(
            logging.WARNING if name != cleaned and not summarized else logging.DEBUG,
            "sk-toolfilter: tool %r of %s is called %r (names are limited to [A-Za-z0-9_-] and "
            "%d characters with the plugin name)",
            raw,
            plugin,
            name,
            MAX_TOOL_NAME,
        )
    return name


def warn_renamed(where: str, renamed: list[tuple[str, str]]) -> None:
    """One warning for every name of `where` (a catalog, a server) that was shortened or made unique."""
    if not renamed:
        return
    raw, name = renamed[0]
    warn_once(
        logger,
        f"{len(renamed)} tool name(s) of {where} are sent shortened or made unique (names are limited to "
        f"{MAX_TOOL_NAME} characters with the plugin name), e.g. {raw!r} as {name!r}; report, eval and the agent "
        "file's tool names accept either spelling, and debug logging lists each",
    )
