"""Write the generated pages of the docs site: the configuration reference (from the pydantic models),
the CLI reference (from the argument parser) and the changelog (CHANGELOG.md).

    python docs/gen_reference.py        # after changing a configuration key, a command or CHANGELOG.md

The pages are generated, never edited by hand, and committed (a fresh clone builds the site and the
README's links lead somewhere); tests/test_docs.py checks that every configuration key has a
description and that the committed pages are exactly what this script makes now.
"""

from __future__ import annotations

import argparse
import enum
import sys
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a!r}`" if not isinstance(a, str) else f"`{a}`" for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " \\| ".join(_type_name(a) for a in args)
    if origin in (list, tuple, set):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_type_name(args[0])} to {_type_name(args[1])}" if args else "mapping"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    return getattr(annotation, "__name__", str(annotation)).replace("SecretStr", "secret string")


def _bounds(info: FieldInfo) -> str:
    marks = []
    for meta in info.metadata:
        for attribute, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<")):
            value = getattr(meta, attribute, None)
            if value is not None:
                marks.append(f"{sign} {value}")
        for attribute, label in (("min_length", "length ≥"), ("max_length", "length ≤"), ("pattern", "pattern")):
            value = getattr(meta, attribute, None)
            if value is not None:
                marks.append(f"{label} `{value}`")
    return ", ".join(marks)


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "(its defaults)"
        return f"`{value!r}`" if value not in ({}, []) else "empty"
    if info.is_required():
        return "required"
    value = info.default
    return "`null`" if value is None else f"`{value!r}`" if not isinstance(value, str) else f"`{value}`"


def field_description(info: FieldInfo) -> str | None:
    return (info.description or "").strip() or None


def models_of(model: type[BaseModel]) -> list[type[BaseModel]]:
    """`model` and every model its fields hold, in reading order."""
    seen: list[type[BaseModel]] = []

    def visit(current: type[BaseModel]) -> None:
        if current in seen:
            return
        seen.append(current)
        for info in current.model_fields.values():
            for candidate in _nested(info.annotation):
                visit(candidate)

    visit(model)
    return seen


def _nested(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _nested(arg)]


def configuration_reference() -> str:
    from sk_toolfilter.config import ToolFilterConfig

    out = [
        "# Configuration reference",
        "",
        "Generated from the pydantic models by `docs/gen_reference.py`: every key of the `tool_filtering`",
        "block of an agent file (and of `ToolFilterConfig`), its type, default, bounds and meaning. Unknown",
        "keys, NaN and infinity are errors that name the key.",
    ]
    for model in models_of(ToolFilterConfig):
        name = "tool_filtering" if model is ToolFilterConfig else model.__name__
        out += [
            "",
            f"## {model.__name__}",
            "",
            f"`{name}`" + (" — " + " ".join((model.__doc__ or "").split()) if model.__doc__ else ""),
            "",
        ]
        out += ["| key | type | default | bounds | description |", "|---|---|---|---|---|"]
        for key, info in model.model_fields.items():
            shown = info.alias or key
            description = (field_description(info) or "").replace("|", "\\|")
            out.append(
                f"| `{shown}` | {_type_name(info.annotation)} | {_default(info)} | {_bounds(info)} | {description} |"
            )
    return "\n".join(out) + "\n"


AT_A_GLANCE = """
```text
sk-toolfilter validate agent.yaml                      # load, connect, index; tool count per source
sk-toolfilter search agent.yaml "email bob"            # the tools one request gets, best first
sk-toolfilter explain agent.yaml "email bob"           # per tool: scores per method, kept/cut and why
sk-toolfilter report agent.yaml [--queries FILE] [--out DIR] [--model-encoding o200k_base]
sk-toolfilter index push agent.yaml                    # shared store: embed new/changed tools, switch version
sk-toolfilter index status agent.yaml                  # shared store: its version vs this agent's tools
sk-toolfilter chat agent.yaml                          # needs OPENAI_API_KEY or model.base_url
sk-toolfilter eval --tools examples/data/bfcl/tools.jsonl --queries examples/data/bfcl/dev.jsonl --out eval
```

The BFCL catalog and its dev queries ship with the repository (`examples/data/bfcl`, Apache-2.0; its
README gives the source commit). The other public sets (metatool, seal_tools, livemcpbench,
bfcl_multiturn) are converted the same way in the development workspace, one folder per set beside
the repository (`../shared/benchmarks`; each folder's README names its source, commit and licence).
`eval` reports recall@k, complete@k, nDCG@10, MRR, mean tools and schema tokens sent and latency
p50/p95; tool and query embeddings are cached, so re-runs only pay for ranking
(`benchmarks/core_benchmark.py` measures it cold). On each of those folders:

```text
for d in metatool bfcl seal_tools livemcpbench; do
  sk-toolfilter eval --tools ../shared/benchmarks/$d/tools.jsonl \\
    --queries ../shared/benchmarks/$d/dev.jsonl --out eval/$d
done
```

Every command and option, as `--help` prints them:
"""


def cli_reference() -> str:
    import os

    from sk_toolfilter.cli import build_parser

    parser = build_parser()
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal: the page is the same everywhere
    out = [
        "# CLI reference",
        "",
        "Generated from the argument parser by `docs/gen_reference.py`. Every command exits 0 on success;",
        "2 when the input is wrong (a usage or configuration error: one line naming the file and the key);",
        "1 when something failed at run time (an MCP server that does not start, a database or service that",
        "does not answer, `index push` with nothing to push), with one line saying what.",
        "",
        AT_A_GLANCE.strip(),
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
    ]
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, sub in actions[0].choices.items():
        out += ["", f"## sk-toolfilter {name}", "", "```text", sub.format_help().rstrip(), "```"]
    if columns is None:
        del os.environ["COLUMNS"]
    else:
        os.environ["COLUMNS"] = columns
    return "\n".join(out) + "\n"


def write_all() -> dict[Path, str]:
    pages = {
        DOCS / "reference" / "configuration.md": configuration_reference(),
        DOCS / "reference" / "cli.md": cli_reference(),
        DOCS / "changelog.md": (ROOT / "CHANGELOG.md").read_text(encoding="utf-8"),
    }
    for path, text in pages.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return pages


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    for path in write_all():
        print(f"wrote {path.relative_to(ROOT)}")
