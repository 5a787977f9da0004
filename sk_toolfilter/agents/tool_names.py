"""Function names from the wild (MCP servers, catalogs) as Semantic Kernel and the model's API take them.

SK accepts ``[A-Za-z0-9_-]`` in function names (a dot makes ``add_plugin`` fail for the whole
plugin), and OpenAI-style APIs reject a tool name — SK sends ``Plugin-function`` — longer than 64
characters. Names are cleaned, shortened with a stable hash suffix when too long, and kept unique;
every rename is logged once, so a user can map a name on the wire back to the server's.
"""

from __future__ import annotations

import hashlib
import logging
import re

from sk_toolfilter.basics.redaction import library_logger

logger = library_logger(__name__)

MAX_TOOL_NAME = 64
"""The longest ``Plugin-function`` name the model's API accepts."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def sent_name(plugin: str, raw: str) -> str:
    """The name `raw` gets in `plugin` before it is made unique: cleaned, and shortened with a stable hash
    suffix when ``Plugin-function`` would pass 64 characters (what a labelled query's gold name becomes)."""
    name = _UNSAFE.sub("_", raw.strip()) or "tool"
    room = max(8, MAX_TOOL_NAME - len(plugin) - 1)
    if len(name) > room:
        digest = hashlib.sha1(raw.encode("utf-8", "surrogatepass")).hexdigest()[:6]
        name = f"{name[: room - 7]}_{digest}"
    return name


def function_name(plugin: str, raw: str, taken: set[str] | None = None) -> str:
    """A name for `raw` in `plugin` that SK and the API accept, not in `taken` (which it joins).

    A name only cleaned of characters (``alerts.list`` → ``alerts_list``) is logged at debug level;
    one shortened or made unique — no longer recognisable at a glance — with a warning.
    """
    cleaned = _UNSAFE.sub("_", raw.strip()) or "tool"
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
        logger.log(
            logging.WARNING if name != cleaned else logging.DEBUG,
            "sk-toolfilter: tool %r of %s is called %r (names are limited to [A-Za-z0-9_-] and "
            "%d characters with the plugin name)",
            raw,
            plugin,
            name,
            MAX_TOOL_NAME,
        )
    return name
