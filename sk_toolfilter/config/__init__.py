"""The ``tool_filtering`` configuration block, validated by pydantic: :class:`ToolFilterConfig` and its
sections, one module each (embedding, ranking, agent loop, index)."""

from sk_toolfilter.config.agent_loop import AgentLoopConfig
from sk_toolfilter.config.base import (
    DEFAULT_WEIGHTS,
    RankingMethod,
    SearchMethod,
    StrictConfig,
    checked_weights,
)
from sk_toolfilter.config.embedding import EmbeddingConfig
from sk_toolfilter.config.index import IndexConfig
from sk_toolfilter.config.learning import LearningConfig
from sk_toolfilter.config.provider_search import ProviderSearchConfig
from sk_toolfilter.config.ranking import LLM_SHORTLIST, BM25Config, DiscoveryConfig, RerankConfig, ToolOverride
from sk_toolfilter.config.tool_filtering import ToolFilterConfig

__all__ = [
    "DEFAULT_WEIGHTS",
    "LLM_SHORTLIST",
    "AgentLoopConfig",
    "BM25Config",
    "DiscoveryConfig",
    "EmbeddingConfig",
    "IndexConfig",
    "LearningConfig",
    "ProviderSearchConfig",
    "RankingMethod",
    "RerankConfig",
    "SearchMethod",
    "StrictConfig",
    "ToolFilterConfig",
    "ToolOverride",
    "checked_weights",
]
