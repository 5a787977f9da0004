"""The filter answers the provider's tool search (``provider_search.search: filter``), framework-neutral.

With provider tool search, the tools the filter did not load go deferred; the model searches when none
of its loaded tools fits. ``search: filter`` puts this library behind that search: OpenAI's
``tool_search`` with ``execution: "client"`` (the model emits a ``tool_search_call``; the client
answers with a ``tool_search_output`` holding the definitions to load) and Anthropic's custom search
tool (its ``tool_result`` holds ``tool_reference`` blocks to deferred tools). A
:class:`SearchSession` is one model call's search desk: it ranks the model's query with the manager's
own ranking path (first stage, learning from use, the agent's visibility) among the tools this call
may use, answers with the first ``provider_search.results`` not already loaded, and learns when the
model then calls a tool it found. The wire transports (:mod:`sk_toolfilter.provider_wire`) apply it.

Bounds (what a model or a provider may send): arguments are read from at most
:data:`MAX_ARGUMENT_CHARS` characters, a query keeps :data:`MAX_QUERY_CHARS` with control characters
as spaces, arguments that are not a JSON object with a text ``query`` search for nothing (an empty
answer), a repeated ``call_id`` is answered once, at most :data:`MAX_SEARCHES_PER_CALL` searches are
ranked within one model call (however many one response holds: the rest are answered empty), answers are
kept per conversation and scope (never another's, whatever ``call_id`` a model chose), and no answer
ever names a tool outside the call's deferred tools (hidden and excluded tools are never deferred).
"""

from __future__ import annotations

import json
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.retrieval.search import MAX_QUERY_CHARS as RANKED_QUERY_CHARS
from sk_toolfilter.selection.provider_search import SEARCH_TOOL_NAME

logger = library_logger(__name__)


SEARCH_DESCRIPTION = (
    "Search the tools you can load when none of your tools fits the task. Describe what you need to do in a "
    "few words; the best-matching tools are loaded for your next step."
)
SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "What you need to do, in a few words"}},
    "required": ["query"],
    "additionalProperties": False,
}

OPENAI_CLIENT_SEARCH_TOOL: dict[str, Any] = {
    "type": "tool_search",
    "execution": "client",
    "description": SEARCH_DESCRIPTION,
    "parameters": SEARCH_PARAMETERS,
}
"""OpenAI Responses: tool search executed by the client (this library), never deferred itself."""

ANTHROPIC_CLIENT_SEARCH_TOOL: dict[str, Any] = {
    "type": "custom",
    "name": SEARCH_TOOL_NAME,
    "description": SEARCH_DESCRIPTION,
    "input_schema": SEARCH_PARAMETERS,
}
"""Anthropic: a custom search tool whose results are ``tool_reference`` blocks (never deferred itself)."""

MAX_QUERY_CHARS = RANKED_QUERY_CHARS
"""A query keeps what a ranking reads of any text (20,000 characters): an answer is the filter's ranking
for the same text."""
MAX_ARGUMENT_CHARS = 2 * MAX_QUERY_CHARS
"""A search call's arguments are read from at most this many characters (a 1 MB query is cut first)."""
MAX_SEARCHES_PER_CALL = 3
"""Searches answered within one model call; past them the response goes back to the framework as it is."""
MAX_REMEMBERED = 65_536
"""Answers kept per manager in total (by conversation and ``call_id``): the replay of a stateless
conversation and learning read them (a few hundred bytes each)."""
MAX_REMEMBERED_PER_CONVERSATION = 256
"""Answers kept per conversation: its replays get the same tools back however many other conversations search."""

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029]")  # tabs and line breaks stay


class SharedState(Protocol):
    """Where replicas share what conversations leave on them (:mod:`sk_toolfilter.store.conversation_state`)."""

    async def get(self, kind: str, key: str) -> Any | None: ...

    async def put(self, kind: str, key: str, value: Any) -> None: ...


class SearchRanker(Protocol):
    """What a search session reads of the manager: its ranking for a text among allowed tools."""

    async def select(self, query: str, *, allowed: set[str] | None = None) -> Any: ...


def search_query(arguments: object) -> str:
    """The text query of a search call's `arguments` (a JSON object, or its text), bounded: read from at
    most :data:`MAX_ARGUMENT_CHARS` characters, control characters (but tabs and line breaks) as spaces,
    cut to :data:`MAX_QUERY_CHARS`; "" when there is none (not an object, no text ``query``, unreadable)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments[:MAX_ARGUMENT_CHARS])
        except (ValueError, RecursionError):
            return ""
    query = arguments.get("query") if isinstance(arguments, dict) else None
    if not isinstance(query, str):
        return ""
    return _CONTROL.sub(" ", query[:MAX_QUERY_CHARS]).strip()


@dataclass
class SearchAnswer:
    """One search the filter answered: its call, the model's query, the tools it loads (best first)."""

    call_id: str
    query: str
    names: tuple[str, ...]
    learned: set[str] = field(default_factory=set)
    """Found tools the model then called (each learned once)."""
    matched: int = 0
    """Deferred tools with first-stage evidence for the query (0: the answer is the best-ranked ones)."""


class _Answers:
    """One manager's answers by (owner, ``call_id``) — the owner is the conversation and scope that asked:
    no conversation or tenant ever receives another's answer, whatever ``call_id`` its model chose.
    Bounded per owner (:data:`MAX_REMEMBERED_PER_CONVERSATION`: one conversation's searches never evict
    another's) and in total (:data:`MAX_REMEMBERED`, the least recently asked first out); thread-safe."""

    def __init__(self) -> None:
        self._owners: OrderedDict[str, OrderedDict[str, SearchAnswer]] = OrderedDict()
        self._count = 0
        self._lock = threading.Lock()

    def get(self, owner: str, call_id: str) -> SearchAnswer | None:
        with self._lock:
            answers = self._owners.get(owner)
            return answers.get(call_id) if answers is not None else None

    def put(self, owner: str, answer: SearchAnswer) -> None:
        with self._lock:
            answers = self._owners.setdefault(owner, OrderedDict())
            self._owners.move_to_end(owner)
            self._count += answer.call_id not in answers
            answers[answer.call_id] = answer
            answers.move_to_end(answer.call_id)
            if len(answers) > MAX_REMEMBERED_PER_CONVERSATION:
                answers.popitem(last=False)
                self._count -= 1
            while self._count > MAX_REMEMBERED:
                oldest = next(iter(self._owners.values()))
                oldest.popitem(last=False)
                self._count -= 1
                if not oldest:
                    self._owners.popitem(last=False)


_BY_MANAGER: weakref.WeakKeyDictionary[Any, _Answers] = weakref.WeakKeyDictionary()
_BY_MANAGER_LOCK = threading.Lock()


def _answers_of(manager: Any) -> _Answers:
    with _BY_MANAGER_LOCK:
        answers = _BY_MANAGER.get(manager)
        if answers is None:
            answers = _BY_MANAGER[manager] = _Answers()
        return answers


class SearchRanking(NamedTuple):
    """What the filter ranks for a search: `matched`, the tools with first-stage evidence (best first);
    `closest`, the tools nearest the query when none has evidence (by cosine); `small_talk`: the query
    asks for no tool (then both are empty)."""

    matched: list[str]
    closest: list[str]
    small_talk: bool = False


def _answer_of(call_id: str, stored: Any) -> SearchAnswer | None:
    """An answer a replica kept in the shared store (None for nothing, or for anything malformed)."""
    if not isinstance(stored, dict) or not isinstance(stored.get("names"), list):
        return None
    names = tuple(n for n in stored["names"] if isinstance(n, str))
    matched = stored.get("matched")
    matched = matched if isinstance(matched, int) else 0
    return SearchAnswer(call_id, str(stored.get("query") or ""), names, matched=matched)


async def rank_for_search(manager: SearchRanker, query: str, usable: Collection[str]) -> SearchRanking:
    """The tools the filter ranks for `query` among `usable` (the manager's ranking path: first stage,
    learning from use, visibility). An empty query ranks nothing."""
    if not query.strip() or not usable:
        return SearchRanking([], [])
    ranking = (await manager.select(query, allowed=set(usable))).ranking
    if ranking.no_tool_reason is not None:
        return SearchRanking([], [], small_talk=True)
    matched = [t.full_name for t in ranking.tools if t.evidence and t.full_name in usable]
    unranked = [t.full_name for t in ranking.tools if not t.evidence] + [n for n, _ in ranking.without_evidence]
    return SearchRanking(matched, [n for n in dict.fromkeys(unranked) if n in usable])


@dataclass
class SearchSession:
    """One model call's tool search answered by the filter.

    `loaded`: the tools the call sends loaded; `deferred`: every other tool it may use (the only tools an
    answer may name); `results`: tools per answer; `learn(query, tool)`: learning from use, called when the
    model calls a tool a search of this session (or of an earlier call it replays) found; `within()`: the
    run's learning context (its scope), entered around each ranking and each learning — the wire answers
    outside the adapter's own ``with`` blocks."""

    manager: SearchRanker
    loaded: tuple[str, ...]
    deferred: tuple[str, ...]
    results: int
    learn: Callable[[str, str], None] | None = None
    within: Callable[[], AbstractContextManager[Any]] = nullcontext
    owner: str = ""
    """Whose searches these are (a fingerprint of the conversation and scope): answers are kept and
    replayed per owner, never across."""
    shared: SharedState | None = None
    """With a shared store: answers are kept there too, so a replay reaching another replica gets the
    same tools back."""
    given: list[SearchAnswer] = field(default_factory=list)
    """The answers this model call gave or replayed, in order."""

    def __post_init__(self) -> None:
        self._deferred = frozenset(self.deferred)
        self._answers = _answers_of(self.manager)
        self.ranked = 0
        """Searches this model call ranked (at most :data:`MAX_SEARCHES_PER_CALL`; the rest answered empty)."""

    async def answer(self, call_id: str, arguments: object) -> SearchAnswer:
        """The answer to one search call: the same call of this conversation answered before (a replay, a
        repeated ``call_id``) gets the same tools; else the filter's first `results` deferred tools for its
        query — those with first-stage evidence, or, when no deferred tool has any, the best-ranked
        deferred tools (never an empty answer while tools remain, but for small talk or an empty query).
        Past :data:`MAX_SEARCHES_PER_CALL` new searches in one model call, the answer is empty."""
        known = self._answers.get(self.owner, call_id) if call_id else None
        if known is None and call_id and self.shared is not None:
            known = _answer_of(call_id, await self.shared.get("answer", f"{self.owner}:{call_id}"))
        if known is not None:
            answer = SearchAnswer(call_id, known.query, self.permitted(known.names), known.learned)
        elif self.ranked >= MAX_SEARCHES_PER_CALL:
            answer = SearchAnswer(call_id, search_query(arguments), ())  # over the bound: nothing ranked
            logger.warning(
                "sk-toolfilter: the model searched more than %d times in one call: the rest are answered empty",
                MAX_SEARCHES_PER_CALL,
            )
        else:
            self.ranked += 1
            query = search_query(arguments)
            with self.within():
                ranked = await rank_for_search(self.manager, query, (*self.loaded, *self.deferred))
                names = self.permitted(ranked.matched)[: self.results]
                if not names and not ranked.small_talk and query:  # no deferred tool matched: the closest
                    names = self.permitted((await rank_for_search(self.manager, query, self.deferred)).closest)
            answer = SearchAnswer(call_id, query, names[: self.results], matched=len(self.permitted(ranked.matched)))
            if call_id:
                self._answers.put(self.owner, answer)
                if self.shared is not None:
                    value = {"query": answer.query, "names": list(answer.names), "matched": answer.matched}
                    await self.shared.put("answer", f"{self.owner}:{call_id}", value)
        if all(a.call_id != answer.call_id for a in self.given):
            self.given.append(answer)
        return answer

    def permitted(self, names: Iterable[object]) -> tuple[str, ...]:
        """`names` this call may load through a search (deferred here), once each, in order (anything
        else — a hidden or unknown tool, not a name at all — is left out)."""
        return tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n in self._deferred))

    def called(self, names: Sequence[str]) -> None:
        """The model called `names`: a tool a search of this call found is learned with that search's query."""
        if self.learn is None:
            return
        for answer in self.given:
            for name in names:
                if name in answer.names and name not in answer.learned and answer.query:
                    answer.learned.add(name)
                    with self.within():
                        self.learn(answer.query, name)
