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
    """The headline figures: the catalog's tokens exactly (no ranking involved), the saving within the
    spread int8 inference may cause on another CPU, every expected tool sent (one miss allowed)."""
    import re

    import yaml

    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import parse_agent
    from sk_toolfilter.measure.report import build_token_report

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"sends ([\d,]+) tool-schema tokens over its (\d+) sample queries\s+without filtering and "
                      r"about ([\d,]+) with it — about (\d+) % saved", readme)  # fmt: skip
    assert found, "the README's headline sentence changed: update this test with it"
    off, queries, on, saved = (int(g.replace(",", "")) for g in found.groups())
    data = yaml.safe_load((ROOT / "agent.yaml").read_text())
    for source in data["tools"]:
        if "init" in source:
            source["init"]["root"] = str(tmp_path / "sandbox")
    spec = parse_agent(data, base_dir=ROOT)
    async with await open_toolset(spec) as tools:
        report = await build_token_report(spec, tools.kernel, tools.manager, spec.sample_queries)
    totals = report.totals
    assert (totals["tools_tokens_off"], totals["queries"]) == (off, queries)
    assert abs(totals["saved_percent"] - saved) <= 1.5 and abs(totals["tools_tokens_on"] - on) <= 0.15 * on
    sent, checked = (int(n) for n in totals["expected_tool_sent"].split("/"))
    assert sent == checked  # the README says every expected tool is sent: a ranking, robust to int8 noise
    # The report guide's table states the same run's figures: the catalog exactly, the rest within the band.
    guide = (ROOT / "docs" / "guides" / "report.md").read_text(encoding="utf-8")
    row = re.search(r"\| tools tokens \(all queries\) \| ([\d,]+) \| ([\d,]+) \| \*\*([\d.]+)%\*\* \|", guide)
    tools_row = re.search(r"\| mean tools sent \| (\d+) \| ([\d.]+) ", guide)
    assert row and tools_row, "the report guide's table changed: update this test with it"
    assert int(row.group(1).replace(",", "")) == totals["tools_tokens_off"]
    assert abs(int(row.group(2).replace(",", "")) - totals["tools_tokens_on"]) <= 0.15 * totals["tools_tokens_on"]
    assert abs(float(row.group(3)) - totals["saved_percent"]) <= 1.5
    assert abs(float(tools_row.group(2)) - totals["mean_tools_on"]) <= 0.5
