"""Token counts of what reaches the wire (the tokenizer lives in :mod:`sk_toolfilter.basics.tokenizer`,
below every layer, so telemetry can count the tool-schema tokens a selection saves)."""

from sk_toolfilter.basics.tokenizer import ENCODINGS, compact_json, count_json_tokens, count_tokens

__all__ = ["ENCODINGS", "compact_json", "count_json_tokens", "count_tokens"]
