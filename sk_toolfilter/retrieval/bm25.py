"""Okapi BM25 over tool metadata, scored eagerly with ``bm25s``.

Every (term, tool) score is computed once at build time into a sparse matrix; a query is the
sum of a few of its rows. Score of a tool = sum over distinct query terms of
``idf · tf / (tf + k1·(1 - b + b·|d|/avgdl))`` (Okapi BM25 without its constant ``k1 + 1``
factor, which changes no ranking) with the Lucene IDF ``ln(1 + (N - df + 0.5)/(df + 0.5))``,
which is never negative (a term in every tool still counts a little).

Field weighting (a measured need, see benchmarks/RESULTS.md) is done by repeating the name's
tokens ``name_boost`` times in the document, which bm25s supports as plain term frequency.
"""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np

from sk_toolfilter.config import BM25Config
from sk_toolfilter.retrieval.metadata import ToolMetadata
from sk_toolfilter.retrieval.text import tokenize


def tool_tokens(tool: ToolMetadata, config: BM25Config) -> list[str]:
    """The BM25 document of one tool: name (boosted), plugin, description, parameters, keywords."""
    fields = tool.lexical_fields()
    stem = config.stemming
    name_tokens = tokenize(fields["name"], stem=stem, drop_stopwords=False)
    tokens = name_tokens * config.name_boost
    for key in ("plugin", "description", "parameters", "keywords"):
        tokens.extend(tokenize(fields[key], stem=stem))
    return tokens


def query_tokens(query: str, config: BM25Config) -> list[str]:
    """Distinct query tokens in first-seen order: a term repeated in a long query counts once."""
    return list(dict.fromkeys(tokenize(query, stem=config.stemming)))


def tool_key(tool: ToolMetadata) -> str:
    """Identifies a tool's indexed text: same key, same tokens and embedding."""
    return f"{tool.full_name}\x00{tool.embedding_text()}"


class BM25Index:
    """Precomputed BM25 statistics for a fixed list of tools."""

    def __init__(self, documents: Sequence[list[str]], config: BM25Config) -> None:
        self.config = config
        self.token_cache: dict[str, list[str]] = {}
        self.size = len(documents)
        self._retriever: bm25s.BM25 | None = None
        if self.size and any(documents):
            retriever = bm25s.BM25(k1=config.k1, b=config.b, method="robertson", idf_method="lucene")
            # bm25s cannot index an empty document list entry-wise; an empty tool is one pad token.
            retriever.index([doc or [""] for doc in documents], show_progress=False)
            self._retriever = retriever

    @classmethod
    def from_tools(
        cls, tools: Sequence[ToolMetadata], config: BM25Config, token_cache: dict[str, list[str]] | None = None
    ) -> BM25Index:
        """Index `tools`; `token_cache` (the previous index's) spares re-tokenizing unchanged tools.

        The new index keeps only its own tools' tokens, so the cache never outgrows the catalog,
        however many rebuilds it goes through.
        """
        previous = token_cache or {}
        cache: dict[str, list[str]] = {}
        documents = []
        for tool in tools:
            key = tool_key(tool)
            tokens = cache.get(key) or previous.get(key)
            if tokens is None:
                tokens = tool_tokens(tool, config)
            cache[key] = tokens
            documents.append(tokens)
        index = cls(documents, config)
        index.token_cache = cache
        return index

    def raw_scores(self, query: str) -> np.ndarray:
        """Raw BM25 score of every tool (0 where no query term occurs)."""
        if self._retriever is None:
            return np.zeros(self.size, dtype=np.float32)
        ids = self._retriever.get_tokens_ids(query_tokens(query, self.config))
        if not ids:
            return np.zeros(self.size, dtype=np.float32)
        return self._retriever.get_scores_from_ids(ids)
