"""sk-toolfilter: dynamic tool loading for Microsoft Semantic Kernel.

Per request, rank the kernel's functions against the conversation and send only the few that
matter. See README.md for the data flow and examples.
"""

from sk_toolfilter.config import BM25Config, EmbeddingConfig, ToolFilterConfig
from sk_toolfilter.embeddings import LocalEmbeddingGenerator, create_embedding_service
from sk_toolfilter.errors import ConfigError, EmbeddingServiceError, ToolFilterError, UnknownToolError
from sk_toolfilter.index import ToolIndex
from sk_toolfilter.manager import Selection, ToolDecision, ToolFilterManager
from sk_toolfilter.metadata import ParameterMetadata, ToolMetadata
from sk_toolfilter.search import Ranking, ScoredTool, rank_tools
from sk_toolfilter.settings import clone_with_functions
from sk_toolfilter.usage import UsageTracker

__version__ = "0.1.0"

__all__ = [
    "BM25Config",
    "ConfigError",
    "EmbeddingConfig",
    "EmbeddingServiceError",
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
    "UnknownToolError",
    "UsageTracker",
    "__version__",
    "clone_with_functions",
    "create_embedding_service",
    "rank_tools",
]
