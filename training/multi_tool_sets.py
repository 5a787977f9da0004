"""Public multi-tool request sets outside the evaluation families, converted to the dev halves' format.

Each source (:data:`training.sources.MULTI_TOOL_SETS`: repository, commit, paths, licence) is read
from a plain checkout of its pinned commit (``git archive <commit> | tar -x``) and written as
``<out>/<catalog>/tools.jsonl`` + ``dev.jsonl`` (``id``, ``query``, ``gold`` full names,
``category``), one folder per catalog, so ``<out>`` serves as ``--root`` beside the benchmarks.
``<out>/families.json`` maps each family (the unit a leave-one-catalog-out fold holds out) to its
catalogs. Every request whose gold tool is not in its catalog (or was dropped) is dropped.

Dropped first, by the issue's rules: every NESTFUL Glaive-part function whose name or description
matches a bfcl tool (the bfcl family is evaluated), and the NESTFUL executable part's APIs on the
RapidAPI hosts ``weatherapi-com`` and ``coronavirus-smartable`` (also in the ToolBench pool).

    python -m training.multi_tool_sets --checkout callnavi=PATH --checkout nestful=PATH \\
        --checkout restbench=PATH --checkout acebench=PATH --checkout tooltalk=PATH \\
        --checkout apibank=PATH --out training/out/multi
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from training.sources import BENCHMARKS, MULTI_TOOL_SETS

_SAFE = re.compile(r"[^0-9A-Za-z_\-]")
_PLUGIN_SAFE = re.compile(r"[^0-9A-Za-z_]")


@dataclass
class Catalog:
    """One converted catalog: its tools (by their converted name) and its labelled requests."""

    name: str
    family: str
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)
    dropped_requests: int = 0

    def add_tool(self, name: str, description: str, schema: dict[str, Any]) -> str:
        function = _SAFE.sub("_", name.strip())
        self.tools.setdefault(
            function,
            {"plugin": self.name, "name": function, "description": description.strip(), "parameters": schema},
        )
        return function

    def add_request(self, rid: str, query: str, gold: Iterable[str], category: str = "") -> None:
        names = list(dict.fromkeys(_SAFE.sub("_", g.strip()) for g in gold))
        if not query.strip() or not names or any(n not in self.tools for n in names):
            self.dropped_requests += 1
            return
        self.requests.append(
            {"id": rid, "query": query.strip(), "gold": [f"{self.name}-{n}" for n in names], "category": category}
        )

    def write(self, out: Path) -> None:
        folder = out / self.name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tools.jsonl").write_text("".join(json.dumps(t) + "\n" for t in self.tools.values()))
        (folder / "dev.jsonl").write_text("".join(json.dumps(r) + "\n" for r in self.requests))


def _object_schema(properties: dict[str, dict[str, Any]], required: Iterable[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": [r for r in required if r in properties]}


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


# --- CallNavi ------------------------------------------------------------------------------------


def callnavi(root: Path) -> Iterator[Catalog]:
    """``Dataset/APIs/<domain>.json`` (``api_ports``: name, parameters as name -> type, description)
    and ``Dataset/Questions/<domain>.json`` (the first user message -> ``ground_truth.API``)."""
    for apis_file in sorted((root / "Dataset" / "APIs").glob("*.json")):
        domain = apis_file.stem
        catalog = Catalog(f"callnavi_{domain}", "callnavi")
        for api in _load(apis_file).get("api_ports", []):
            params = api.get("parameters") or {}
            if isinstance(params, list):  # some domains list the names only
                params = dict.fromkeys(map(str, params), "string")
            props = {str(k): {"type": str(v) if isinstance(v, str) else "string"} for k, v in params.items()}
            catalog.add_tool(api["name"], str(api.get("description") or ""), _object_schema(props, props))
        for q in _load(root / "Dataset" / "Questions" / f"{domain}.json"):
            user = next((m["content"] for m in q.get("question", []) if m.get("role") == "user"), "")
            catalog.add_request(q["id"], user, q.get("ground_truth", {}).get("API", []), q.get("difficulty", ""))
        yield catalog


# --- NESTFUL -------------------------------------------------------------------------------------

NESTFUL_DROPPED_HOSTS = ("weatherapi-com", "coronavirus-smartable")


def _nestful_schema(spec: dict[str, Any]) -> dict[str, Any]:
    arguments = spec.get("parameters") or spec.get("arguments") or spec.get("query_parameters") or {}
    props: dict[str, dict[str, Any]] = {}
    required = []
    for name, arg in arguments.items() if isinstance(arguments, dict) else []:
        arg = arg if isinstance(arg, dict) else {}
        props[name] = {"type": str(arg.get("type", "string")), "description": str(arg.get("description", ""))}
        if arg.get("allowed_values"):
            props[name]["enum"] = arg["allowed_values"]
        if arg.get("required"):
            required.append(name)
    return _object_schema(props, required)


def _normal(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def _bfcl_keys(benchmarks: Path) -> tuple[set[str], set[str]]:
    names, descriptions = set(), set()
    for line in (benchmarks / "bfcl" / "tools.jsonl").read_text(encoding="utf-8").splitlines():
        tool = json.loads(line)
        names.add(_normal(tool["name"]))
        names.add(_normal(tool["name"].rsplit(".", 1)[-1]))
        descriptions.add(_normal(tool.get("description", "")))
    return names, descriptions - {""}


def nestful(root: Path, benchmarks: Path) -> Iterator[Catalog]:
    """``data/<part>/*-spec.json`` (the catalog) and ``*-data.json`` (``input`` -> the called names)."""
    bfcl_names, bfcl_descriptions = _bfcl_keys(benchmarks)
    parts = {
        "nestful_executable": ("executable/executable", "host"),
        "nestful_glaive": ("non-executable/non-executable-glaive", "bfcl"),
        "nestful_sgd": ("non-executable/non-executable-sgd", None),
    }
    for name, (stem, rule) in parts.items():
        catalog = Catalog(name, "nestful")
        dropped = 0
        for spec in _load(root / "data" / f"{stem}-spec.json"):
            host = str(spec.get("host", ""))
            if rule == "host" and any(host.startswith(h) for h in NESTFUL_DROPPED_HOSTS):
                dropped += 1
                continue
            if rule == "bfcl" and (
                _normal(spec["name"]) in bfcl_names or _normal(spec.get("description", "")) in bfcl_descriptions
            ):
                dropped += 1
                continue
            catalog.add_tool(spec["name"], str(spec.get("description", "")), _nestful_schema(spec))
        print(f"{name}: {dropped} tools dropped by the source rules", file=sys.stderr)
        for i, item in enumerate(_load(root / "data" / f"{stem}-data.json")):
            gold = [c["name"] for c in item.get("output", []) if c.get("name") != "var_result"]
            catalog.add_request(f"{name}_{i}", str(item.get("input", "")), gold)
        yield catalog


# --- RestBench -----------------------------------------------------------------------------------


def restbench(root: Path) -> Iterator[Catalog]:
    """``specs/<api>_oas.json`` (one tool per method and path) and ``datasets/<api>.json``
    (``query`` -> ``solution``, each ``"GET /path"``)."""
    for api in ("tmdb", "spotify"):
        catalog = Catalog(f"restbench_{api}", "restbench")
        spec = _load(root / "specs" / f"{api}_oas.json")
        for path, item in spec.get("paths", {}).items():
            shared = item.get("parameters", [])
            for method, operation in item.items():
                if method == "parameters" or not isinstance(operation, dict):
                    continue
                props, required = {}, []
                for p in [*shared, *operation.get("parameters", [])]:
                    if isinstance(p, dict) and p.get("name"):
                        props[p["name"]] = {
                            "type": str((p.get("schema") or {}).get("type", "string")),
                            "description": str(p.get("description", ""))[:300],
                        }
                        if p.get("required"):
                            required.append(p["name"])
                summary = str(operation.get("summary", "")).strip()
                description = str(operation.get("description", "")).strip()
                text = f"{summary}. {description}" if summary and description else summary or description
                catalog.add_tool(_rest_name(method, path), text, _object_schema(props, required))
        for i, item in enumerate(_load(root / "datasets" / f"{api}.json")):
            gold = [_rest_name(*s.split(" ", 1)) for s in item.get("solution", []) if " " in s]
            catalog.add_request(f"{api}_{i}", str(item.get("query", "")), gold)
        yield catalog


def _rest_name(method: str, path: str) -> str:
    words = [w.strip("{}") for w in path.strip("/").split("/") if w]
    return "_".join([method.upper(), *words])


# --- ACEBench ------------------------------------------------------------------------------------


def acebench(root: Path) -> Iterator[Catalog]:
    """Every function of ``data_all/data_en/*.json`` is one catalog (2,300+ functions; the other files'
    functions are the negatives); requests: ``data_normal_single_turn_parallel_function.json`` ->
    the function names of its ``possible_answer`` ground truth."""
    folder = root / "data_all" / "data_en"
    catalog = Catalog("acebench", "acebench")
    for path in sorted(folder.glob("*.json")):
        for line in path.read_text(encoding="utf-8").splitlines():
            for function in json.loads(line).get("function", []) if line.strip() else []:
                if isinstance(function, dict) and function.get("name"):
                    schema = function.get("parameters") if isinstance(function.get("parameters"), dict) else {}
                    catalog.add_tool(function["name"], str(function.get("description", "")), schema or {})
    stem = "data_normal_single_turn_parallel_function.json"
    answers = {}
    for line in (folder / "possible_answer" / stem).read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            truth = item.get("ground_truth")
            truth = truth if isinstance(truth, list) else [truth]
            answers[item["id"]] = [name for t in truth if isinstance(t, dict) for name in t]
    for line in (folder / stem).read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            query = re.sub(r"^\s*user:\s*", "", str(item.get("question", ""))).strip()
            # a function called several times is answered as name_1, name_2, ...
            gold = [re.sub(r"_\d+$", "", g) if g not in catalog.tools else g for g in answers.get(item["id"], [])]
            catalog.add_request(item["id"], query, gold)
    yield catalog


# --- ToolTalk ------------------------------------------------------------------------------------


def _literal_api_classes(folder: Path, parameters_key: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(class name, description, JSON schema) of every class in ``folder/*.py`` whose ``description`` and
    `parameters_key` attributes are literals — read with ``ast``, never imported (ToolTalk, API-Bank)."""
    for path in sorted(folder.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef):
                continue
            attrs: dict[str, Any] = {}
            for statement in node.body:
                if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
                    try:
                        attrs[statement.targets[0].id] = ast.literal_eval(statement.value)
                    except ValueError:
                        continue
            params = attrs.get(parameters_key)
            if isinstance(attrs.get("description"), str) and isinstance(params, dict):
                props = {
                    k: {"type": str(v.get("type", "string")), "description": str(v.get("description", ""))}
                    for k, v in params.items()
                    if isinstance(v, dict)
                }
                # ToolTalk marks required parameters; API-Bank's are all required
                required = [k for k, v in params.items() if not isinstance(v, dict) or v.get("required", True)]
                yield node.name, attrs["description"], _object_schema(props, required)


def tooltalk(root: Path) -> Iterator[Catalog]:
    """One catalog of every ToolTalk API; a request is a conversation's first user turn -> the APIs the
    assistant calls before the user speaks again (conversations whose first reply calls none: dropped)."""
    catalog = Catalog("tooltalk", "tooltalk")
    for name, description, schema in _literal_api_classes(root / "src" / "tooltalk" / "apis", "parameters"):
        catalog.add_tool(name, description, schema)
    for split in ("easy", "tooltalk"):
        for path in sorted((root / "data" / split).glob("*.json")):
            conversation = _load(path).get("conversation", [])
            users = [i for i, turn in enumerate(conversation) if turn.get("role") == "user"]
            if not users:
                continue
            end = users[1] if len(users) > 1 else len(conversation)
            called = [
                api["request"]["api_name"]
                for turn in conversation[users[0] + 1 : end]
                for api in turn.get("apis") or []
            ]
            catalog.add_request(f"{split}/{path.stem}", conversation[users[0]]["text"], called, split)
    yield catalog


# --- API-Bank ------------------------------------------------------------------------------------


def apibank(root: Path) -> Iterator[Catalog]:
    """``api-bank/apis/*.py`` (each API's ``description`` and ``input_parameters``, read with ``ast``)
    and the level-1 samples: the first user turn -> every API the dialogue calls (the assistant asks
    for credentials or details before calling, so the first reply rarely calls anything)."""
    folder = root / "api-bank"
    catalog = Catalog("apibank", "apibank")
    for name, description, schema in _literal_api_classes(folder / "apis", "input_parameters"):
        catalog.add_tool(name, description, schema)
    for path in sorted((folder / "lv1-lv2-samples" / "level-1-given-desc").glob("*.jsonl")):
        turns = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        users = [i for i, t in enumerate(turns) if t.get("role") == "User"]
        if not users:
            continue
        called = [t.get("api_name", "") for t in turns[users[0] + 1 :] if t.get("role") == "API"]
        catalog.add_request(path.stem, str(turns[users[0]].get("text", "")), [c for c in called if c])
    yield catalog


CONVERTERS = {
    "callnavi": lambda root, _: callnavi(root),
    "nestful": nestful,
    "restbench": lambda root, _: restbench(root),
    "acebench": lambda root, _: acebench(root),
    "tooltalk": lambda root, _: tooltalk(root),
    "apibank": lambda root, _: apibank(root),
}


def convert(checkouts: dict[str, Path], out: Path, benchmarks: Path = BENCHMARKS) -> dict[str, list[str]]:
    """Convert every named checkout; returns (and writes as ``families.json``) family -> catalogs."""
    unknown = set(checkouts) - set(CONVERTERS)
    if unknown:
        raise SystemExit(f"unknown sources: {', '.join(sorted(unknown))} (known: {', '.join(CONVERTERS)})")
    families: dict[str, list[str]] = {}
    for source, root in checkouts.items():
        for catalog in CONVERTERS[source](root, benchmarks):
            catalog.write(out)
            families.setdefault(catalog.family, []).append(catalog.name)
            multi = sum(len(r["gold"]) > 1 for r in catalog.requests)
            print(
                f"{catalog.name:24} {len(catalog.tools):5} tools  {len(catalog.requests):4} requests "
                f"({multi} need 2+)  {catalog.dropped_requests} dropped",
                file=sys.stderr,
            )
    (out / "families.json").write_text(json.dumps(families, indent=2) + "\n")
    return families


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", action="append", default=[], help="SOURCE=PATH (a checkout at the pinned commit)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--benchmarks", type=Path, default=BENCHMARKS)
    args = parser.parse_args(argv)
    checkouts = {}
    for item in args.checkout:
        source, _, path = item.partition("=")
        checkouts[source] = Path(path)
    known = {s.name for s in MULTI_TOOL_SETS}
    if set(checkouts) - known:
        parser.error(f"no pinned source named {sorted(set(checkouts) - known)}; see training/sources.py")
    convert(checkouts, args.out, args.benchmarks)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
