"""What one selection's telemetry span records (:mod:`sk_toolfilter.telemetry`): the catalog, the budget,
the method, what was sent and pinned, the second stage and its cost, and the schema tokens saved."""

from __future__ import annotations

from sk_toolfilter.basics.tokenizer import count_json_tokens
from sk_toolfilter.retrieval.metadata import openai_tool_definition
from sk_toolfilter.selection.catalog_upkeep import Catalog
from sk_toolfilter.selection.pipeline import Selection
from sk_toolfilter.telemetry import SelectionRecord


class SpanWriter:
    """Fills a :class:`SelectionRecord` per selection; schema tokens are counted once per tool, and the
    whole catalog's once per catalog."""

    def __init__(self) -> None:
        self._token_counts: dict[str, int] = {}
        self._catalog_tokens: tuple[Catalog | None, int] = (None, 0)

    def describe(
        self, record: SelectionRecord, catalog: Catalog, selection: Selection, *, query: str, method: str, budget: int
    ) -> None:
        """Write `selection` (made for `query` from `catalog`) into `record`."""
        scores = {d.full_name: d.score for d in selection.decisions}
        pinned = {d.full_name for d in selection.decisions if d.reason.startswith("pinned")}
        record.catalog_size = len(catalog.searchable)
        record.budget = budget
        record.method, record.method_used = method, selection.ranking.method
        record.offered, record.pins = selection.names, [n for n in selection.names if n in pinned]
        record.scores = [scores.get(n) for n in selection.names]
        record.fallback_reason, record.query = selection.ranking.fallback_reason, query
        for step, note in selection.ranking.steps.items():  # sk_toolfilter.cross_encoder, .learned_ranker, ...
            record.extra[f"sk_toolfilter.{step.replace(' ', '_').replace('-', '_')}"] = note.text
        if selection.second_stage is not None:
            record.extra["sk_toolfilter.pick"] = selection.second_stage.note
            if selection.second_stage.fallback is not None:  # e.g. "timeout", "paused" (its circuit is open)
                record.extra["sk_toolfilter.pick.fallback"] = selection.second_stage.fallback
            for key, value in selection.second_stage.cost.items():
                record.extra[f"sk_toolfilter.pick.{key}"] = value
        if self._catalog_tokens[0] is not catalog:  # summed once per catalog, not per selection
            self._catalog_tokens = (catalog, sum(self._schema_tokens(catalog, n) for n in catalog.searchable))
        record.tokens_all = self._catalog_tokens[1]
        record.tokens_offered = sum(self._schema_tokens(catalog, n) for n in selection.names)

    def _schema_tokens(self, catalog: Catalog, name: str) -> int:
        """Tokens of a tool's schema as SK's OpenAI connector sends it (counted once per tool)."""
        if name not in self._token_counts:
            tool = catalog.index.get(name)
            self._token_counts[name] = count_json_tokens(openai_tool_definition(tool)) if tool is not None else 0
        return self._token_counts[name]
