"""Learning from use, for one manager: every completed turn becomes (the request's vector, the tools
called), kept in a :class:`~sk_toolfilter.retrieval.memory.LearningMemory` and, when configured, in a file.

What is learned from a turn: only the tools that were in the catalog, visible and allowed to that
conversation when it was served (never an excluded, hidden or disallowed tool, never a discovery
tool itself — a tool the model *found* through discovery and then called is learned, it is the most
valuable label: the first stage missed it). What is kept: the request's vector, the tool names, a
fingerprint of the request (a hash scoped to the catalog and the scope), a fingerprint of its
conversation, a fingerprint of its scope and the time. Never the text.

Who reads what: with ``learning.scope: shared`` every request of the catalog reads every row; with a
scope key (``learning.scope: tenant_id``) a request reads only the rows of its own scope. In both, a
tool moves or enters only on the evidence of ``min_conversations`` distinct conversations.

Learning runs beside the request, never in it: a request schedules what it saw (an embedding call and
an O(log n) insert) and goes on; :meth:`Learning.settled` waits for it (tests, the CLI).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import replace
from typing import Any

from sk_toolfilter.basics.errors import ConfigError, EmbeddingServiceError
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.config import LearningConfig
from sk_toolfilter.retrieval.index import ToolIndex
from sk_toolfilter.retrieval.memory import (
    DEFAULT_RULE,
    MAX_TOOLS_PER_REQUEST,
    SHARED_SCOPE,
    LearningMemory,
    ScopedMemory,
)
from sk_toolfilter.selection.turns import Turn
from sk_toolfilter.selection.visibility import ToolPolicy
from sk_toolfilter.store.learning_file import LearningFile
from sk_toolfilter.store.learning_table import LearningTable
from sk_toolfilter.store.shared_index import SharedIndex

logger = library_logger(__name__)

_CONTEXT: ContextVar[tuple[str | None, str | None]] = ContextVar("sk_toolfilter_learning", default=(None, None))


@contextmanager
def learning_context(*, scope: str | None = None, conversation: str | None = None) -> Iterator[None]:
    """Name the scope (a tenant or user id) and the conversation of the requests made inside the block::

        with learning_context(scope=user.tenant_id, conversation=thread_id):
            await agent.invoke(...)

    With ``learning.scope`` set to a key, a request outside any scope learns and reads nothing (one
    warning). The conversation defaults to the chat history's opening (system and first user message).
    The SK wrapper and the Agent Framework middleware read the same names from the kernel arguments or
    the run's ``client_kwargs`` (``learning.scope``'s key, ``conversation_id``)."""
    token = _CONTEXT.set((scope, conversation))
    try:
        yield
    finally:
        _CONTEXT.reset(token)


CONVERSATION_ARGUMENT = "conversation_id"
"""The kernel or run argument that names a conversation for learning from use (when present)."""


def context_from_arguments(config: LearningConfig, arguments: Any) -> AbstractContextManager[None]:
    """A :func:`learning_context` from a run's arguments (SK ``KernelArguments``, an Agent Framework run's
    ``client_kwargs``): the value of ``learning.scope``'s key and of ``conversation_id``, when present."""
    if not config.enabled or arguments is None or not hasattr(arguments, "get"):
        return nullcontext()
    scope = arguments.get(config.scope) if config.scope != "shared" else None
    conversation = arguments.get(CONVERSATION_ARGUMENT)
    if scope is None and conversation is None:
        return nullcontext()
    outer_scope, outer_conversation = _CONTEXT.get()
    return learning_context(
        scope=str(scope) if scope is not None else outer_scope,
        conversation=str(conversation) if conversation is not None else outer_conversation,
    )


def describe_trust(memory: LearningMemory) -> str:
    """The trust a memory ends with, and what it means (``learn``, ``eval --learn``)."""
    trust = memory.settle()
    if trust > memory.rule.floor:
        return f"trust {trust:.2f}: learning reorders the shortlist for requests like these"
    rule = memory.rule
    return (
        f"trust {trust:.2f} over {len(memory):,} requests: only near-copies act yet (a tool that requests at "
        f"cosine >= {rule.plain_similarity:.2f} called in {rule.min_conversations} conversations); trust rises "
        f"when similar requests (cosine >= {rule.gate:.1f}) in {rule.min_conversations} or more conversations "
        "call the same tools"
    )


def _iso(at: float) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(at, datetime.timezone.utc).isoformat(timespec="seconds")


def current_context() -> tuple[str | None, str | None]:
    """(scope, conversation) named by the innermost :func:`learning_context`, or (None, None)."""
    return _CONTEXT.get()


def fingerprint(*parts: str) -> str:
    """A hash of `parts` (a scope value, a conversation's opening): what is stored instead of the text."""
    # surrogatepass: any text a user controls (a lone surrogate in an id or a request) has a fingerprint
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def conversation_owner(history: Any = None) -> str:
    """Whose request this is, as a fingerprint: the scope and conversation the innermost
    :func:`learning_context` names (the adapters set them from the run's arguments), else the history's
    opening (its messages up to the first user message). What keeps one conversation's tool-search answers
    from another's, with learning on or off."""
    scope, conversation = current_context()
    if conversation is None and history is not None:
        from sk_toolfilter.selection.turns import conversation_opening

        return fingerprint("owner", scope or "", "opening", *conversation_opening(history))
    return fingerprint("owner", scope or "", "named", conversation or "")


def request_key(catalog: str, request: str, scope: str = SHARED_SCOPE) -> str:
    """The fingerprint a request is remembered by: a hash of the catalog, the scope and the request, never the text."""
    return fingerprint(catalog, request.strip()) if not scope else fingerprint(catalog, scope, request.strip())


def learning_of_file(path: str) -> Learning:
    """The learning a file holds, read with its own catalog and model (``learned --file``; read-only).
    ConfigError for a missing file or one that is not a learning file."""
    probe = LearningFile(path, "", "")
    header, _, _, _ = probe.peek()
    if not probe.path.exists():
        raise ConfigError(f"{path}: no such learning file")
    if not header.get("catalog") or "model" not in header:
        raise ConfigError(f"{path}: not a learning file (or not one this user may read: see the warning)")
    catalog, model = str(header["catalog"]), str(header["model"])
    learning = Learning(LearningConfig(file=str(path), read_only=True, scope="scoped"), catalog, model)
    if set(learning.memory.scopes()) <= {SHARED_SCOPE}:  # rows of no scope: what an agent of scope: shared wrote
        learning.config = learning.config.model_copy(update={"scope": "shared"})
    return learning


def memory_for(config: LearningConfig) -> LearningMemory:
    """An empty memory bounded as `config` says."""
    return LearningMemory(
        max_requests=config.max_requests,
        max_bytes=int(config.max_megabytes * 2**20),
        max_age_days=config.max_age_days,
        half_life_days=config.half_life_days,
        rule=replace(DEFAULT_RULE, min_conversations=config.min_conversations),
    )


class Learning:
    """One manager's learning from use: what turns teach, kept within its bounds and its scopes."""

    def __init__(self, config: LearningConfig, catalog: str, model: str, policy: ToolPolicy | None = None) -> None:
        self.config, self.policy = config, policy
        self.catalog = catalog
        self.memory = memory_for(config)
        path = config.file if config.enabled else None  # off: nothing stored, nothing read
        self.file = LearningFile(path, catalog, model, config.sync_seconds) if path else None
        if self.file is not None:
            self.file.read_only = config.read_only
            self.file.load_into(self.memory)
            self.memory.settle()  # trust is estimated at start, never on a request
        self.table: LearningTable | None = None
        """Where the fleet shares what it learned (``index.store: postgres``), or None."""
        self._pending: set[str] = set()
        self._tasks: set[asyncio.Task[int]] = set()
        self._warned_scope = False

    async def share(self, store: SharedIndex) -> None:
        """With a shared store and learning on: learn from, and share with, the other replicas."""
        if self.config.enabled:
            self.table = store.learning_table(self.config.sync_seconds)
            if self.table is not None:
                self.table.read_only = self.config.read_only
                await self.table.sync(self.memory)
                await asyncio.to_thread(self.memory.settle)

    def tick(self) -> None:
        """On each selection: a background sync with the shared table, and a look for a wipe of the
        file by another process, when one is due."""
        if self.table is not None:
            self.table.tick(self.memory)
        if self.file is not None:
            self.file.check(self.memory)

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def scope_of(self, value: str | None) -> str | None:
        """The stored scope of a request whose scope key is `value`: ``""`` with ``scope: shared``, a
        fingerprint of the value otherwise; None (learn and read nothing) for a scoped agent's request
        that names no scope (one warning)."""
        if self.config.scope == "shared":
            return SHARED_SCOPE
        if value is not None and str(value).strip():
            return self._scope_fingerprint(value)
        if not self._warned_scope:
            self._warned_scope = True
            logger.warning(
                "sk-toolfilter: learning.scope is %r but a request named no %r (kernel or run argument, or "
                "learning_context(scope=...)): such requests neither learn nor read what was learned",
                self.config.scope,
                self.config.scope,
            )
        return None

    def permits(
        self, name: str, index: ToolIndex, discovery: Collection[str], allowed: Collection[str] | None = None
    ) -> bool:
        """Whether `name` may be learned: indexed, visible, not a discovery tool, and allowed to the
        conversation (`allowed`: the caller's allow-list, None for every tool)."""
        hidden = self.policy is not None and self.policy.is_hidden(name)
        return name in index and name not in discovery and not hidden and (allowed is None or name in allowed)

    def usable(self, scope: str | None = SHARED_SCOPE, conversation: str | None = None) -> ScopedMemory | None:
        """What a ranking of `scope` and `conversation` reads (None when learning is off, nothing was
        learned, or a scoped agent's request named no scope)."""
        if not self.config.enabled or not len(self.memory) or scope is None:
            return None
        return self.memory.scoped(scope, conversation, self.policy.is_destructive if self.policy else None)

    def learn_soon(
        self,
        index: ToolIndex,
        turns: Sequence[Turn],
        allowed: Callable[[str], bool],
        *,
        conversation: str | None = None,
        scope: str | None = SHARED_SCOPE,
    ) -> None:
        """:meth:`learn` without making the request wait: a turn whose request vector a request already
        computed (an agent loop's turn: its request was the query) is learned now — an O(log n) insert, no
        embedding — so the conversation's next request reads it; the rest are embedded beside the request
        (a task of the running loop; :meth:`settled` waits)."""
        if not self.config.enabled or not turns or scope is None or not index.has_embeddings:
            return
        fresh = self._fresh(index, turns, allowed, scope)
        known = index.known_query_vectors([request for request, _ in fresh.values()])
        for (key, (_, calls)), vector in zip(list(fresh.items()), known, strict=True):
            if vector is not None:
                del fresh[key]
                if self.memory.learn(vector, calls, key, conversation=conversation, scope=scope) and self.file:
                    self.file.changed(self.memory)
        if not fresh:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): nothing runs beside it
            logger.debug("sk-toolfilter: learning skipped %d turns (no running event loop)", len(fresh))
            return
        task = loop.create_task(self._learn_fresh(index, fresh, conversation=conversation, scope=scope))
        self._tasks.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[int]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.warning("sk-toolfilter: learning from use failed on a turn: %s", task.exception())

    def scope_value(self, value: str | None) -> str | None:
        """The stored scope of `value` (``--scope``: hashed as a request's), or None for every scope."""
        if value is None:
            return None
        if self.config.scope == "shared":
            raise ConfigError("--scope: this agent's learning.scope is 'shared': every request reads every row")
        return self._scope_fingerprint(value)

    def _scope_fingerprint(self, value: object) -> str:
        """What a scope value is stored as (never the value itself)."""
        return fingerprint(self.catalog, "scope", str(value))

    def summary(self, scope: str | None = None) -> dict[str, Any]:
        """What the memory holds, for ``sk-toolfilter learned`` (JSON-ready): requests, distinct tools and
        conversations, trust, where it is kept, oldest and newest, per scope when scoped; `scope` (a
        stored scope): that scope's rows and trust alone."""
        memory = self.memory
        rows = memory.rows() if scope is None else [row for row in memory.rows() if row.scope == scope]
        where = ["memory"]
        if self.file is not None:
            where.append(f"file {self.file.path}")
        if self.table is not None:
            where.append(f"table {self.table.qualified_name}")
        trust = memory.settle() if rows else 0.0
        if scope is not None:
            trust = memory.trust_of(scope)
        scopes = memory.scopes() if scope is None else {scope: len(rows)}
        called = Counter(tool for row in rows for tool in row.tools)
        return {
            "file": self._file_state(),
            "learned_tools": dict(sorted(called.items(), key=lambda item: (-item[1], item[0]))),
            "requests": len(rows),
            "tools": len({tool for row in rows for tool in row.tools}),
            "conversations": len({row.conversation for row in rows}),
            "trust": round(trust, 4),
            "applies": trust > memory.rule.floor,
            "min_conversations": memory.rule.min_conversations,
            "plain_similarity": memory.rule.plain_similarity,
            "where": where,
            "megabytes": round(memory.nbytes / 2**20, 3),
            "oldest": _iso(rows[0].at) if rows else None,
            "newest": _iso(max(row.at for row in rows)) if rows else None,
            "scope": self.config.scope,
            "scopes": {
                name or "shared": {"requests": count, "trust": round(memory.trust_of(name), 4)}
                for name, count in scopes.items()
            }
            if self.config.scope != "shared"
            else {},
        }

    def _file_state(self) -> dict[str, str] | None:
        """The learning file's path and what was found there: ``read``, ``missing`` or why it was not read."""
        if self.file is None:
            return None
        if self.file.blocked is not None:
            state = f"not read: {self.file.blocked}"
        elif not self.file.path.exists():
            state = "missing: no such file (nothing was ever written there)"
        else:
            state = "read"
        return {"path": str(self.file.path), "state": state}

    async def settled(self) -> None:
        """Wait until every turn seen so far is learned and trust is re-estimated (tests, the CLI)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await asyncio.to_thread(self.memory.settle)

    async def learn(
        self,
        index: ToolIndex,
        turns: Sequence[Turn],
        allowed: Callable[[str], bool],
        *,
        conversation: str | None = None,
        scope: str | None = SHARED_SCOPE,
    ) -> int:
        """Learn every turn not learned before (each turn's tools so far: a turn seen again with more
        calls is learned again, one row); `allowed` says whether a tool was visible and allowed to the
        conversation; `conversation`: its fingerprint (default: each request its own). Returns how
        many rows were added or refreshed."""
        if not self.config.enabled or not turns or not index.has_embeddings or scope is None:
            return 0  # (an index without vectors, BM25 only, has nothing to compare requests with)
        return await self._learn_fresh(index, self._fresh(index, turns, allowed, scope), conversation, scope)

    def _fresh(
        self, index: ToolIndex, turns: Sequence[Turn], allowed: Callable[[str], bool], scope: str
    ) -> dict[str, tuple[str, list[str]]]:
        """The turns not learned before, by fingerprint: (request, the tools that may be learned)."""
        fresh: dict[str, tuple[str, list[str]]] = {}
        for turn in turns:
            calls = [c for c in turn.calls if c in index and allowed(c)][:MAX_TOOLS_PER_REQUEST]
            key = request_key(self.catalog, turn.request, scope)
            if calls and not self.memory.knows(key, calls) and key not in self._pending:
                fresh[key] = (turn.request, calls)
        return fresh

    async def _learn_fresh(
        self,
        index: ToolIndex,
        fresh: dict[str, tuple[str, list[str]]],
        conversation: str | None = None,
        scope: str = SHARED_SCOPE,
    ) -> int:
        """Embed `fresh` beside the requests and learn it; how many rows were added or refreshed."""
        if not fresh:
            return 0
        self._pending.update(fresh)
        try:
            vectors = await index.embed_beside_requests([request for request, _ in fresh.values()])
        except EmbeddingServiceError as exc:
            logger.debug("sk-toolfilter: learning skipped %d turns (%s)", len(fresh), exc)
            return 0
        finally:
            self._pending.difference_update(fresh)
        rows = zip(fresh.items(), vectors, strict=True)
        learned = sum(
            self.memory.learn(vector, calls, key, conversation=conversation, scope=scope)
            for (key, (_, calls)), vector in rows
        )
        if learned and self.file is not None:
            self.file.changed(self.memory)
        return learned

    def forget_removed(self, index: ToolIndex) -> None:
        """Tools no longer in the catalog are forgotten (a row left without tools goes)."""
        if len(self.memory) and self.memory.forget_tools(lambda name: name in index) and self.file is not None:
            self.file.changed(self.memory)

    async def forget(self) -> None:
        """Forget everything: in memory, in the file and in the shared table (a new generation each). A
        file this process does not write (another catalog's, or not a learning file) is left as it is."""
        self.memory.forget_before(time.time())
        if self.file is not None and self.file.blocked is None:
            self.file.wipe()
        if self.table is not None:
            await self.table.forget()
        self.memory.forget_before(time.time())  # a turn learned while the table forgot is not kept either

    def flush(self) -> bool:
        """Write the file now if anything changed since the last write; False when something learned is
        left unwritten (read-only, a file that is not this catalog's, or a failed write: the file says why)."""
        return self.file.flush(self.memory) if self.file is not None else True

    async def aclose(self) -> None:
        """Finish what is being learned (a trust estimate in progress too), write the file and a last sync
        with the shared table."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await asyncio.to_thread(self.memory.wait_for_estimate)
        await asyncio.to_thread(self.flush)  # the disk and the lock never block the event loop
        if self.table is not None:
            await self.table.aclose(self.memory)
