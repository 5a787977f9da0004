"""Semantic Kernel's declarative agent specs (``AgentRegistry.create_from_yaml``) as agent files.

An SK spec looks like::

    type: chat_completion_agent
    name: Host
    instructions: Answer questions about the menu.
    model:
      id: ${OpenAI:ChatModelId}
      connection: {api_key: ${OpenAI:ApiKey}}
      options: {temperature: 0.4}
    tools:
      - {id: MenuPlugin.get_specials, type: function}

Mapping onto this library's format: ``model.id`` → ``model.name``; ``model.connection``
(``api_key``, ``endpoint`` → Azure OpenAI, ``base_url``, ``api_version``) → ``model``;
``model.options`` as is; ``${Section:Key}`` placeholders → the environment variable SK's settings
read (``${OpenAI:ChatModelId}`` → ``$OPENAI_CHAT_MODEL_ID``); ``type: function`` tools name
functions the caller's kernel already has (``load_agent(..., kernel=...)``): the agent may call
only those, and the filter picks among them per request. Tool sources of this library's own types
(``plugin``, ``mcp``, ``catalog``, ``vectorstore``) may sit in the same list; a ``tool_filtering``
block works as in this library's format. ``inputs``, ``outputs`` and ``template`` are SK prompt
features with no meaning here: accepted with one warning.
"""

from __future__ import annotations

import os
import re
from typing import Any

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.basics.redaction import library_logger

logger = library_logger(__name__)

AGENT_TYPES = ("chat_completion_agent",)
IGNORED = ("inputs", "outputs", "template", "version", "metadata")
_PLACEHOLDER = re.compile(r"\$\{([A-Za-z][A-Za-z0-9]*):([A-Za-z][A-Za-z0-9]*)\}")


def is_sk_declarative(data: Any) -> bool:
    """True for an SK declarative agent spec (its ``type`` names an SK agent kind)."""
    return isinstance(data, dict) and isinstance(data.get("type"), str) and data["type"] in AGENT_TYPES


def settings_variable(section: str, key: str) -> str:
    """The environment variable SK's settings read for ``${Section:Key}``: ``OPENAI_CHAT_MODEL_ID``."""
    words = [re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", part) for part in (section.replace("OpenAI", "Openai"), key)]
    return "_".join(words).upper()


def from_sk_declarative(data: dict[str, Any], source: str) -> dict[str, Any]:
    """This library's agent mapping for an SK spec; function tool ids go to ``functions``."""
    data = _placeholders_to_env(data)
    agent: dict[str, Any] = {
        key: data[key] for key in ("name", "description", "instructions", "tool_filtering") if key in data
    }
    agent["name"] = re.sub(r"[^0-9A-Za-z_-]", "_", str(data.get("name") or "agent"))
    model = data.get("model") or {}
    if not isinstance(model, dict):
        raise ConfigError(f"{source}: model: expected a mapping")
    connection = model.get("connection") or {}
    if not isinstance(connection, dict):
        raise ConfigError(f"{source}: model.connection: expected a mapping")
    # The model is only needed to chat: a placeholder whose variable is not set leaves its key out
    # (validate, search, report and eval never call the model; chat says what is missing).
    model_id = _unless_unset(model.get("id"))
    mapped: dict[str, Any] = {"name": model_id} if model_id else {}
    for key in ("api_key", "base_url", "endpoint", "api_version"):
        value = _unless_unset(connection.get(key))
        if value:
            mapped[key] = value
    if connection.get("endpoint"):
        mapped["provider"] = "azure_openai"
    if model.get("options"):
        mapped["options"] = model["options"]
    agent["model"] = mapped
    functions: list[str] = []
    sources: list[Any] = []
    for position, tool in enumerate(data.get("tools") or []):
        if isinstance(tool, dict) and tool.get("type") == "function":
            identifier = str(tool.get("id") or "")
            if "." not in identifier:
                raise ConfigError(f"{source}: tools[{position}].id: expected 'Plugin.function', got {identifier!r}")
            functions.append(identifier.replace(".", "-", 1))
        else:
            sources.append(tool)
    agent["tools"] = sources
    agent["functions"] = functions
    ignored = [key for key in IGNORED if key in data]
    if ignored:
        logger.warning(
            "sk-toolfilter: %s: %s have no meaning here (SK prompt features) and are ignored",
            source,
            ", ".join(ignored),
        )
    return agent


def _unless_unset(value: Any) -> Any:
    """`value`, or None when it is just a ``${VAR}`` whose variable is not set."""
    if isinstance(value, str):
        whole = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", value.strip())
        if whole and whole.group(1) not in os.environ:
            return None
    return value


def _placeholders_to_env(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _placeholders_to_env(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_placeholders_to_env(v) for v in value]
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: "${" + settings_variable(m.group(1), m.group(2)) + "}", value)
    return value
