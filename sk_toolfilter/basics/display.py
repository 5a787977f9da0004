"""Text shown on one line, to people (a report's table row) or to a model (a picker's tool list)."""

from __future__ import annotations


def shorten(text: str, width: int) -> str:
    """`text` on one line (runs of whitespace, line breaks included, become one space), cut to `width`
    characters, an ellipsis marking the cut: a multi-line query never breaks a table row."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
