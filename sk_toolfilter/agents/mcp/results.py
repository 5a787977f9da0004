"""MCP tool results as the model should read them: the text once, compact JSON, short notes for media.

Semantic Kernel's own MCP plugin hands the model a Python repr of its content objects, with every
text twice (``[TextContent(inner_content=TextContent(... text='…'), … text='…')]``). Here a result
becomes plain text: text blocks as written; ``structuredContent`` as compact JSON unless a text
block already carries the same data (the MCP spec asks servers to send both); images, audio,
resource links and binary resources as one-line descriptions (FastMCP's ``{"result": …}`` wrapping
of a plain return value counts as the same data as its text). A text that is a JSON object or array
loses its indentation (servers pretty-print for people; the model pays per token).
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types

from sk_toolfilter.basics.wire_json import compact_json

ERROR_PREFIX = "error: "
NO_OUTPUT = "(the tool returned no output)"


def render_tool_result(result: types.CallToolResult) -> str:
    """The text the model sees for one ``tools/call`` answer (prefixed ``error: `` when ``isError``)."""
    parts = [render_content(block) for block in result.content]
    structured = result.structuredContent
    if structured is not None and not _carried_by_text(result.content, structured):
        parts.append(compact_json(structured))
    text = "\n".join(part for part in parts if part) or NO_OUTPUT
    if result.isError and not text.lower().startswith("error"):
        return ERROR_PREFIX + text
    return text


def render_content(block: Any) -> str:
    """One content block of a tool result or a prompt message."""
    if isinstance(block, types.TextContent):
        return _compact_if_json(block.text)
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind}: {block.mimeType}, {_size(len(block.data) * 3 // 4)}]"
    if isinstance(block, types.ResourceLink):
        about = f" — {block.description}" if block.description else ""
        mime = f" ({block.mimeType})" if block.mimeType else ""
        return f"[resource link: {block.name} <{block.uri}>{mime}{about}]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource <{resource.uri}>]\n{resource.text}"
        mime = resource.mimeType or "binary"
        return f"[resource <{resource.uri}>: {mime}, {_size(len(resource.blob) * 3 // 4)}]"
    return f"[{getattr(block, 'type', type(block).__name__)} content]"


def _compact_if_json(text: str) -> str:
    """A text that is one JSON object or array, without its indentation (same data, fewer tokens)."""
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[" or stripped[-1] not in "}]":
        return text
    try:
        return compact_json(json.loads(stripped))
    except ValueError:
        return text


def _carried_by_text(content: list[Any], structured: Any) -> bool:
    """The text blocks already say what `structured` says: the same JSON, or, for a wrapped value
    (FastMCP turns ``return "x"`` into ``{"result": "x"}``), the value itself."""
    texts = [block.text for block in content if isinstance(block, types.TextContent)]
    candidates = [structured]
    if isinstance(structured, dict) and len(structured) == 1:
        candidates.append(next(iter(structured.values())))
    for value in candidates:
        if any(_means(text, value) for text in texts):
            return True
        if (
            isinstance(value, list)
            and value
            and len(value) == len(texts)
            and all(_means(text, item) for text, item in zip(texts, value, strict=True))
        ):
            return True
    return False


def _means(text: str, value: Any) -> bool:
    if isinstance(value, str) and text == value:
        return True
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def _size(n_bytes: int) -> str:
    return f"{n_bytes} bytes" if n_bytes < 1024 else f"{n_bytes / 1024:.1f} KB"
