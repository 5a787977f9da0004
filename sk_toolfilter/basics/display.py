"""Text shown on one line, to people (a report's table row) or to a model (a picker's tool list)."""

from __future__ import annotations


def number(value: float, digits: int = 2) -> str:
    """A figure for people: thousands separated, at most `digits` decimals, none when it is whole
    ("46", "3.86", "1,287", "338.5")."""
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def shorten(text: str, width: int) -> str:
    """`text` on one line (runs of whitespace, line breaks included, become one space), cut to `width`
    characters, an ellipsis marking the cut: a multi-line query never breaks a table row."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


_CONTROL = str.maketrans({c: " " for c in [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), 0x2028, 0x2029]})


def prompt_line(text: str, width: int) -> str:
    """`text` as one bounded line of a prompt: control characters become spaces, then :func:`shorten`.
    Text from a conversation or a server never starts a line of its own in a prompt."""
    return shorten(text[: width * 4].translate(_CONTROL), width)
