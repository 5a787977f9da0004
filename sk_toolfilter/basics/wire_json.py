"""JSON as it travels to the model."""

from __future__ import annotations

import json
from typing import Any


def compact_json(value: Any) -> str:
    """JSON as the OpenAI client sends it: no spaces, non-ASCII kept (fewer tokens than ``\\u`` escapes)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
