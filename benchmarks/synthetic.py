"""Synthetic tool catalogs of any size for benchmarks (deterministic, realistic-looking)."""

from __future__ import annotations

import random

from semantic_kernel import Kernel
from semantic_kernel.functions import KernelFunctionFromMethod, KernelPlugin, kernel_function

from sk_toolfilter.retrieval.metadata import ParameterMetadata, ToolMetadata

VERBS = [
    "get",
    "list",
    "create",
    "update",
    "delete",
    "search",
    "export",
    "import",
    "sync",
    "archive",
    "approve",
    "schedule",
    "cancel",
    "send",
    "validate",
    "summarize",
    "translate",
    "convert",
]
OBJECTS = [
    "invoice",
    "customer",
    "order",
    "ticket",
    "report",
    "file",
    "calendar_event",
    "email",
    "contact",
    "payment",
    "shipment",
    "product",
    "review",
    "user",
    "team",
    "project",
    "task",
    "document",
    "message",
    "alert",
    "metric",
    "dashboard",
    "backup",
    "license",
    "device",
    "campaign",
    "lead",
]
DOMAINS = [
    "crm",
    "billing",
    "support",
    "hr",
    "storage",
    "calendar",
    "mail",
    "shop",
    "logistics",
    "analytics",
    "security",
    "marketing",
    "devops",
    "finance",
    "legal",
    "iot",
    "chat",
    "docs",
    "sales",
    "inventory",
]
QUALIFIERS = [
    "for a date range",
    "by id",
    "with filters",
    "in bulk",
    "for the current user",
    "as CSV",
    "with audit trail",
    "asynchronously",
    "for a team",
    "across regions",
]


def synthetic_tools(n: int, seed: int = 0) -> list[ToolMetadata]:
    """`n` distinct tools spread over plugins named after domains."""
    rng = random.Random(seed)
    tools, seen = [], set()
    i = 0
    while len(tools) < n:
        verb, obj, domain = rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(DOMAINS)
        plugin = f"{domain.capitalize()}{i // 400}"
        name = f"{verb}_{obj}" if (plugin, verb, obj) not in seen else f"{verb}_{obj}_{i}"
        seen.add((plugin, verb, obj))
        i += 1
        qualifier = rng.choice(QUALIFIERS)
        description = f"{verb.capitalize()} a {obj.replace('_', ' ')} in the {domain} system {qualifier}."
        params = (
            ParameterMetadata(f"{obj}_id", "str", f"Identifier of the {obj.replace('_', ' ')}", True),
            ParameterMetadata("limit", "int", "Maximum number of results", False),
        )
        full_name = f"{plugin}-{name}"
        if full_name in {t.full_name for t in tools[-50:]}:
            continue
        tools.append(ToolMetadata(plugin, name, full_name, description, params))
    unique = {t.full_name: t for t in tools}
    return list(unique.values())[:n]


def synthetic_queries(tools: list[ToolMetadata], n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [f"please {t.name.replace('_', ' ')} {t.description.split(' in the ')[1]}" for t in rng.sample(tools, n)]


def synthetic_kernel(tools: list[ToolMetadata]) -> Kernel:
    """A real Kernel whose functions have the given names and descriptions (they return a constant)."""
    kernel = Kernel()
    by_plugin: dict[str, list[ToolMetadata]] = {}
    for tool in tools:
        by_plugin.setdefault(tool.plugin, []).append(tool)
    for plugin, members in by_plugin.items():
        functions = []
        for tool in members:

            @kernel_function(name=tool.name, description=tool.description)
            def run(item_id: str = "") -> str:
                return "ok"

            functions.append(KernelFunctionFromMethod(method=run, plugin_name=plugin))
        kernel.add_plugin(KernelPlugin(name=plugin, functions=functions))
    return kernel
