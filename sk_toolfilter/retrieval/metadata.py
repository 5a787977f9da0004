"""The framework-neutral tool description the index crawls, and the readers that make one.

:class:`ToolMetadata` is all ranking knows of a tool. It is made from a JSON schema
(:func:`tool_from_schema`, what every framework can give), from a Semantic Kernel function
(:func:`tool_from_function`, read by attribute) or from an Agent Framework tool
(:mod:`sk_toolfilter.agent_framework.tools`). Nothing here imports an agent framework.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from sk_toolfilter.retrieval.gloss import with_english_gloss
from sk_toolfilter.retrieval.text import clean_text, humanize_identifier


def _clean_fields(record: object, *names: str) -> None:
    for name in names:
        value = getattr(record, name)
        if isinstance(value, str):
            cleaned = clean_text(value)
            if cleaned is not value:
                object.__setattr__(record, name, cleaned)


RERANK_DESCRIPTION_CHARS = 160
"""A tool's description is cut to this many characters for the reranker (a pair is cut to 64 tokens
anyway; a shorter text costs fewer tokens per pair)."""


@dataclass(frozen=True)
class ParameterMetadata:
    """One parameter of a tool, as the model sees it."""

    name: str
    type: str = "str"
    description: str = ""
    required: bool = False
    schema: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        _clean_fields(self, "name", "type", "description")


@dataclass(frozen=True)
class ToolMetadata:
    """What the index knows of one tool.

    ``full_name`` is the name the model sees and calls: for a Semantic Kernel function
    ``Plugin-function`` (the only form ``FunctionChoiceBehavior`` filters accept), for an Agent
    Framework tool its own name. ``plugin`` groups tools (SK plugin, MCP server; may be empty).
    """

    plugin: str
    name: str
    full_name: str
    description: str = ""
    parameters: tuple[ParameterMetadata, ...] = ()
    keywords: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        # The one boundary every tool text passes: no index, cache, tokenizer or service ever sees
        # a string that cannot be encoded (a lone surrogate from a plugin or an MCP server).
        _clean_fields(self, "plugin", "name", "full_name", "description")
        if any(clean_text(k) is not k for k in self.keywords):
            object.__setattr__(self, "keywords", tuple(clean_text(k) for k in self.keywords))

    def lexical_fields(self) -> dict[str, str]:
        """Text per indexed field: name, plugin, description, parameters, keywords (Chinese glossed)."""
        params = " ".join(f"{p.name} {p.description}" for p in self.parameters)
        return {
            "name": self.name,
            "plugin": self.plugin,
            "description": with_english_gloss(self.description),
            "parameters": with_english_gloss(params),
            "keywords": with_english_gloss(" ".join(self.keywords)),
        }

    @cached_property
    def rerank_text(self) -> str:
        """What the second stage reads of the tool (:mod:`sk_toolfilter.retrieval.rerank`): readable name,
        the start of its description, parameter names (computed once)."""
        description = " ".join(with_english_gloss(self.description.strip()).split())[:RERANK_DESCRIPTION_CHARS]
        text = f"{humanize_identifier(self.name)}: {description}"
        if self.parameters:
            text += " (" + ", ".join(humanize_identifier(p.name) for p in self.parameters) + ")"
        return text

    @cached_property
    def _embedding_text(self) -> str:
        return self._compose_embedding_text()

    def embedding_text(self) -> str:
        """The text embedded for semantic search: readable name, description, parameters (computed once).

        Chinese text is followed by its English gloss (:mod:`sk_toolfilter.retrieval.gloss`)."""
        return self._embedding_text

    def _compose_embedding_text(self) -> str:
        text = f"{humanize_identifier(self.name)}: {with_english_gloss(self.description.strip())}"
        params = [
            f"{humanize_identifier(p.name)} ({with_english_gloss(p.description.strip())})"
            if p.description
            else humanize_identifier(p.name)
            for p in self.parameters
        ]
        if params:
            text += " Parameters: " + "; ".join(params)
        if self.keywords:
            text += " Keywords: " + with_english_gloss(", ".join(self.keywords))
        return text


KEYWORDS_PROPERTY = "sk_toolfilter_keywords"
"""A kernel function's ``metadata.additional_properties`` entry: words ranking matches besides its
texts (a vectorstore tool lists what its documents are about). Never sent to the model."""


def tool_from_schema(
    name: str,
    description: str,
    parameters: dict[str, Any] | None,
    *,
    plugin: str = "",
    full_name: str | None = None,
    keywords: Any = (),
) -> ToolMetadata:
    """A tool description from its name, description and JSON-schema ``parameters`` (an object schema,
    as OpenAI-style function calling sends it). Every framework's tools reach the index this way."""
    schema = parameters if isinstance(parameters, dict) else {}
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    listed = schema.get("required")
    required = set(listed) if isinstance(listed, list | tuple) else set()
    params = tuple(
        ParameterMetadata(
            name=str(param_name),
            type=str(param.get("type") or "object") if isinstance(param, dict) else "object",
            description=str(param.get("description") or "") if isinstance(param, dict) else "",
            required=param_name in required,
            schema=_without_titles(param) if isinstance(param, dict) else None,
        )
        for param_name, param in properties.items()
    )
    return ToolMetadata(
        plugin=plugin,
        name=name,
        full_name=full_name or name,
        description=description or "",
        parameters=params,
        keywords=tuple(str(word) for word in keywords) if isinstance(keywords, list | tuple) else (),
    )


def _without_titles(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter schema without pydantic's generated ``title`` (noise to the model and to ranking)."""
    return {k: v for k, v in schema.items() if k != "title"}


def tool_from_function(function: Any) -> ToolMetadata:
    """The tool description of one Semantic Kernel ``KernelFunction`` (read by attribute)."""
    meta = function.metadata
    extra = (meta.additional_properties or {}).get(KEYWORDS_PROPERTY) or ()
    params = tuple(
        ParameterMetadata(
            name=p.name or "",
            type=p.type_ or "str",
            description=p.description or "",
            required=bool(p.is_required),
            schema=p.schema_data,
        )
        for p in meta.parameters
        if p.include_in_function_choices
    )
    return ToolMetadata(
        plugin=meta.plugin_name or "",
        name=meta.name,
        full_name=meta.fully_qualified_name,
        description=meta.description or "",
        parameters=params,
        keywords=tuple(str(word) for word in extra) if isinstance(extra, list | tuple) else (),
    )


def crawl_kernel(kernel: Any) -> list[ToolMetadata]:
    """One record per function of every plugin of an SK kernel, in kernel order (the order SK sends tools)."""
    return [
        tool_from_function(function) for plugin in kernel.plugins.values() for function in plugin.functions.values()
    ]


def openai_tool_definition(tool: ToolMetadata) -> dict[str, Any]:
    """The tool as an OpenAI ``tools`` entry (the shape SK's OpenAI connector sends)."""
    properties = {p.name: dict(p.schema) if p.schema else {"type": "string"} for p in tool.parameters}
    for p in tool.parameters:
        if p.description and "description" not in properties[p.name]:
            properties[p.name]["description"] = p.description
    return {
        "type": "function",
        "function": {
            "name": tool.full_name,
            "description": tool.description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": [p.name for p in tool.parameters if p.required],
            },
        },
    }
