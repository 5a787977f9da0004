"""The second stage: a cross-encoder reads the request and each shortlisted tool together.

The first stage (BM25 + a bi-encoder) *finds* the tools a request needs — its top 20 holds them for
most requests — but ranks each tool from two independent vectors. A cross-encoder attends across
request and tool text at once, so it can *order* the shortlist. It only reorders: it never adds a
tool outside the shortlist, and how many tools are sent stays the first stage's decision.
"""

from __future__ import annotations

from sk_toolfilter.retrieval.gloss import with_english_gloss
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.text import humanize_identifier

RERANK_DESCRIPTION_CHARS = 160
"""A tool's description is cut to this many characters for the reranker (the pair is cut to
:data:`RERANK_MAX_TOKENS` anyway; a shorter text costs fewer tokens per pair)."""
RERANK_MAX_TOKENS = 64
"""Tokens of one (request, tool) pair; the longer side is cut first."""


def rerank_text(tool: ToolMetadata) -> str:
    """What the reranker reads of a tool: readable name, the start of its description, parameter names."""
    description = " ".join(with_english_gloss(tool.description.strip()).split())[:RERANK_DESCRIPTION_CHARS]
    text = f"{humanize_identifier(tool.name)}: {description}"
    if tool.parameters:
        text += " (" + ", ".join(humanize_identifier(p.name) for p in tool.parameters) + ")"
    return text
