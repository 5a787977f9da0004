"""HoloDeck's ``agent.yaml`` keys mapped onto this library's agent file, before validation.

HoloDeck (whose ``tool_filtering`` block this library grew from) writes some settings elsewhere or
has settings with no meaning here. Each key is either mapped (``model.temperature`` →
``model.options.temperature``, ``instructions.inline`` → ``instructions``, MCP ``timeout`` →
``startup_timeout_seconds``, ``model.provider: ollama`` → an OpenAI-compatible ``base_url``) or
accepted and dropped with one warning naming it. Keys neither format knows stay, so validation
still reports typos.
"""

from __future__ import annotations

import re
from typing import Any

from sk_toolfilter.basics.redaction import library_logger

logger = library_logger(__name__)

IGNORED_TOP_LEVEL = (
    "author",
    "evaluations",
    "execution",
    "observability",
    "deployment",
    "embedding_provider",
    "claude",
    "openai",
)
# Keys only HoloDeck writes at the top level: dropped (a response_format schema is mapped first).
HOLODECK_TOP_LEVEL = (*IGNORED_TOP_LEVEL, "response_format")
MODEL_OPTIONS = ("temperature", "max_tokens", "top_p")
IGNORED_MODEL = ("auth_provider",)
IGNORED_MCP = (
    "encoding",
    "env_file",
    "sse_read_timeout",
    "terminate_on_close",
    "config",
    "load_tools",
    "is_retrieval",
    "registry_name",
)
OLLAMA_BASE_URL = "http://localhost:11434/v1"


def adapt_holodeck(data: dict[str, Any], source: str) -> dict[str, Any]:
    """A copy of `data` with HoloDeck's keys mapped or dropped (one warning per dropped key)."""
    data = dict(data)
    holodeck = _is_holodeck(data, data.get("test_cases"))
    cases = data.pop("test_cases", None)
    if isinstance(cases, list) and "sample_queries" not in data:
        # HoloDeck's test cases are the report's queries: the input, and the tools it expects.
        data["sample_queries"] = [
            {"query": c["input"], "expect": list(c.get("expected_tools") or [])}
            for c in cases
            if isinstance(c, dict) and isinstance(c.get("input"), str)
        ]
    schema, model_block = data.get("response_format"), data.get("model")
    options_block = model_block.get("options") if isinstance(model_block, dict) else None
    if isinstance(schema, dict) and isinstance(model_block, dict) and isinstance(options_block or {}, dict):
        # (model.options that is no mapping is left to validation, which names it)
        # HoloDeck's structured output: a JSON schema the answer must follow (OpenAI's json_schema format).
        data.pop("response_format")
        model = dict(model_block)
        options = dict(options_block or {})
        options.setdefault("response_format", _json_schema_format(str(data.get("name") or "answer"), schema))
        model["options"] = options
        data["model"] = model
    ignored = [key for key in HOLODECK_TOP_LEVEL if key in data]
    for key in ignored:
        del data[key]
    if isinstance(data.get("model"), dict):
        data["model"], dropped = _model(data["model"])
        ignored += [f"model.{key}" for key in dropped]
    instructions = data.get("instructions")
    if isinstance(instructions, dict) and "inline" in instructions and "file" not in instructions:
        data["instructions"] = instructions["inline"]
    if isinstance(data.get("tools"), list):
        tools = []
        for position, tool in enumerate(data["tools"]):
            adapted, dropped = _tool(tool) if isinstance(tool, dict) else (tool, [])
            ignored += [f"tools[{position}].{key}" for key in dropped]
            tools.append(adapted)
        data["tools"] = tools
    filtering = data.get("tool_filtering")
    if holodeck and isinstance(filtering, dict) and "top_k" in filtering:
        # HoloDeck's top_k counts the always-included tools; ours ranks top_k tools and pins on top.
        filtering = dict(filtering)
        filtering.setdefault("max_tools_total", filtering["top_k"])
        data["tool_filtering"] = filtering
    if ignored:
        logger.warning(
            "sk-toolfilter: %s: %s have no meaning here (HoloDeck settings) and are ignored", source, ", ".join(ignored)
        )
    return data


def _json_schema_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's ``response_format`` for a JSON schema (not strict: HoloDeck's schemas need not list
    every property as required, which strict mode demands)."""
    safe = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "answer"
    return {"type": "json_schema", "json_schema": {"name": safe, "schema": schema, "strict": False}}


def _is_holodeck(data: dict[str, Any], cases: Any) -> bool:
    """A file written for HoloDeck: it carries keys only HoloDeck writes."""
    instructions = data.get("instructions")
    holodeck_instructions = isinstance(instructions, dict) and bool({"inline", "file"} & set(instructions))
    return cases is not None or holodeck_instructions or any(key in data for key in HOLODECK_TOP_LEVEL)


def _model(model: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    model = dict(model)
    if model.get("options") is not None and not isinstance(model["options"], dict):
        return model, []  # left to validation, which names the key and what it expects
    options = dict(model.get("options") or {})
    for key in MODEL_OPTIONS:
        if key in model:
            options.setdefault(key, model.pop(key))
    if options:
        model["options"] = options
    if model.get("provider") == "ollama":
        model["provider"] = "openai"  # Ollama serves the OpenAI API
        model.setdefault("base_url", (model.pop("endpoint", None) or OLLAMA_BASE_URL).rstrip("/"))
    dropped = [key for key in IGNORED_MODEL if key in model]
    for key in dropped:
        del model[key]
    return model, dropped


def _tool(tool: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    tool = dict(tool)
    kind = tool.get("type")
    # HoloDeck: deferred tools are found by search (ours: every tool is searchable); a tool that is
    # not deferred is loaded up front (ours: sent with every request).
    if "defer_loading" in tool and kind in ("mcp", "plugin", "catalog") and tool.pop("defer_loading") is False:
        tool.setdefault("always_include", True)
    dropped: list[str] = []
    if kind == "mcp":
        if "timeout" in tool:
            tool.setdefault("startup_timeout_seconds", tool.pop("timeout"))
        dropped = [key for key in IGNORED_MCP if key in tool]
    for key in dropped:
        del tool[key]
    return tool, dropped
