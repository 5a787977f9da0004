import asyncio
from pathlib import Path

import pytest

from sk_toolfilter import ConfigError
from sk_toolfilter.agents.agent_file import load_agent_file, parse_agent, substitute_env

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path, text, name="agent.yaml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_bundled_agent_file_loads():
    spec = load_agent_file(ROOT / "agent.yaml")
    assert spec.name == "atlas"
    assert [s.name for s in spec.tools] == ["Files", "Notes", "Math", "Time", "Text", "Messaging"]
    assert spec.tool_filtering.top_k == 5 and spec.tool_filtering.search_method == "hybrid"
    assert "Atlas" in spec.instructions_text()
    assert len(spec.sample_queries) >= 20


def test_env_variables_and_defaults_are_substituted(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_MODEL", "gpt-x")
    monkeypatch.delenv("UNSET_TOPK", raising=False)
    path = write(tmp_path, "name: a\nmodel: {name: '${MY_MODEL}'}\ntool_filtering: {top_k: '${UNSET_TOPK:-3}'}\n")
    spec = load_agent_file(path)
    assert spec.model.name == "gpt-x"
    assert spec.tool_filtering.top_k == 3


def test_a_missing_variable_is_an_error_naming_it_and_the_key(tmp_path, monkeypatch):
    monkeypatch.delenv("NOPE_TOPK", raising=False)
    path = write(tmp_path, "name: a\ntool_filtering: {top_k: '${NOPE_TOPK}'}\n")
    with pytest.raises(ConfigError) as info:
        load_agent_file(path)
    assert "tool_filtering.top_k: environment variable NOPE_TOPK is not set" in str(info.value)
    assert str(path) in str(info.value)


def test_an_unset_model_key_is_named_when_a_model_client_is_built_not_when_the_file_loads(tmp_path, monkeypatch):
    from sk_toolfilter.agents.agent import create_chat_service

    for name in ("NOPE_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    path = write(
        tmp_path, "name: a\nmodel: {api_key: '${NOPE_KEY}'}\nevaluations: {model: {api_key: '${NOPE_EVAL}'}}\n"
    )
    spec = load_agent_file(path)  # validate, search, report and eval never call the model
    assert spec.model.api_key is None
    with pytest.raises(ConfigError, match=r"model\.api_key: environment variable NOPE_KEY is not set"):
        create_chat_service(spec.model)
    monkeypatch.setenv("NOPE_KEY", "sk-from-the-environment")
    assert load_agent_file(path).model.api_key.get_secret_value() == "sk-from-the-environment"


def test_substitution_leaves_non_strings_alone():
    assert substitute_env({"a": 1, "b": [True, "${X:-y}"]}, environ={}) == {"a": 1, "b": [True, "y"]}


def test_malformed_yaml_reports_the_line(tmp_path):
    path = write(tmp_path, "name: a\ntools: [\n  - oops: {\n")
    with pytest.raises(ConfigError, match=r"invalid YAML at line \d+"):
        load_agent_file(path)


@pytest.mark.parametrize(
    ("yaml_text", "expected"),
    [
        ("name: a\ntool_filtering: {top_k: 0}\n", "tool_filtering.top_k: Input should be greater than 0"),
        ("name: a\ntool_filtering: {topk: 3}\n", "tool_filtering.topk: unknown key"),
        ("name: a\nmodle: {}\n", "modle: unknown key"),
        ("description: no name\n", "name: required key is missing"),
        (
            "name: a\ntools: [{type: mcp, name: S}]\n",
            "tools[0]: needs 'command' (a local stdio server) or 'url' (an HTTP server)",
        ),
        ("name: a\ntools: [{type: rest, name: S}]\n", "tools[0]: Input tag 'rest' found using 'type'"),
        ("name: a\ntools: [{type: plugin, name: 'bad name', import: 'x:Y'}]\n", "tools[0].name"),
        ("- just\n- a list\n", "expected a mapping at the top level"),
        (
            "name: a\ntools: [{type: catalog, name: C, path: x}, {type: catalog, name: C, path: y}]\n",
            "tool source names must be unique, repeated: C",
        ),
    ],
)
def test_errors_name_the_file_and_key_path(tmp_path, yaml_text, expected):
    path = write(tmp_path, yaml_text)
    with pytest.raises(ConfigError) as info:
        load_agent_file(path)
    assert expected in str(info.value)
    assert str(path) in str(info.value)


def test_secrets_never_appear_in_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_KEY_VALUE", "sk-live-abcdef")
    path = write(tmp_path, "name: a\nmodel: {api_key: '${SECRET_KEY_VALUE}', temprature: 0.1}\n")
    with pytest.raises(ConfigError) as info:
        load_agent_file(path)
    assert "sk-live-abcdef" not in str(info.value)
    spec = parse_agent({"name": "a", "model": {"api_key": "sk-live-abcdef"}})
    assert "sk-live-abcdef" not in repr(spec) and "sk-live-abcdef" not in str(spec.model_dump())


def test_missing_file_and_missing_instructions_file_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="cannot read agent file"):
        load_agent_file(tmp_path / "nope.yaml")
    spec = load_agent_file(write(tmp_path, "name: a\ninstructions: {file: missing.md}\n"))
    with pytest.raises(ConfigError, match=r"instructions\.file: cannot read"):
        spec.instructions_text()


def test_instruction_files_resolve_relative_to_the_agent_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "i.md").write_text("Be brief.")
    spec = load_agent_file(write(tmp_path, "name: a\ninstructions: {file: sub/i.md}\n"))
    assert spec.instructions_text() == "Be brief."


def test_sample_queries_accept_strings_and_expectations():
    spec = parse_agent({"name": "a", "sample_queries": ["hi", {"query": "add", "expect": ["Math-add"]}]})
    assert [(q.query, q.expect) for q in spec.sample_queries] == [("hi", []), ("add", ["Math-add"])]


def test_unknown_keys_and_plugin_classes_are_answered_with_the_closest_real_name(tmp_path):
    from sk_toolfilter.agents.agent import open_toolset

    agent = {
        "name": "t",
        "instructions": "Help.",
        "tools": [{"type": "plugin", "name": "Recipes", "imprt": "sk_toolfilter.demo:RecipePlugin"}],
        "tool_filtering": {"top_kk": 3, "embedding": {"backgrond_above": 3}},
    }
    with pytest.raises(ConfigError) as caught:
        parse_agent(agent, base_dir=tmp_path)
    message = str(caught.value)
    assert "tools[0].imprt: unknown key (did you mean 'import'?)" in message
    assert "tool_filtering.top_kk: unknown key (did you mean 'top_k'?)" in message
    assert "tool_filtering.embedding.backgrond_above: unknown key (did you mean 'background_above'?)" in message
    agent["tools"] = [{"type": "plugin", "name": "Recipes", "import": "sk_toolfilter.demo:MathPlugn"}]
    agent["tool_filtering"] = {"top_k": 3}
    with pytest.raises(ConfigError, match=r"has no attribute 'MathPlugn' \(did you mean 'MathPlugin'\?\)"):
        asyncio.run(open_toolset(parse_agent(agent, base_dir=tmp_path)))
