"""The docs site's generated references are complete: every configuration key (type, default, bounds,
description) and every command and option of the CLI."""

import argparse
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_configuration_key_has_a_description_and_a_row(generator):
    from sk_toolfilter.config import ToolFilterConfig

    page = generator.configuration_reference()
    missing = []
    for model in generator.models_of(ToolFilterConfig):
        assert f"## {model.__name__}" in page
        for key, info in model.model_fields.items():
            if not generator.field_description(info):
                missing.append(f"{model.__name__}.{key}")
            assert f"| `{info.alias or key}` |" in page, (model.__name__, key)
    assert missing == [], f"configuration keys without a description: {missing}"


def test_the_cli_reference_holds_every_command_and_option(generator):
    from sk_toolfilter.cli import build_parser

    page = generator.cli_reference()
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name, sub in commands.items():
        assert f"## sk-toolfilter {name}" in page
        for action in sub._actions:
            for option in action.option_strings:
                assert option in page, (name, option)


def test_the_tool_filtering_block_of_the_docs_is_the_model_with_its_defaults():
    """docs/agent-files/configuration.md shows the whole block as YAML: it must load as the model,
    every value it writes must be the default, and every key of the model must be in it (written, or
    commented out with an example)."""
    import re

    import yaml

    from sk_toolfilter.config import ToolFilterConfig

    text = (ROOT / "docs" / "agent-files" / "configuration.md").read_text(encoding="utf-8")
    block = re.findall(r"```yaml\n(.*?)```", text, re.S)[0]
    written = yaml.safe_load(block)["tool_filtering"]
    ToolFilterConfig.model_validate(written)  # loads as the model (unknown keys are errors)
    defaults = ToolFilterConfig().model_dump(by_alias=True)

    def differing(given: dict, default: dict, path: str = "") -> list[str]:
        found = []
        for key, value in given.items():
            if isinstance(value, dict) and value and isinstance(default.get(key), dict):
                found += differing(value, default[key], f"{path}{key}.")
            elif default.get(key, "(no such key)") != value:
                found.append(
                    f"{path}{key}: the docs say {value!r}, the default is {default.get(key, '(no such key)')!r}"
                )
        return found

    assert differing(written, defaults) == []
    mentioned = set(re.findall(r"(\w+):", block))  # block keys, flow-style keys, commented-out keys
    for model in _models_of(ToolFilterConfig):
        missing = {info.alias or key for key, info in model.model_fields.items()} - mentioned
        assert missing == set(), (model.__name__, missing)


def _models_of(model: type) -> list[type]:
    """`model` and the models of its fields (one level: the blocks the docs write inline)."""
    from pydantic import BaseModel

    found = [model]
    for info in model.model_fields.values():
        kind = info.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            found.append(kind)
    return found


def test_the_committed_generated_pages_are_what_the_generator_makes_now(generator):
    """A fresh clone builds the docs with --strict and the README's links resolve: the generated pages
    are committed, so they must never drift from the models, the parser and CHANGELOG.md."""
    pages = {
        ROOT / "docs" / "reference" / "configuration.md": generator.configuration_reference(),
        ROOT / "docs" / "reference" / "cli.md": generator.cli_reference(),
        ROOT / "docs" / "changelog.md": (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"),
    }
    stale = [str(p.relative_to(ROOT)) for p, text in pages.items() if not p.is_file() or p.read_text() != text]
    assert stale == [], f"run `python docs/gen_reference.py` and commit: {stale}"


def test_the_readme_is_a_landing_page_whose_links_lead_somewhere():
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#\s]+)\)", readme)
    local = [link for link in links if not link.startswith("http")]
    assert any(link.startswith("docs/") for link in local)
    assert [link for link in local if not (ROOT / link).exists()] == []  # generated pages are committed too


async def test_the_readme_token_figures_are_what_the_report_prints(tmp_path):
    """The headline figures, exactly as the report prints them: the shipped int8 models give every x86
    CPU the same vectors (tests/test_numerics.py), so the ranking and its figures are the same anywhere."""
    import re

    import yaml

    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import parse_agent
    from sk_toolfilter.basics.display import number
    from sk_toolfilter.measure.report import build_token_report

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"sends ([\d,]+) tool-schema tokens over its (\d+) sample queries\s+without filtering and "
                      r"([\d,]+) with it — ([\d.]+) % saved, with (\d+) of (\d+) expected tools sent", readme)  # fmt: skip  # noqa: E501
    assert found, "the README's headline sentence changed: update this test with it"
    data = yaml.safe_load((ROOT / "agent.yaml").read_text())
    for source in data["tools"]:
        if "init" in source:
            source["init"]["root"] = str(tmp_path / "sandbox")
    spec = parse_agent(data, base_dir=ROOT)
    async with await open_toolset(spec) as tools:
        report = await build_token_report(spec, tools.kernel, tools.manager, spec.sample_queries, provider_search=True)
    t = report.totals
    sent, checked = t["expected_tool_sent"].split("/")
    # The Agent Framework page's provider-search estimate, at the precision it states (whole percent).
    page = (ROOT / "docs" / "integrations" / "agent-framework.md").read_text(encoding="utf-8")
    estimate = re.search(r"that is about (\d+) % saved against filtering off with OpenAI, where filtering alone\s+saves about (\d+) %:[^.]*\.\s+With Claude it is about (\d+) %", page)  # fmt: skip  # noqa: E501
    assert estimate, "the provider-search sentence of docs/integrations/agent-framework.md changed: update this test"
    assert estimate.groups() == (
        f"{t['provider_search_saved_percent']:.0f}",
        f"{t['saved_percent']:.0f}",
        f"{t['provider_search_claude_saved_percent']:.0f}",
    )
    units = re.search(r"estimates both \(on the bundled agent's sample queries: ([\d,]+) tools tokens\s+with `unit: tool`, (\d+) % saved against filtering off; ([\d,]+) with `unit: plugin`, (\d+) % saved\)", page)  # fmt: skip  # noqa: E501
    assert units, "the unit sentence of docs/integrations/agent-framework.md changed: update this test"
    tool_tokens, tool_saved, plugin_tokens, plugin_saved = units.groups()
    assert (
        within(tool_tokens, t["tools_tokens_provider_search"])
        and tool_saved == f"{t['provider_search_saved_percent']:.0f}"
    )
    assert within(plugin_tokens, t["tools_tokens_provider_search_plugin"])
    assert plugin_saved == f"{t['provider_search_plugin_saved_percent']:.0f}"
    off, queries, on, saved = found.groups()[:4]
    assert (off, queries, found.groups()[4:]) == (f"{t['tools_tokens_off']:,}", str(t["queries"]), (sent, checked))
    assert within(on, t["tools_tokens_on"]) and within(saved, t["saved_percent"], absolute=0.1)
    # The report guide's table states the same run's figures, at the precision the README states.
    guide = (ROOT / "docs" / "guides" / "report.md").read_text(encoding="utf-8")
    table = re.search(r"\| tools tokens \(all queries\) \| ([\d,]+) \| ([\d,]+) \| \*\*([\d.]+)%\*\* \|\n"
                      r"\| whole request tokens \| ([\d,]+) \| ([\d,]+) \| ([\d.]+)% \|\n"
                      r"\| mean tools sent \| (\d+) \| ([\d.]+) \(incl. the 2 discovery tools\) \| \|", guide)  # fmt: skip  # noqa: E501
    assert table, "the report guide's table changed: update this test with it"
    stated = table.groups()
    assert stated[0] == f"{t['tools_tokens_off']:,}" and stated[3] == f"{t['body_tokens_off']:,}"
    assert within(stated[1], t["tools_tokens_on"]) and within(stated[4], t["body_tokens_on"])
    assert within(stated[2], t["saved_percent"], absolute=0.1) and within(
        stated[5], t["body_saved_percent"], absolute=0.1
    )
    assert stated[6] == number(t["mean_tools_off"]) and within(stated[7], t["mean_tools_on"], absolute=0.1)


def within(stated: str, measured: float, relative: float = 0.005, absolute: float = 0.0) -> bool:
    """A figure the docs state holds at the precision they state: within 0.5 % (token counts, which move
    by a few tokens between CPUs: see docs/guides/report.md), or within `absolute` (a rounded percent)."""
    value = float(stated.replace(",", ""))
    return abs(value - measured) <= max(relative * abs(measured), absolute)


async def test_the_report_guides_bfcl_figures_are_what_the_commands_print(tmp_path):
    """The 1,287-tool BFCL catalog: the report on 50 queries and eval over all 1,088, as the guide states."""
    import asyncio
    import json
    import re

    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file
    from sk_toolfilter.cli import _read_queries, main
    from sk_toolfilter.measure.report import build_token_report

    guide = (ROOT / "docs" / "guides" / "report.md").read_text(encoding="utf-8")
    found = re.search(
        r"([\d,]+) → ([\d,]+) tool tokens \(([\d.]+)% saved; [^)]*\),\s+gold tool sent for (\d+)/(\d+)", guide
    )
    recall = re.search(r"\(`sk-toolfilter eval --tools\s+examples/data/bfcl/tools.jsonl --queries examples/data/bfcl/dev.jsonl`\) recall@5 is ([\d.]+)", guide)  # fmt: skip  # noqa: E501
    assert found and recall, "the report guide's BFCL sentence changed: update this test with it"
    spec = load_agent_file(ROOT / "examples" / "bfcl_catalog.yaml")
    queries = _read_queries(ROOT / "examples" / "data" / "bfcl" / "dev.jsonl")[:50]
    async with await open_toolset(spec) as tools:
        await tools.manager.vectors_ready()
        report = await build_token_report(spec, tools.kernel, tools.manager, queries)
    t = report.totals
    sent, checked = t["expected_tool_sent"].split("/")
    off, on, saved, *gold = found.groups()
    assert (off, gold) == (f"{t['tools_tokens_off']:,}", [sent, checked])
    assert within(on, t["tools_tokens_on"]) and within(saved, t["saved_percent"], absolute=0.1)
    out = tmp_path / "eval"
    data = ROOT / "examples" / "data" / "bfcl"
    argv = ["eval", "--tools", str(data / "tools.jsonl"), "--queries", str(data / "dev.jsonl"), "--methods", "hybrid"]
    assert await asyncio.to_thread(main, [*argv, "--out", str(out)]) == 0
    measured = json.loads((out / "eval.json").read_text())["methods"]["hybrid"]["recall@5"]
    assert recall.group(1) == f"{measured:.3f}"
