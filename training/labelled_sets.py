"""The labelled catalogs training and the benchmarks read: the dev halves (bfcl_multiturn's turn
requests in the bfcl family: one repository, one fold) and the converted multi-tool sets
(:mod:`training.multi_tool_sets`), each with the family a leave-one-family-out fold holds out."""

from __future__ import annotations

import json
from pathlib import Path

from training.sources import RETRIEVAL_SETS

# The dev sets are families of their own; bfcl_multiturn's turn requests belong to the bfcl family
# (one repository, one fold).
DEV_FAMILIES = {name: name for name in RETRIEVAL_SETS} | {"bfcl_multiturn": "bfcl"}


def catalogs(benchmarks: Path, multi: Path | None) -> list[tuple[str, str, Path]]:
    """(family, catalog, folder) of every catalog with labelled requests."""
    found = [(DEV_FAMILIES[name], name, benchmarks / name) for name in DEV_FAMILIES]
    if multi is not None:
        families = json.loads((multi / "families.json").read_text())
        found += [(family, name, multi / name) for family, names in families.items() for name in names]
    return found


def turn_requests(folder: Path) -> list[tuple[str, str, list[str]]]:
    """bfcl_multiturn: each turn's user request -> every tool its steps call (the first step's row)."""
    turns: dict[str, tuple[str, list[str]]] = {}
    for line in (folder / "dev.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        key = f"{row['entry']}/t{row['turn']}"
        user = next(m["content"] for m in reversed(row["messages"]) if m["role"] == "user")
        _, gold = turns.setdefault(key, (user, []))
        gold.extend(g for g in row["gold"] if g not in gold)
    return [(key, query, gold) for key, (query, gold) in turns.items()]
