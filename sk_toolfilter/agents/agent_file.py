"""The ``agent.yaml`` schema: reading, ``${VAR}`` substitution and validation with precise errors."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from sk_toolfilter.agents.declarative import from_sk_declarative, is_sk_declarative
from sk_toolfilter.agents.holodeck import adapt_holodeck
from sk_toolfilter.agents.yaml_reader import read_yaml
from sk_toolfilter.basics.errors import ConfigError, describe_validation_error
from sk_toolfilter.basics.redaction import remember_public, remember_secret
from sk_toolfilter.config import StrictConfig, ToolFilterConfig
from sk_toolfilter.config.base import RememberedConnection, RememberedSecret
from sk_toolfilter.retrieval.text import clean_text

_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*?))?\}")


class _Source(BaseModel):
    """A tool source (a tagged-union member: no wildcard validators may touch its ``type``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ModelSpec(StrictConfig):
    """The chat model. ``provider: openai`` also serves any OpenAI-compatible server via ``base_url``."""

    provider: Literal["openai", "azure_openai"] = "openai"
    name: str = "gpt-4o-mini"
    api_key: RememberedSecret | None = None
    base_url: str | None = None
    endpoint: str | None = None
    api_version: str | None = None
    options: dict[str, Any] = Field(default_factory=dict, description="Execution settings, e.g. temperature.")
    _unset_variables: dict[str, str] = PrivateAttr(default_factory=dict)
    """Settings given as an unset ``${VAR}`` (``{"api_key": "OPENAI_API_KEY"}``): named when a client needs them."""

    def unset_variable(self, key: str) -> str | None:
        """The message for a connection setting left unset by its variable, or None."""
        name = self._unset_variables.get(key)
        return f"model.{key}: environment variable {name} is not set" if name else None

    @field_validator("api_key", "base_url", "endpoint", "api_version", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if value == "" else value


class InstructionsFile(StrictConfig):
    file: str


class _ToolsSource(_Source):
    """A source of several tools: which of them the agent gets, and whether they are always sent."""

    allowed_tools: list[str] | None = Field(
        default=None,
        description="Only these tools of the source (names or globs); its others are hidden (tool_filtering.allow).",
    )
    always_include: bool = Field(
        default=False,
        description="Send every tool of this source with every request (HoloDeck's defer_loading: false).",
    )


class PluginSource(_ToolsSource):
    """A native SK plugin: ``package.module:Class`` (instantiated with ``init``) or a module."""

    type: Literal["plugin"]
    name: str = Field(pattern=r"^[0-9A-Za-z_]+$")
    description: str = ""
    import_path: str = Field(alias="import", pattern=r"^[\w.]+(:[\w.]+)?$")
    init: dict[str, Any] = Field(default_factory=dict)
    optional: bool = False


McpHint = Literal["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]
"""The MCP tool annotation hints (MCP specification, ``ToolAnnotations``)."""


class MCPSource(_ToolsSource):
    """An MCP server: a local process over stdio (``command``) or a remote one over HTTP (``url``).

    ``command: python`` (or ``python3``) runs the current interpreter, and a command that is not on
    ``PATH`` is looked up beside it (a server installed in this virtual environment); ``cwd``
    defaults to the agent file's folder, so relative script paths are relative to the file. ``url``
    speaks streamable HTTP, or SSE for older servers (``transport: sse``, or a URL ending in
    ``/sse``); ``headers`` values usually come from the environment (``${TOKEN}``).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, populate_by_name=True)

    type: Literal["mcp"]
    name: str = Field(pattern=r"^[0-9A-Za-z_]+$")
    description: str = ""
    transport: Literal["stdio", "http", "streamable_http", "sse"] | None = Field(
        default=None, description="Default: stdio with `command`, streamable HTTP with `url` (SSE if it ends in /sse)."
    )
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] | None = Field(default=None, description="Extra environment of the server process.")
    cwd: str | None = Field(default=None, description="Working directory; default: the agent file's folder.")
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP headers, e.g. Authorization.")
    load_prompts: bool = False
    startup_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    request_timeout_seconds: float = Field(
        default=60.0, gt=0, le=86400, alias="request_timeout", description="Bound on one tool call."
    )
    optional: bool = Field(default=False, description="Skip this source, with one warning, when it fails to load.")
    annotations: dict[McpHint, Literal["exclude", "pin"]] = Field(
        default_factory=dict,
        description="What a tool the server marks with an MCP annotation hint gets: 'exclude' (never registered, "
        "sent or run) or 'pin' (sent with every request), e.g. {destructiveHint: exclude, readOnlyHint: pin}.",
    )
    load_hints: bool = Field(
        default=True,
        description="Honour the load hints the server puts in a tool's `_meta`: `alwaysLoad: true` or "
        "`defer_loading: false` (any vendor prefix, e.g. `anthropic/alwaysLoad`) pins the tool; `searchHint` "
        "adds its phrase to what ranking matches.",
    )

    @field_validator("startup_timeout_seconds", "request_timeout_seconds", mode="before")
    @classmethod
    def _seconds_are_numbers(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("expected a number of seconds, not true/false")
        return value

    @model_validator(mode="after")
    def _command_or_url(self) -> MCPSource:
        if self.command and self.url:
            raise ValueError("give either 'command' (a local stdio server) or 'url' (an HTTP server), not both")
        if not self.command and not self.url:
            raise ValueError("needs 'command' (a local stdio server) or 'url' (an HTTP server)")
        if self.url and self.transport == "stdio":
            raise ValueError("'transport: stdio' needs 'command', not 'url'")
        if self.command and self.transport not in (None, "stdio"):
            raise ValueError(f"'transport: {self.transport}' needs 'url', not 'command'")
        return self

    @property
    def kind(self) -> Literal["stdio", "http", "sse"]:
        """The transport actually used."""
        if self.command:
            return "stdio"
        if self.transport == "sse" or (self.transport is None and (self.url or "").rstrip("/").endswith("/sse")):
            return "sse"
        return "http"


class CatalogSource(_ToolsSource):
    """Tool definitions from a JSON/JSONL file, registered as definition-only kernel functions."""

    type: Literal["catalog"]
    name: str = Field(pattern=r"^[0-9A-Za-z_]+$")
    description: str = ""
    path: str
    optional: bool = False


class VectorDatabase(_Source):
    """Where a ``vectorstore`` tool keeps its passages (HoloDeck's ``database:`` block)."""

    provider: str = "in-memory"
    connection_string: RememberedConnection | None = None


class VectorstoreSource(_Source):
    """A document-search tool (HoloDeck's ``type: vectorstore``): passages from ``source`` (a file or a
    folder of JSON / JSONL records, Markdown or text), embedded with the configured embedding service
    and kept in a Semantic Kernel vector-store collection. The function is ``vectorstore-<name>``.
    """

    type: Literal["vectorstore"]
    name: str = Field(pattern=r"^[0-9A-Za-z_]+$")
    description: str = ""
    source: str
    top_k: int = Field(default=5, ge=1, le=50)
    chunk_size: int | None = Field(default=None, ge=100, le=20_000, description="Characters per passage.")
    chunk_overlap: int | None = Field(default=None, ge=0, le=5_000)
    min_similarity_score: float | None = Field(default=None, ge=-1.0, le=1.0)
    vector_field: str | list[str] | None = Field(default=None, description="Record fields embedded as the text.")
    meta_fields: list[str] | None = None
    id_field: str | None = None
    record_path: str | None = Field(default=None, description="Dotted path to the list of records in a JSON file.")
    field_separator: str = "\n"
    embedding_model: str | None = None
    embedding_dimensions: int | None = Field(default=None, gt=0)
    database: VectorDatabase | str | None = None
    allow_outside_agent_folder: bool = Field(
        default=False,
        description="Read a source outside the agent file's folder (symlinks resolved); off: such a source is "
        "an error, so a downloaded agent file cannot serve your other files to the model.",
    )
    # HoloDeck keys with no meaning here: accepted, one warning each (see vectorstore.py).
    record_prefix: str | None = None
    meta_prefix: str | None = None
    delimiter: str | None = None
    defer_loading: bool | None = None
    optional: bool = False


ToolSource = Annotated[PluginSource | MCPSource | CatalogSource | VectorstoreSource, Field(discriminator="type")]


class SampleQuery(StrictConfig):
    """A report query; ``expect`` lists the tools a person would pick for it."""

    query: str
    expect: list[str] = Field(default_factory=list)
    _where: str = PrivateAttr(default="")
    """Where a query read from a file stands (``queries.jsonl:10``), for errors that name it."""

    def located(self, where: str) -> SampleQuery:
        """This query, naming `where` (file and line) in errors about it."""
        self._where = where
        return self

    def expect_key(self, position: int) -> str:
        """How an error names this query's expected tools: the file's line and field, else the agent file's key."""
        return f"{self._where} gold" if self._where else f"sample_queries[{position}].expect"

    @field_validator("query")
    @classmethod
    def _valid_text(cls, value: str) -> str:
        # The one boundary every report query passes (agent files, --queries files): text that is not
        # valid UTF-8 (a lone surrogate) is repaired here, so no service, writer or log line meets it.
        return clean_text(value)


Framework = Literal["semantic-kernel", "agent-framework"]
"""Which framework an agent runs in (an agent file's ``framework``, ``load_agent(framework=...)``)."""
FRAMEWORKS: tuple[str, ...] = get_args(Framework)


class AgentSpec(StrictConfig):
    """An agent file: identity, model, instructions, tool sources and the ``tool_filtering`` block."""

    name: str = Field(pattern=r"^[0-9A-Za-z_-]+$")
    description: str = ""
    model: ModelSpec = Field(default_factory=ModelSpec)
    framework: Framework = Field(
        default="semantic-kernel",
        description="What `load_agent` builds: an SK ChatCompletionAgent, or a Microsoft Agent Framework Agent "
        "(the `agent-framework` extra).",
    )
    instructions: str | InstructionsFile = ""
    tools: list[ToolSource] = Field(default_factory=list)
    functions: list[str] = Field(
        default_factory=list,
        description="Functions of the caller's kernel the agent may call ('Plugin-function'); empty: all "
        "(SK declarative specs' `type: function` tools).",
    )
    tool_filtering: ToolFilterConfig = Field(default_factory=ToolFilterConfig)
    sample_queries: list[SampleQuery] = Field(default_factory=list, description="Queries for `sk-toolfilter report`.")
    sample_conversation: list[str] = Field(
        default_factory=list, description="User turns of one conversation, for the report's prefix-stability figure."
    )
    base_dir: Path = Field(default=Path("."), exclude=True)
    source: str = Field(default="agent", exclude=True, description="The file this spec was read from (for errors).")

    @field_validator("sample_queries", mode="before")
    @classmethod
    def _plain_strings_are_queries(cls, value: Any) -> Any:
        if isinstance(value, list):
            return [{"query": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _unique_source_names(self) -> AgentSpec:
        names = [s.name for s in self.tools]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"tool source names must be unique, repeated: {', '.join(dupes)}")
        return self

    def resolve(self, relative: str) -> Path:
        """A path from the file, relative to the file's folder."""
        path = Path(relative).expanduser()
        return path if path.is_absolute() else self.base_dir / path

    def instructions_text(self) -> str:
        if isinstance(self.instructions, InstructionsFile):
            path = self.resolve(self.instructions.file)
            try:
                return path.read_bytes().decode("utf-8")
            except OSError as exc:
                raise ConfigError(f"{self.source}: instructions.file: cannot read {path} ({exc.strerror})") from None
            except UnicodeDecodeError:
                raise ConfigError(f"{self.source}: instructions.file: {path} is not UTF-8 text") from None
        return self.instructions


# Model connection settings are read only when a model client is built (a chat turn, not validate,
# search, report or eval): a whole ``${VAR}`` there whose variable is unset leaves the setting unset,
# and building the client says what is missing ("model: no API key — set OPENAI_API_KEY ...").
CONNECTION_SETTINGS = frozenset({"model.api_key", "model.base_url", "model.endpoint", "model.api_version"})
DISPLAYED_SETTINGS = frozenset({"name", "framework", "model.provider", "model.name"})
"""Settings whose value is read out in messages on purpose (the model a check refuses is named): a value
from the environment here is not remembered as a secret (every other one is)."""


def substitute_env(
    value: Any, where: str = "", environ: Mapping[str, str] | None = None, unset: dict[str, str] | None = None
) -> Any:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in every string; a missing variable is an error naming it.

    In :data:`CONNECTION_SETTINGS` a value that is only an unset variable becomes unset instead, and
    `unset` (when given) records ``{key: variable}`` for the error of whoever needs it."""
    environ = os.environ if environ is None else environ
    if where in CONNECTION_SETTINGS and isinstance(value, str):
        whole = _VARIABLE.fullmatch(value.strip())
        if whole and whole.group(2) is None and not environ.get(whole.group(1)):
            if unset is not None:
                unset[where] = whole.group(1)
            return None
    if isinstance(value, dict):
        return {k: substitute_env(v, f"{where}.{k}" if where else str(k), environ, unset) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute_env(v, f"{where}[{i}]", environ, unset) for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ and environ[name] != "":
            if where not in DISPLAYED_SETTINGS:
                remember_secret(environ[name])  # a value from the environment is never rendered again
            return environ[name]
        if default is not None:
            return default
        raise ConfigError(f"{where}: environment variable {name} is not set (use ${{{name}:-default}} for a default)")

    return _VARIABLE.sub(replace, value)


def parse_agent(data: Any, *, source: str = "agent", base_dir: Path | None = None) -> AgentSpec:
    """Validate a parsed agent mapping. Errors name `source`, the key path and the problem."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level, got {type(data).__name__}")
    try:
        # The adapters map other formats' keys before validation; a shape they do not expect is the
        # file's error, never a raw exception (validation below names most such keys precisely).
        if is_sk_declarative(data):
            data = from_sk_declarative(data, source)
        # HoloDeck keys with no meaning here (evaluations, observability…) go before substitution:
        # a variable only they use is never required.
        unset: dict[str, str] = {}
        data = substitute_env(adapt_holodeck(data, source), unset=unset)
    except ConfigError as exc:
        raise ConfigError(str(exc) if str(exc).startswith(source) else f"{source}: {exc}") from None
    except (ValueError, TypeError, AttributeError, KeyError, RecursionError) as exc:
        raise ConfigError(f"{source}: not an agent file this version can read ({type(exc).__name__}: {exc})") from None
    try:
        spec = AgentSpec.model_validate({**data, "base_dir": base_dir or Path("."), "source": source})
    except ValidationError as exc:
        raise ConfigError(
            f"{source}:\n" + describe_validation_error(exc, "", union_tags=("plugin", "mcp", "catalog", "vectorstore"))
        ) from None
    spec.model._unset_variables = {key.removeprefix("model."): name for key, name in unset.items()}
    _remember_secrets(spec)
    _resolve_paths(spec)
    return spec


def _resolve_paths(spec: AgentSpec) -> None:
    """``embedding.cache_dir``, ``agent_loop.co_usage_file`` and ``learning.file``: ``~`` expanded,
    relative paths taken from the agent file's folder."""
    embedding = spec.tool_filtering.embedding
    if embedding.cache_dir:
        embedding.cache_dir = str(spec.resolve(embedding.cache_dir))
    loop = spec.tool_filtering.agent_loop
    if loop.co_usage_file:
        loop.co_usage_file = str(spec.resolve(loop.co_usage_file))
    learning = spec.tool_filtering.learning
    if learning.file:
        learning.file = str(spec.resolve(learning.file))


def _remember_secrets(spec: AgentSpec) -> None:
    """MCP ``env`` values and HTTP headers are never rendered, wherever they came from (API keys and
    connection strings are remembered when validated: ``RememberedSecret``, ``RememberedConnection``)."""
    for source in spec.tools:
        remember_public(getattr(source, "name", None))
        if isinstance(source, MCPSource):
            for value in [*(source.env or {}).values(), *source.headers.values()]:
                remember_secret(value)
                remember_secret(value.split(" ", 1)[-1])  # "Bearer <token>": the token alone too


def load_agent_file(path: str | Path) -> AgentSpec:
    """Read and validate an agent YAML file (size, depth and alias expansion bounded; duplicate keys
    are errors; every error names the file)."""
    path = Path(path)
    return parse_agent(read_yaml(path), source=str(path), base_dir=path.resolve().parent)
