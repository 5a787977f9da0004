"""Secrets are never echoed: errors, warnings, log lines, eval files and validate output."""

import json
import logging
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, example, given, settings, strategies as st

from sk_toolfilter import ConfigError
from sk_toolfilter.agents.agent_file import load_agent_file, parse_agent
from sk_toolfilter.basics.redaction import redact_config, redact_text, redact_url
from sk_toolfilter.cli import main

ROOT = Path(__file__).resolve().parents[1]
SECRET = "sk-live-5e3c7a9d1f"


def write_agent(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_agent_file(path)
    return str(info.value)


def test_a_typo_in_a_tool_type_does_not_print_the_sources_env(tmp_path):
    path = write_agent(
        tmp_path,
        {"name": "a", "tools": [{"type": "mpc", "name": "W", "command": "x", "env": {"WEATHER_API_KEY": SECRET}}]},
    )
    message = error_of(path)
    assert "tools[0]" in message and SECRET not in message


def test_a_duplicate_source_name_does_not_print_the_model_api_key(tmp_path):
    tools = [{"type": "plugin", "name": "M", "import": "sk_toolfilter.demo:MathPlugin"}] * 2
    message = error_of(write_agent(tmp_path, {"name": "a", "model": {"api_key": SECRET}, "tools": tools}))
    assert "repeated: M" in message and SECRET not in message


def test_a_bad_value_that_came_from_the_environment_is_not_echoed(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_TOP_K", "five-" + SECRET)
    message = error_of(write_agent(tmp_path, {"name": "a", "tool_filtering": {"top_k": "${AGENT_TOP_K}"}}))
    assert "tool_filtering.top_k" in message and SECRET not in message and "***" in message


def test_eval_out_does_not_write_credentials_from_a_base_url(tmp_path, capsys):
    agent = yaml.safe_load((ROOT / "agent.yaml").read_text())
    agent["instructions"] = "Be helpful."
    agent["tool_filtering"]["search_method"] = "bm25"
    agent["tool_filtering"]["embedding"] = {
        "provider": "openai",
        "base_url": f"https://bob:{SECRET}@emb.example/v1?key=k9",
    }
    for source in agent["tools"]:
        if "init" in source:
            source["init"]["root"] = str(tmp_path / "sandbox")
    path = write_agent(tmp_path, agent)
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "1", "query": "add 2 and 3", "gold": ["Math-add"]}) + "\n")
    out = tmp_path / "out"
    argv = ["eval", "--agent", str(path), "--queries", str(queries), "--methods", "bm25", "--out", str(out)]
    assert main(argv) == 0
    written = (out / "eval.json").read_text()
    assert "emb.example" in written and SECRET not in written and "k9" not in written
    assert SECRET not in capsys.readouterr().out


def failing_server_log(tmp_path: Path, caplog, args: list[str], **extra) -> str:
    """Everything logged while `validate` starts an optional MCP server with `args` that exits at once."""
    source = {"type": "mcp", "name": "Broken", "command": sys.executable, "args": args, "optional": True, **extra}
    path = write_agent(tmp_path, {"name": "a", "tools": [source], "tool_filtering": {"search_method": "bm25"}})
    caplog.set_level(logging.DEBUG)
    assert main(["validate", str(path)]) == 0
    shown = caplog.text + "".join(r.getMessage() for r in caplog.records)
    assert "exited during start-up" in shown
    return shown


def test_a_failing_mcp_server_does_not_log_its_env_or_arguments_from_the_environment(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("SERVER_TOKEN", SECRET)
    fault_server = str(ROOT / "tests" / "fixtures" / "mcp_fault_server.py")
    shown = failing_server_log(
        tmp_path, caplog, [fault_server, "exit", "--token=${SERVER_TOKEN}"], env={"OTHER": "literal-" + SECRET[::-1]}
    )
    assert SECRET not in shown and SECRET[::-1] not in shown


def test_redaction_of_urls_text_and_configs():
    url = f"https://user:{SECRET}@host.example:8443/v1/mcp?api-key=abc123#frag"
    assert redact_url(url) == "https://***@host.example:8443/v1/mcp?***"
    assert (
        redact_text(f"failed to reach {url} (timeout)")
        == "failed to reach https://***@host.example:8443/v1/mcp?*** (timeout)"
    )
    assert redact_config({"api_key": "x", "headers": {"A": "b"}, "nested": [{"token": "t"}], "top_k": 5}) == {
        "api_key": "***",
        "headers": "***",
        "nested": [{"token": "***"}],
        "top_k": 5,
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    secret=st.text(
        st.characters(min_codepoint=33, max_codepoint=0x2FFF, exclude_characters="\"'\\${}"), min_size=8, max_size=40
    ),
    where=st.sampled_from(["model.api_key", "mcp.env", "mcp.header", "embedding.api_key", "env_var"]),
)
@example(secret="dimensio", where="embedding.api_key")  # part of "embedding.dimensions": not a leak
def test_no_config_error_ever_shows_a_secret_wherever_it_was_written(secret, where, monkeypatch):
    def error_shown(value: str) -> str:
        monkeypatch.setenv("SOME_VALUE", value)
        mcp = {"type": "mcp", "name": "S", "command": "x"}
        data: dict = {"name": "a", "model": {}, "tools": [mcp], "tool_filtering": {"top_k": 0}}  # top_k 0: invalid
        if where == "model.api_key":
            data["model"]["api_key"] = value
        elif where == "mcp.env":
            mcp["env"] = {"K": value}
        elif where == "mcp.header":
            mcp.update(url="http://h/mcp", headers={"Authorization": value}, command=None)
            del mcp["command"]
        elif where == "embedding.api_key":
            data["tool_filtering"]["embedding"] = {"api_key": value, "dimensions": "lots"}
        else:
            data["description"] = "${SOME_VALUE}"
            data["name"] = "${SOME_VALUE}"  # invalid name pattern, and its value came from the environment
        with pytest.raises(ConfigError) as info:
            parse_agent(data, source="agent.yaml")
        return str(info.value)

    # A "secret" that is part of the message anyway ("dimensio" of "embedding.dimensions") proves nothing.
    assume(secret not in error_shown("placeholder-value"))
    assert secret not in error_shown(secret)


# --- secrets found by shape, wherever they were written --------------------------------------------
def test_a_literal_key_in_an_mcp_servers_args_is_not_printed_when_it_exits(tmp_path, caplog):
    """A real process that dies at start-up; the key was written literally, not through ${VAR}."""
    fault_server = str(ROOT / "tests" / "fixtures" / "mcp_fault_server.py")
    literal = "sk-proj-9f8e7d6c5b4a39281706"
    shown = failing_server_log(
        tmp_path, caplog, [fault_server, "exit", "--api-key", literal, "--auth-token=tok_5e3c7a9d1f2b"]
    )
    assert literal not in shown and "tok_5e3c7a9d1f2b" not in shown


_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
_TOKEN = st.text(st.sampled_from(_ALPHABET), min_size=12, max_size=40)


@settings(max_examples=150, deadline=None)
@given(
    body=_TOKEN.filter(lambda t: any(c.isdigit() for c in t) and any(c.isalpha() for c in t)),
    shape=st.sampled_from(
        [
            "python server.py --api-key {s} --port 8",
            "node index.js --token={s}",
            "cli --client-secret {s}",
            "export GITHUB_TOKEN={s}",
            'headers: {{"Authorization": "Bearer {s}"}}',
            "POST https://mcp.example.com/mcp/{s}x9Q7 failed",
            "https://host:8443/servers/{s}x9Q7/sse: 502",
            "sk-{s}xxxxxxxxxxxxxxxx",
            "ghp_{s}AAAAAAAAAAAAAAAAAAAA",
            '{{"password": "{s}"}}',
        ]
    ),
)
def test_a_token_in_a_command_line_header_url_path_or_key_shape_is_never_rendered(body, shape):
    if shape.startswith("ghp_"):  # GitHub tokens are letters and digits only
        body = body.replace("-", "").replace("_", "")
    text = shape.format(s=body)
    rendered = redact_text(f"MCP server failed: {text}")
    assert body not in rendered, rendered


@settings(max_examples=100, deadline=None)
@given(password=_TOKEN, cut=st.integers(min_value=0, max_value=6))
def test_no_fragment_of_a_remembered_secret_is_rendered(password, cut):
    from sk_toolfilter.basics.redaction import remember_secret

    remember_secret(password)
    fragment = password[cut:]
    if len(fragment) < 5:
        return
    assert fragment not in redact_text(f"invalid percent-encoded token: '{fragment}'")
    assert fragment not in redact_text(f"syntax error near {fragment} in conninfo")


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://bob:pa%zzsecretword@localhost:5432/db",  # a stray % in the password
        "host=localhost dbname=db user=bob password secretword",  # a keyword without '='
    ],
)
async def test_a_malformed_connection_string_is_a_config_error_that_quotes_none_of_it(dsn, monkeypatch):
    pytest.importorskip("psycopg")
    from sk_toolfilter.config import IndexConfig
    from sk_toolfilter.store.postgres import PostgresIndexStore

    monkeypatch.setenv("PG_DSN", dsn)
    from sk_toolfilter.basics.redaction import remember_secret

    remember_secret(dsn)  # as ${PG_DSN} in an agent file does
    config = IndexConfig(store="postgres", connection_string=dsn, timeout_seconds=1)
    with pytest.raises(ConfigError) as info:
        await PostgresIndexStore.connect(config)
    message = str(info.value)
    assert "connection_string" in message
    assert "secretword" not in message and "zzsecret" not in message
