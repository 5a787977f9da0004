"""Agent files are parsed with bounds: size, depth, alias expansion, encoding, duplicate keys."""

import time

import pytest
from hypothesis import given, settings, strategies as st

from sk_toolfilter import ConfigError
from sk_toolfilter.agents.agent_file import load_agent_file
from sk_toolfilter.agents.yaml_reader import MAX_DEPTH, parse_yaml

ALIAS_BOMB = """name: bomb
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def error_for(tmp_path, content: bytes | str) -> str:
    path = tmp_path / "agent.yaml"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        load_agent_file(path)
    message = str(info.value)
    assert message.startswith(str(path)), message  # every error names the file
    return message


def test_an_alias_bomb_is_refused_at_once(tmp_path):
    started = time.perf_counter()
    message = error_for(tmp_path, ALIAS_BOMB)
    assert time.perf_counter() - started < 60  # refused while expanding, not after building it all
    assert "expands to more than 100,000 values" in message


def test_deep_nesting_is_an_error_not_a_recursion_error(tmp_path):
    message = error_for(tmp_path, "name: deep\nx: " + "[" * 900 + "]" * 900 + "\n")
    assert f"nested more than {MAX_DEPTH} levels deep" in message


def test_a_file_that_is_not_utf8_is_named(tmp_path):
    message = error_for(tmp_path, b"name: caf\xe9\n")
    assert "not UTF-8 text (invalid byte at line 1)" in message


def test_a_duplicated_key_is_an_error_naming_both_lines(tmp_path):
    text = "name: a\ntool_filtering:\n  exclude: [Admin]\ndescription: x\ntool_filtering:\n  top_k: 3\n"
    message = error_for(tmp_path, text)
    assert "duplicate key 'tool_filtering' at line 5 (first at line 2)" in message


def test_a_huge_file_is_refused(tmp_path):
    message = error_for(tmp_path, "name: a\ndescription: '" + "x" * 1_100_000 + "'\n")
    assert "agent files are limited to 1,000,000" in message


def test_a_recursive_alias_is_refused(tmp_path):
    assert "recursive alias" in error_for(tmp_path, "name: a\nx: &x [*x]\n")


def test_ordinary_aliases_and_merge_keys_still_work():
    data = parse_yaml("base: &b {top_k: 3}\nother: {<<: *b, search_method: bm25}\n")
    assert data["other"] == {"top_k": 3, "search_method": "bm25"}


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_text_parses_or_fails_with_a_config_error(text):
    try:
        parse_yaml(text, "fuzz.yaml")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.yaml: ")
