"""sk-toolfilter: dynamic tool loading for Microsoft Semantic Kernel.

Per request, rank the kernel's functions against the conversation and send only the few that
matter. See README.md for the data flow and examples.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from sk_toolfilter import _compat

__version__ = "0.3.0"

_compat.install()

# Public names, imported on first use: `import sk_toolfilter` (and `sk-toolfilter --help`) stays quick,
# and Semantic Kernel loads only when a name that needs it is used.
_PUBLIC = {
    "sk_toolfilter.config.tool_filtering": ("ToolFilterConfig",),
    "sk_toolfilter.config.embedding": ("EmbeddingConfig",),
    "sk_toolfilter.config.ranking": ("BM25Config", "RerankConfig"),
    "sk_toolfilter.basics.errors": (
        "ConfigError",
        "EmbeddingServiceError",
        "RerankError",
        "ToolFilterError",
        "ToolSourceError",
        "UnknownToolError",
    ),
    "sk_toolfilter.integration.service": ("FilteredChatCompletion", "wrap_chat_service"),
    "sk_toolfilter.integration.setup": ("attach_to_kernel", "create_tool_filter", "enable_tool_filtering"),
    "sk_toolfilter.retrieval.embeddings": ("LocalEmbeddingGenerator", "create_embedding_service"),
    "sk_toolfilter.retrieval.index": ("ToolIndex",),
    "sk_toolfilter.retrieval.metadata": ("ParameterMetadata", "ToolMetadata"),
    "sk_toolfilter.retrieval.search": ("Ranking", "ScoredTool", "rank_tools"),
    "sk_toolfilter.selection.manager": ("ToolFilterManager",),
    "sk_toolfilter.selection.pipeline": (
        "SecondStage",
        "Selection",
        "SelectionRequest",
        "StageOutcome",
        "run_second_stage",
    ),
    "sk_toolfilter.retrieval.cutoff": ("ToolDecision",),
    "sk_toolfilter.selection.llm_pick": ("LLMToolPicker",),
    "sk_toolfilter.selection.learning": ("learning_context",),
    "sk_toolfilter.selection.offer": ("Offer",),
    "sk_toolfilter.integration.picker_chat": ("semantic_kernel_picker_chat",),
    "sk_toolfilter.selection.settings": ("clone_with_functions",),
    "sk_toolfilter.selection.call_counts": ("CallCounter", "UsageTracker"),
    "sk_toolfilter.agents.agent": ("load_agent",),
}
_HOME = {name: module for module, names in _PUBLIC.items() for name in names}

if TYPE_CHECKING:  # what type checkers see: the same names, re-exported (``import X as X``)
    from sk_toolfilter.agents.agent import load_agent as load_agent
    from sk_toolfilter.basics.errors import (
        ConfigError as ConfigError,
        EmbeddingServiceError as EmbeddingServiceError,
        RerankError as RerankError,
        ToolFilterError as ToolFilterError,
        ToolSourceError as ToolSourceError,
        UnknownToolError as UnknownToolError,
    )
    from sk_toolfilter.config.embedding import EmbeddingConfig as EmbeddingConfig
    from sk_toolfilter.config.ranking import BM25Config as BM25Config, RerankConfig as RerankConfig
    from sk_toolfilter.config.tool_filtering import ToolFilterConfig as ToolFilterConfig
    from sk_toolfilter.integration.picker_chat import semantic_kernel_picker_chat as semantic_kernel_picker_chat
    from sk_toolfilter.integration.service import (
        FilteredChatCompletion as FilteredChatCompletion,
        wrap_chat_service as wrap_chat_service,
    )
    from sk_toolfilter.integration.setup import (
        attach_to_kernel as attach_to_kernel,
        create_tool_filter as create_tool_filter,
        enable_tool_filtering as enable_tool_filtering,
    )
    from sk_toolfilter.retrieval.cutoff import ToolDecision as ToolDecision
    from sk_toolfilter.retrieval.embeddings import (
        LocalEmbeddingGenerator as LocalEmbeddingGenerator,
        create_embedding_service as create_embedding_service,
    )
    from sk_toolfilter.retrieval.index import ToolIndex as ToolIndex
    from sk_toolfilter.retrieval.metadata import ParameterMetadata as ParameterMetadata, ToolMetadata as ToolMetadata
    from sk_toolfilter.retrieval.search import Ranking as Ranking, ScoredTool as ScoredTool, rank_tools as rank_tools
    from sk_toolfilter.selection.call_counts import CallCounter as CallCounter, UsageTracker as UsageTracker
    from sk_toolfilter.selection.learning import learning_context as learning_context
    from sk_toolfilter.selection.llm_pick import LLMToolPicker as LLMToolPicker
    from sk_toolfilter.selection.manager import ToolFilterManager as ToolFilterManager
    from sk_toolfilter.selection.offer import Offer as Offer
    from sk_toolfilter.selection.pipeline import (
        SecondStage as SecondStage,
        Selection as Selection,
        SelectionRequest as SelectionRequest,
        StageOutcome as StageOutcome,
        run_second_stage as run_second_stage,
    )
    from sk_toolfilter.selection.settings import clone_with_functions as clone_with_functions


def __getattr__(name: str) -> object:
    if name in _HOME:
        value = getattr(importlib.import_module(_HOME[name]), name)
        globals()[name] = value  # the next access is a plain attribute
        return value
    raise AttributeError(f"module 'sk_toolfilter' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})


__all__ = sorted([*_HOME, "__version__"])
