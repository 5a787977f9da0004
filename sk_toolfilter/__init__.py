"""sk-toolfilter: dynamic tool loading for Microsoft Semantic Kernel.

Per request, rank the kernel's functions against the conversation and send only the few that
matter. See README.md for the data flow and examples.
"""

from sk_toolfilter import _compat
from sk_toolfilter.config import BM25Config, EmbeddingConfig, ToolFilterConfig
from sk_toolfilter.errors import ConfigError, EmbeddingServiceError, ToolFilterError, ToolSourceError, UnknownToolError
from sk_toolfilter.integration.service import FilteredChatCompletion, wrap_chat_service
from sk_toolfilter.integration.setup import attach_to_kernel, create_tool_filter, enable_tool_filtering
from sk_toolfilter.retrieval.embeddings import LocalEmbeddingGenerator, create_embedding_service
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.metadata import ParameterMetadata, ToolMetadata
from sk_toolfilter.retrieval.search import Ranking, ScoredTool, rank_tools
from sk_toolfilter.selection.manager import Selection, ToolDecision, ToolFilterManager
from sk_toolfilter.selection.settings import clone_with_functions
from sk_toolfilter.selection.usage import UsageTracker

__version__ = "0.2.0"

_compat.install()

_LAZY = {"load_agent": "sk_toolfilter.agents.agent"}
"""Public names imported on first use: loading agent files pulls in MCP, YAML and HTTP clients."""


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sk_toolfilter' has no attribute {name!r}")


__all__ = [
    "BM25Config",
    "ConfigError",
    "EmbeddingConfig",
    "EmbeddingServiceError",
    "FilteredChatCompletion",
    "LocalEmbeddingGenerator",
    "ParameterMetadata",
    "Ranking",
    "ScoredTool",
    "Selection",
    "ToolDecision",
    "ToolFilterConfig",
    "ToolFilterError",
    "ToolFilterManager",
    "ToolIndex",
    "ToolMetadata",
    "ToolSourceError",
    "UnknownToolError",
    "UsageTracker",
    "__version__",
    "attach_to_kernel",
    "clone_with_functions",
    "create_embedding_service",
    "create_tool_filter",
    "enable_tool_filtering",
    "load_agent",
    "rank_tools",
    "wrap_chat_service",
]
