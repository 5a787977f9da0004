"""The ``sk-toolfilter`` command line: validate, search, explain, report, index, chat, eval, learn, forget.

A thin layer over the library. Exit codes: 0 success; 2 usage error — bad flags or a bad agent file
(any :class:`ConfigError`); 1 runtime failure. Either way one line on stderr, never a traceback
(``-v`` shows it).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sk_toolfilter.basics.errors import ConfigError, ToolFilterError, naming
from sk_toolfilter.basics.progress import Progress
from sk_toolfilter.basics.redaction import RedactingFilter, library_logger, redacted_output

if TYPE_CHECKING:
    from sk_toolfilter.gateway.callers import Callers

log = library_logger("sk_toolfilter.cli")

KERNEL_HELP = (
    "a Semantic Kernel whose plugins the agent file's tools name (SK declarative specs' `type: function`): "
    "a module and a Kernel or a function returning one, e.g. myapp.kernels:build_kernel"
)


async def _kernel_from(args: argparse.Namespace) -> Any:
    """The kernel ``--kernel module:factory`` names (a Kernel, or a function returning one, async or not)."""
    target = getattr(args, "kernel", None)
    if not target:
        return None
    import importlib
    import inspect
    import os

    from semantic_kernel import Kernel

    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"--kernel {target!r}: expected module:factory, e.g. --kernel myapp.kernels:build_kernel")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # a module beside the agent file, as `python -m` would find it
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"--kernel {target!r}: cannot import {module_name!r} ({exc})") from None
    factory = getattr(module, attribute, None)
    if factory is None:
        raise ConfigError(f"--kernel {target!r}: {module_name!r} has no {attribute!r}")
    kernel = factory() if callable(factory) and not isinstance(factory, Kernel) else factory
    if inspect.isawaitable(kernel):
        kernel = await kernel
    if not isinstance(kernel, Kernel):
        raise ConfigError(f"--kernel {target!r}: gave a {type(kernel).__name__}, not a semantic_kernel Kernel")
    return kernel


def _print_counts(tools: Any) -> None:
    from sk_toolfilter.measure.report import plural

    for name, count in tools.tool_counts.items():
        print(f"  {name}: {count} {plural(count, 'tool')}")
    for name, reason in tools.skipped_sources.items():
        print(f"  {name}: skipped (optional): {' '.join(reason.split())}")
    total = tools.manager.catalog_size
    discovery = len(tools.manager.discovery_names)
    extra = f" (+ {discovery} discovery {plural(discovery, 'tool')})" if discovery else ""
    print(f"  total: {total} {plural(total, 'tool')}{extra} indexed", end="")
    index = tools.manager.index
    if index.vectors_pending:
        print(f" (BM25 for now: {index.vectors_pending}; without --no-wait the command waits for them)")
    elif index.has_embeddings:
        print(" (with embeddings)")
    elif tools.manager.config.search_method == "bm25":
        print(" (BM25 only: tool_filtering.search_method is bm25)")
    else:
        print(" (BM25 only: no embedding service; see tool_filtering.embedding)")


async def cmd_validate(args: argparse.Namespace) -> int:
    from sk_toolfilter.agents.agent import check_at_start, open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file
    from sk_toolfilter.measure.report import resolve_expected

    spec = _inspecting(load_agent_file(args.agent))
    spec.instructions_text()  # a missing instructions file fails validation, not the first chat
    try:  # what load_agent refuses at start, validate refuses (no credential or network needed)
        check_at_start(spec)
    except ToolFilterError as exc:
        raise naming(exc, str(args.agent)) from None

    async with await open_toolset(
        spec, kernel=await _kernel_from(args), progress=Progress("embedding tools", unit="tools"), wait=not args.no_wait
    ) as tools:
        try:  # an `expect` naming no tool of the agent fails here, not only in `report`
            resolve_expected(spec.sample_queries, tools.manager.index.names)
        except ToolFilterError as exc:
            raise naming(exc, str(args.agent)) from None
        print(f"{tools.spec.name}: OK")
        _print_counts(tools)
    return 0


async def cmd_search(args: argparse.Namespace) -> int:
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file
    from sk_toolfilter.config import ToolFilterConfig

    spec = _inspecting(load_agent_file(args.agent))
    overrides: dict[str, Any] = {}
    if args.method:
        overrides["search_method"] = args.method
    if args.top_k is not None:
        overrides["top_k"] = args.top_k
    if overrides:
        config = ToolFilterConfig.from_mapping({**spec.tool_filtering.model_dump(), **overrides})
        spec = spec.model_copy(update={"tool_filtering": config})
    async with await open_toolset(
        spec, kernel=await _kernel_from(args), progress=Progress("embedding tools", unit="tools"), wait=not args.no_wait
    ) as tools:
        from semantic_kernel.contents import ChatHistory

        # The request as the agent's first model call of a turn sees it (the agent loop's budget included),
        # so --explain says exactly what the wrapper and the report send.
        from sk_toolfilter.selection.learning import learning_context

        history = ChatHistory()
        history.add_user_message(args.query)
        tools.manager.learning.scope_value(args.scope)  # (refused, as `learned` refuses it, on a 'shared' agent)
        with learning_context(scope=args.scope):  # --scope: as that tenant's request reads what was learned
            selection = await tools.manager.select_for_history(history)
        ranking = selection.ranking
        note = f" (fallback: {ranking.fallback_reason})" if ranking.fallback_reason else ""
        note += f"; second stage: {ranking.second_stage[1].text}" if ranking.second_stage else ""
        note += f"; second stage: {selection.second_stage.describe()}" if selection.second_stage else ""
        print(
            f"method: {ranking.method}{note}; selected {len(selection.names)}: {', '.join(selection.names) or '(none)'}"
        )
        if args.explain:
            for d in selection.decisions[: args.limit]:
                scores = " ".join(f"{m}={v:.2f}" for m, v in (d.method_scores or {}).items())
                score = f"{d.score:.2f}" if d.score is not None else "  - "
                print(f"  {'+' if d.kept else '-'} {score} {d.full_name:40} {scores:28} {d.reason}")
            for name, why in ranking.learned.items():
                print(f"  learned: {name} moved up: {why}")
            if ranking.learning_note:
                print(f"  learned: {ranking.learning_note}")
        else:
            for rank, name in enumerate(selection.names, 1):
                print(f"  {rank}. {name}")
    return 0


async def cmd_index(args: argparse.Namespace) -> int:
    """``index push``: make the agent's catalog the store's current version; ``index status``: compare."""
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file

    spec = load_agent_file(args.agent)
    index = spec.tool_filtering.index
    if index.store == "memory":
        raise ConfigError(
            f"{args.agent}: tool_filtering.index.store is 'memory'; 'index {args.action}' needs a database store "
            "(e.g. store: postgres with connection_string: ${TOOLS_DB_URL})"
        )
    updates: dict[str, Any] = {"publish": args.action == "push"}
    if args.catalog:
        updates["catalog"] = args.catalog
    config = spec.tool_filtering.model_copy(update={"index": index.model_copy(update=updates)})
    spec = _inspecting(spec.model_copy(update={"tool_filtering": config}))
    # status only compares: nothing is embedded (a new catalog answers at once, with no warning)
    async with await open_toolset(
        spec,
        kernel=await _kernel_from(args),
        progress=Progress("embedding tools", unit="tools"),
        embed=args.action == "push",
    ) as tools:
        store = tools.manager.index_store
        if store is None:
            raise ConfigError("index: the shared store needs an embedding service (search_method: bm25 has none)")
        stats, total = store.stats, tools.manager.catalog_size
        current = await store.catalog.current()
        name = store.catalog.name
        if current is None:
            print(f"catalog {name!r} at {store.where}: nothing published yet ({total} tools in the agent)")
            return 0 if args.action == "status" else 1
        print(
            f"catalog {name!r} at {store.where}: version {current.version}, {current.tools} tools, "
            f"model {current.model_id} ({current.dimensions} dims), published {current.published_at}"
        )
        if stats.published:
            state = "published"
        elif stats.changed or stats.removed:
            state = f"out of date: {stats.changed} new or changed, {stats.removed} removed; run 'index push'"
        else:
            state = "current"
        indexed = len(tools.manager.index)  # the store holds the discovery tools too
        print(
            f"  this agent: {total} tools (+{indexed - total} discovery); {stats.loaded} read from the store, "
            f"{stats.embedded} embedded here ({state})"
        )
    return 0


async def cmd_report(args: argparse.Namespace) -> int:
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import SampleQuery, load_agent_file
    from sk_toolfilter.measure.report import build_token_report, render_terminal, write_report

    spec = _inspecting(load_agent_file(args.agent))
    queries = spec.sample_queries
    if args.queries:
        queries = _read_queries(Path(args.queries))
    queries = queries[: args.limit] if args.limit is not None else queries
    if not queries:
        queries = [SampleQuery(query="hi there")]
        log.warning("no sample_queries in %s and no --queries; reporting on 'hi there' only", args.agent)
    if args.selection_mode:
        spec = _with_filtering(spec, selection_mode=args.selection_mode)
    search = spec.tool_filtering.provider_search
    if search.enabled:  # the report's requests are Chat Completions (no deferred tools): estimated instead
        spec = _with_filtering(spec, provider_search=search.model_copy(update={"enabled": False}))
        args.provider_search = True
    client = _live_client(args, spec)  # checked before anything is indexed or sent
    async with await open_toolset(
        spec, kernel=await _kernel_from(args), progress=Progress("embedding tools", unit="tools"), wait=not args.no_wait
    ) as tools:
        try:
            report = await build_token_report(
                spec,
                tools.kernel,
                tools.manager,
                queries,
                args.model_encoding,
                spec.sample_conversation,
                framework=args.framework or spec.framework,
                progress=Progress("report queries", unit="queries"),
                provider_search=args.provider_search,
            )
        except ToolFilterError as exc:
            raise naming(exc, str(args.queries or args.agent)) from None
        live = None
        if client is not None:
            from sk_toolfilter.measure.live_search import measure_live, write_live

            progress = Progress("live requests", unit="queries")
            rows = await measure_live(spec, tools.kernel, tools.manager, queries, client, progress)
            live = write_live(rows, spec.model.name, args.out)
    print(render_terminal(report))
    paths = write_report(report, args.out)
    print(f"\nWrote {paths['markdown']}, {paths['json']}, {paths['chart']} and {paths['html']}")
    if live is not None:
        print(f"\n{live.read_text()}\nWrote {live}")
    return 0


def _with_filtering(spec: Any, **changes: Any) -> Any:
    """The agent spec with `changes` to its ``tool_filtering`` block."""
    return spec.model_copy(update={"tool_filtering": spec.tool_filtering.model_copy(update=changes)})


def _inspecting(spec: Any) -> Any:
    """The agent spec for a command that only looks: what learning keeps (its file, the shared table) is
    read, never written (``learning.read_only``), so inspecting an app's learning never changes it."""
    return _with_filtering(spec, learning=spec.tool_filtering.learning.model_copy(update={"read_only": True}))


def _live_client(args: argparse.Namespace, spec: Any) -> Any:
    """``report --provider-search --live``: the model block's Responses client (None without --live)."""
    if not args.live:
        return None
    if not args.provider_search:
        raise ConfigError("report: --live measures provider tool search; add --provider-search")
    from sk_toolfilter.measure.live_search import live_client

    return live_client(spec)


def _read_queries(path: Path) -> list[Any]:
    from sk_toolfilter.agents.agent_file import SampleQuery
    from sk_toolfilter.basics.errors import ConfigError
    from sk_toolfilter.basics.input_files import json_lines, json_object, read_text

    if path.suffix != ".jsonl":
        return [SampleQuery(query=line.strip()) for line in read_text(path, "queries").splitlines() if line.strip()]
    queries = []
    for where, value in json_lines(path, "queries"):
        raw = json_object(value, where)
        try:
            query = SampleQuery(query=raw["query"], expect=raw.get("gold") or raw.get("expect") or [])
            queries.append(query.located(where))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{where}: expected a JSON object with 'query' ({type(exc).__name__})") from None
    return queries


async def cmd_chat(args: argparse.Namespace) -> int:
    from sk_toolfilter.agents.agent import LoadedAgent, load_agent
    from sk_toolfilter.measure.report import plural

    async with await load_agent(
        args.agent, kernel=await _kernel_from(args), progress=Progress("embedding tools", unit="tools")
    ) as loaded:
        count = loaded.manager.catalog_size  # the agent's tools, as the report counts them
        print(
            f"{loaded.spec.name} ({count} {plural(count, 'tool')}, filtering "
            f"{'on' if loaded.manager.config.enabled else 'off'}, {loaded.spec.framework}). "
            "Empty line or Ctrl-D to quit."
        )
        # The conversation lives in the framework's own thread (SK) or session (Agent Framework).
        memory = None if isinstance(loaded, LoadedAgent) else loaded.agent.create_session()
        while True:
            try:
                line = input("you> ").strip()
            except EOFError:
                break
            if not line:
                break
            try:
                if isinstance(loaded, LoadedAgent):
                    response = await loaded.agent.get_response(messages=line, thread=memory)
                    memory, text, sent = response.thread, response.message.content, loaded.service.last_selection
                else:
                    reply = await loaded.agent.run(line, session=memory)
                    text, sent = reply.text, loaded.tool_filter.chat_middleware.last_selection
            except Exception as exc:  # the model's server failed this turn: say which and go on
                print(f"sk-toolfilter: this turn failed: {_model_failure(exc, loaded.spec.model)}", file=sys.stderr)
                continue
            print(f"{loaded.spec.name}> {text}")
            print(f"  [tools sent: {', '.join(sent) or 'none'}]")
    return 0


def _model_failure(exc: BaseException, model: Any) -> str:
    """One line for a failed model request: the server it went to, what failed, what to check."""
    from sk_toolfilter.agents.agent import server_url
    from sk_toolfilter.basics.redaction import redact_text

    chain = [exc]
    while chain[-1].__cause__ is not None and len(chain) < 8:
        chain.append(chain[-1].__cause__)
    root = chain[-1]
    url = server_url(model) or "https://api.openai.com/v1"
    kind = type(root).__name__
    if "Connect" in kind or "Connection" in kind or "Timeout" in kind:
        advice = "is the server running and the URL right? (model.base_url / OPENAI_BASE_URL)"
    elif "Auth" in kind or "Permission" in kind:
        advice = "check the API key (model.api_key / OPENAI_API_KEY)"
    else:
        advice = "run with -v for details"
    message = " ".join(str(root).split())[:200]
    return redact_text(f"model {model.name!r} at {url}: {kind}: {message}; {advice}")


async def cmd_learn(args: argparse.Namespace) -> int:
    """``learn AGENT --calls FILE``: learn past requests and the tools they called (learning from use),
    kept in ``learning.file``."""
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file
    from sk_toolfilter.measure.calls_file import learn_calls_file
    from sk_toolfilter.selection.learning import describe_trust

    spec = load_agent_file(args.agent)
    learning = spec.tool_filtering.learning
    if not learning.enabled or not learning.file:
        raise ConfigError(
            f"{args.agent}: 'learn' keeps what it learns in tool_filtering.learning.file with learning.enabled: "
            f"true (now: enabled {str(learning.enabled).lower()}, file {learning.file or 'unset'})"
        )
    async with await open_toolset(
        spec, kernel=await _kernel_from(args), progress=Progress("embedding tools", unit="tools")
    ) as tools:
        manager = tools.manager
        if not manager.index.has_embeddings:
            raise ConfigError(f"{args.agent}: learning from use needs an embedding service (search_method: bm25)")
        kept = manager.learning.file
        if kept is not None and kept.blocked is not None:  # never overwritten: refused before anything is learned
            raise ConfigError(f"{args.agent}: learning.file {kept.path}: {kept.blocked}; nothing was learned")
        result = await learn_calls_file(
            args.calls,
            manager.index,
            manager.learning.memory,
            manager.learning.catalog,
            lambda name: manager.learning.permits(name, manager.index, manager.discovery_names),
            Progress("learning requests", unit="requests"),
        )
        memory = manager.learning.memory
        if not manager.learning.flush() and kept is not None:
            why = kept.blocked or kept.write_error or "it is read-only here"
            raise ConfigError(
                f"{args.agent}: learning.file {kept.path} could not be written ({why}): the {len(memory):,} requests "
                "learned were in this command's memory only and are lost at exit; point learning.file at a "
                "writable file path (not a directory) and run learn again"
            )
    print(result.summary(args.calls))
    print(f"{learning.file}: {len(memory)} requests remembered ({memory.nbytes / 2**20:.1f} MB)")
    print(describe_trust(memory))
    return 0


async def cmd_serve(args: argparse.Namespace) -> int:
    """``serve``: the agent file's tools as an MCP server over stdio (stdout is the protocol's: progress
    and warnings go to stderr) or streamable HTTP (``--http``). Learning from use is written where the
    agent file says, on exit."""
    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.gateway.callers import parse_address
    from sk_toolfilter.gateway.desk import GatewayDesk, GatewayNames
    from sk_toolfilter.gateway.mcp_server import build_server, serve_http, serve_stdio

    names = GatewayNames(args.search_name, args.describe_name, args.call_name)
    if len(set(vars(names).values())) < 3:
        raise ConfigError("serve: the search, describe and call tools need three different names")
    address = parse_address(args.http) if args.http else None
    if args.callers and address is None:
        raise ConfigError("serve: --callers is for --http (over stdio the client that starts it is its one caller)")
    progress = Progress("embedding tools", unit="tools")
    async with await open_toolset(args.agent, kernel=await _kernel_from(args), progress=progress) as tools:
        tools.manager.learning.scope_value(args.scope)  # (refused on a 'shared' agent, as everywhere)
        desk = GatewayDesk(tools.manager, tools.kernel, names, scope=args.scope, expose_found=args.expose == "found")
        catalog = [t.full_name for t in await tools.manager.discover("")]
        clash = sorted(set(vars(names).values()) & {*catalog, *tools.manager.config.always_include})
        if clash:
            raise ConfigError(f"serve: a tool of the agent is named like a gateway tool ({clash[0]}): rename one")
        server = build_server(desk, tools.spec.name or "sk-toolfilter")
        if address is None:
            await serve_stdio(server)
        else:
            await serve_http(server, *address, _gateway_callers(args, address[0], catalog), args.scope_header)
    return 0


def _gateway_callers(args: argparse.Namespace, host: str, catalog: list[str]) -> Callers | None:
    """Who may use the HTTP gateway: the callers file, else one token from the environment, else (on a
    loopback address only) anyone on this machine."""
    from sk_toolfilter.gateway.callers import TOKEN_ENV, Callers, is_loopback, load_callers

    if args.callers:
        return load_callers(args.callers, catalog)
    if os.environ.get(TOKEN_ENV):
        return Callers.single(os.environ[TOKEN_ENV], args.scope)
    if not is_loopback(host):
        raise ConfigError(
            f"serve: --http {args.http} is reachable from other machines; give callers their tokens "
            f"(--callers FILE, or one token in ${TOKEN_ENV}), or bind to 127.0.0.1"
        )
    return None


async def cmd_learned(args: argparse.Namespace) -> int:
    """``learned AGENT [--json]``: what learning from use holds for the agent, and whether it acts yet."""
    import json

    from sk_toolfilter.agents.agent import open_toolset
    from sk_toolfilter.agents.agent_file import load_agent_file

    if (args.agent is None) == (args.file is None):
        raise ConfigError("learned: name an agent file or --file PATH (one of them)")
    if args.file is not None:
        from sk_toolfilter.selection.learning import learning_of_file

        learning = learning_of_file(args.file)
        summary = learning.summary(learning.scope_value(args.scope))
        where = args.file
    else:
        spec = _inspecting(load_agent_file(args.agent))
        if not spec.tool_filtering.learning.enabled:
            raise ConfigError(f"{args.agent}: learning.enabled is false: nothing is learned or kept")
        async with await open_toolset(spec, kernel=await _kernel_from(args), embed=False) as tools:
            learning = tools.manager.learning
            summary = learning.summary(learning.scope_value(args.scope))
        where = args.agent
    kept = summary["file"]
    if kept is not None and kept["state"] != "read" and not summary["requests"]:
        # nothing to show, and the reason is the file's: a missing file is not an empty memory
        raise ConfigError(f"{where}: learning file {kept['path']}: {kept['state']}")
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(learned_lines(summary))
    return 0


def learned_lines(summary: dict[str, Any]) -> str:
    """``learned`` in words: what is held, where, and whether it acts yet (and why not)."""
    if not summary["requests"]:
        where = ", ".join(summary["where"])
        return f"nothing learned yet (kept in {where}); every request whose model calls a tool teaches a row"
    lines = [
        f"{summary['requests']:,} requests remembered, {summary['tools']:,} tools, {summary['conversations']:,} "
        f"conversations ({summary['megabytes']:.1f} MB) in {', '.join(summary['where'])}",
        f"oldest {summary['oldest']}, newest {summary['newest']}",
        f"trust {summary['trust']:.2f}: "
        + (
            "learning reorders the shortlist"
            if summary["applies"]
            else f"only near-copies act yet (cosine >= {summary['plain_similarity']:.2f}); trust rises when similar "
            "requests call the same tools"
        )
        + f" (a tool moves only on the evidence of {summary['min_conversations']} conversations)",
    ]
    for scope, held in summary["scopes"].items():
        lines.append(f"  scope {scope}: {held['requests']:,} requests, trust {held['trust']:.2f}")
    lines.append("tools learned (requests that called each):")
    lines += [f"  {name}: {count:,}" for name, count in summary["learned_tools"].items()]
    return "\n".join(lines)


async def cmd_forget(args: argparse.Namespace) -> int:
    """``forget AGENT``: wipe what learning from use learned for the agent (its ``learning.file``)."""
    from sk_toolfilter.agents.agent_file import load_agent_file
    from sk_toolfilter.store.learning_file import forget_file

    spec = load_agent_file(args.agent)
    path, store = spec.tool_filtering.learning.file, spec.tool_filtering.index.store
    if not path and store == "memory":
        raise ConfigError(
            f"{args.agent}: neither tool_filtering.learning.file nor a shared index.store is set: nothing is kept to "
            "forget (what a process learns in memory goes with it)"
        )
    if path:
        learning = spec.tool_filtering.learning  # the catalog the agent learns under (see open_toolset)
        held = forget_file(path, learning.catalog or spec.tool_filtering.index.catalog)
        print(f"{path}: {f'{held} learned requests forgotten' if held else 'nothing was learned'}")
    if store != "memory":
        from sk_toolfilter.agents.agent import open_toolset

        if not spec.tool_filtering.learning.enabled:
            raise ConfigError(f"{args.agent}: learning.enabled is false: the shared store keeps nothing learned")
        # This command's own manager learns nothing and syncs nothing in (it would write it back on close).
        spec.tool_filtering.learning = spec.tool_filtering.learning.model_copy(update={"enabled": False})
        async with await open_toolset(spec, kernel=await _kernel_from(args), embed=False) as tools:
            shared = tools.manager.index_store
            table = shared.learning_table(0.0) if shared is not None else None
            if table is None:
                raise ConfigError(f"{args.agent}: the index store {store!r} keeps nothing learned")
            print(f"index store: {await table.forget()} learned requests of catalog {table.catalog!r} forgotten")
    return 0


async def cmd_eval(args: argparse.Namespace) -> int:
    from sk_toolfilter.measure.eval_run import run_conversation_eval, run_eval

    return await (run_conversation_eval(args) if args.conversations else run_eval(args))


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _add_no_wait(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-wait",
        action="store_true",
        help="answer at once: above embedding.background_above tools, rank with BM25 instead of waiting for the "
        "vectors (by default the command waits, showing progress, and fills the embedding cache)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The command line: one sub-parser per command (each built by its own ``_add_*`` function)."""
    parser = argparse.ArgumentParser(
        prog="sk-toolfilter",
        description="Dynamic tool loading for Semantic Kernel and Agent Framework agents: index, search, measure.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log details (INFO)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_validate, _add_search, _add_report, _add_index, _add_chat, _add_eval, _add_learning, _add_serve):
        add(sub)
    return parser


Commands = Any
"""argparse's sub-parser collection (``parser.add_subparsers()``)."""


def _add_validate(sub: Commands) -> None:
    p = sub.add_parser("validate", help="load an agent file, connect its tool sources, index them")
    p.add_argument("agent", help="agent YAML file")
    p.add_argument("--kernel", metavar="MODULE:FACTORY", help=KERNEL_HELP)
    _add_no_wait(p)
    p.set_defaults(run=cmd_validate)


def _add_search(sub: Commands) -> None:
    for command, text in (
        ("search", "rank the tools of an agent file for a query"),
        ("explain", "why each tool is sent or not for a query (search --explain): scores, cut, pins, the pick"),
    ):
        p = sub.add_parser(command, help=text)
        p.add_argument("agent", help="agent YAML file")
        p.add_argument("query")
        p.add_argument("--method", choices=["semantic", "bm25", "hybrid"])
        p.add_argument("--top-k", type=positive_int, help="tools to keep (overrides the file)")
        if command == "search":
            p.add_argument("--explain", action="store_true", help="per tool: scores per method, why kept or cut")
        p.add_argument("--limit", type=positive_int, default=20, help="rows of the explanation (default 20)")
        p.add_argument("--scope", help=SCOPE_HELP)
        p.add_argument("--kernel", metavar="MODULE:FACTORY", help=KERNEL_HELP)
        _add_no_wait(p)
        p.set_defaults(run=cmd_search, explain=command == "explain")


def _add_report(sub: Commands) -> None:
    from sk_toolfilter.agents.agent_file import FRAMEWORKS

    p = sub.add_parser("report", help="token-savings report: tools payload with filtering off vs on")
    p.add_argument("agent", help="agent YAML file")
    p.add_argument(
        "--queries",
        help="queries file: one per line (.txt), or JSON lines with 'query' and optionally 'gold' (the tools it "
        "needs) (.jsonl; docs: the queries and calls formats)",
    )
    p.add_argument("--out", default="report", help="output folder (default: report)")
    p.add_argument("--model-encoding", default="o200k_base", choices=["o200k_base", "cl100k_base"])
    p.add_argument("--limit", type=positive_int, help="report on the first N queries only")
    p.add_argument("--selection-mode", choices=["fresh", "sticky"], help="override tool_filtering.selection_mode")
    p.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        help="whose OpenAI client sends the requests (default: the agent file's `framework`, else semantic-kernel)",
    )
    p.add_argument(
        "--provider-search",
        action="store_true",
        help="also estimate the tools tokens with provider tool search (the selection loaded, the rest deferred: "
        "OpenAI's documented cost; not measured against a live endpoint)",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="with --provider-search: measure the billed input tokens off / on / provider search against the "
        "model block's real endpoint (OpenAI Responses, gpt-5.4 or later; three short paid requests per query; "
        "needs the agent-framework extra)",
    )
    p.add_argument("--kernel", metavar="MODULE:FACTORY", help=KERNEL_HELP)
    _add_no_wait(p)
    p.set_defaults(run=cmd_report)


def _add_index(sub: Commands) -> None:
    p = sub.add_parser("index", help="the shared tool index (index.store): push the agent's catalog, or its status")
    p.add_argument("action", choices=["push", "status"], help="push: embed new or changed tools, switch the version")
    p.add_argument("agent", help="agent YAML file")
    p.add_argument("--catalog", help="catalog name in the store (default: index.catalog, else the agent's name)")
    p.add_argument("--kernel", metavar="MODULE:FACTORY", help=KERNEL_HELP)
    p.set_defaults(run=cmd_index)


def _add_chat(sub: Commands) -> None:
    p = sub.add_parser("chat", help="chat with the agent (needs an API key or a local OpenAI-compatible server)")
    p.add_argument("agent", help="agent YAML file")
    p.add_argument("--kernel", metavar="MODULE:FACTORY", help=KERNEL_HELP)
    p.set_defaults(run=cmd_chat)


def _add_eval(sub: Commands) -> None:
    p = sub.add_parser("eval", help="retrieval quality on a labelled query set (recall@k, nDCG, MRR, tokens)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--tools", help="catalog file (tools.jsonl, or OpenAI tools JSON)")
    source.add_argument("--agent", help="agent YAML file whose tools are evaluated")
    labelled = p.add_mutually_exclusive_group(required=True)
    labelled.add_argument("--queries", help="labelled queries (dev.jsonl format; docs: the queries formats)")
    labelled.add_argument(
        "--conversations",
        help="recorded conversations, one step per line (bfcl_multiturn format): replayed through the filtering "
        "wrapper; step recall, turn completeness, tools and tokens per request",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a tool_filtering setting, e.g. --set top_k=8 --set agent_loop.co_usage=false (repeatable)",
    )
    p.add_argument("--methods", default="bm25,semantic,hybrid")
    p.add_argument("--k", default="1,3,5,10", help="cut-offs for recall@k and complete@k")
    p.add_argument("--by-category", action="store_true", help="also report metrics per query category")
    p.add_argument(
        "--rerank",
        choices=("none", "learned", "cross-encoder", "oracle", "llm"),
        default="none",
        help="also measure a second stage over the first stage's shortlist (rerank.shortlist): learned = the "
        "learned ranker (rerank: learned, top 30), cross-encoder = the cross-encoder (top 10), oracle = the best "
        "possible pick (the ceiling, top 20), llm = the chat model picking (top 20; the agent's model, or "
        "OPENAI_API_KEY / OPENAI_BASE_URL); --queries only",
    )
    p.add_argument(
        "--learn",
        metavar="FILE",
        help="learning from use: learn this calls file first (JSON lines of 'query' and 'tools' or 'gold'), then "
        "measure each method cold and learned (--queries only)",
    )
    p.add_argument(
        "--scope",
        help="with --agent: also measure each method with what the agent learned (its learning.file or shared "
        "table, read, never written) as the requests of this scope read it (the value of learning.scope's key, "
        "e.g. a tenant id: hashed as the app hashes it); --queries only",
    )
    p.add_argument("--out", help="folder for eval.json and eval.md (each query's hits and misses too)")
    p.add_argument("--limit", type=positive_int, help="evaluate only the first N queries")
    p.set_defaults(run=cmd_eval)


def _add_learning(sub: Commands) -> None:
    p = sub.add_parser("learn", help="learning from use: learn past requests and the tools they called")
    p.add_argument("agent", help="agent YAML file (with tool_filtering.learning: {enabled: true, file: ...})")
    p.add_argument(
        "--calls",
        required=True,
        help="JSON lines: {'query': ..., 'tools': [...]} per request (a queries file with 'gold' works too)",
    )
    p.add_argument("--kernel", metavar="MODULE:FACTORY", help=KERNEL_HELP)
    p.set_defaults(run=cmd_learn)
    p = sub.add_parser("learned", help="learning from use: what the agent learned, its trust, whether it acts")
    p.add_argument("agent", nargs="?", help="agent YAML file (or --file)")
    p.add_argument("--file", help="a learning file to read without an agent file (its own catalog and model)")
    p.add_argument("--scope", help=SCOPE_HELP)
    p.add_argument("--json", action="store_true", help="as JSON: requests, tools, conversations, trust, where, ...")
    p.add_argument("--kernel", metavar="MODULE:FACTORY", help=KERNEL_HELP)
    p.set_defaults(run=cmd_learned)
    p = sub.add_parser("forget", help="learning from use: wipe what the agent learned (learning.file, shared store)")
    p.add_argument("agent", help="agent YAML file")
    p.add_argument("--kernel", metavar="MODULE:FACTORY", help=KERNEL_HELP)
    p.set_defaults(run=cmd_forget)


def _add_serve(sub: Commands) -> None:
    p = sub.add_parser(
        "serve", help="an MCP gateway: the agent's whole catalog behind ranked search, for any MCP client"
    )
    p.add_argument("agent", help="agent YAML file")
    p.add_argument("--scope", help="learn and read learning as this scope (learning.scope's value, e.g. a team)")
    p.add_argument("--search-name", default="search_tools", help="the search tool's name (default search_tools)")
    p.add_argument("--describe-name", default="describe_tool", help="the describe tool's name (default describe_tool)")
    p.add_argument("--call-name", default="call_tool", help="the call tool's name (default call_tool)")
    p.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (a bare PORT: 127.0.0.1); off "
        "loopback it needs --callers or $SK_TOOLFILTER_GATEWAY_TOKEN",
    )
    p.add_argument(
        "--callers",
        metavar="FILE",
        help="YAML: each HTTP caller's bearer token (token_env or token_sha256), allow-list and learning scope",
    )
    p.add_argument(
        "--scope-header",
        metavar="NAME",
        help="over HTTP, a request header whose value is that request's learning scope (set by your proxy)",
    )
    p.add_argument(
        "--expose",
        choices=("none", "found"),
        default="none",
        help="found: the tools a session's searches found join its tools/list (list_changed; for clients that re-list)",
    )
    p.add_argument("--kernel", metavar="MODULE:FACTORY", help=KERNEL_HELP)
    p.set_defaults(run=cmd_serve)


SCOPE_HELP = (
    "as the requests of this scope (the value of learning.scope's key, e.g. a tenant id): hashed as the app "
    "hashes it, never printed"
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(message)s",
    )
    for handler in logging.getLogger().handlers:  # -v: other libraries' records (httpx, openai) too
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    if not args.verbose:
        for noisy in ("semantic_kernel", "httpx"):
            logging.getLogger(noisy).setLevel(logging.ERROR)
        # The MCP SDK logs a traceback per line a server writes that is not JSON-RPC; the MCP source
        # reports those itself, in one line.
        logging.getLogger("mcp").setLevel(logging.CRITICAL)
    with redacted_output():  # every line printed, a -v traceback included, is redacted
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(args.run(args))
    except ToolFilterError as exc:
        if args.verbose:
            traceback.print_exc()
        print(f"sk-toolfilter: error: {_one_line(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, ConfigError) else 1  # 2: the user's input (flags, files)
    except KeyboardInterrupt:
        print("sk-toolfilter: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # an unexpected failure still gets one clear line, not a traceback
        if args.verbose:
            traceback.print_exc()
            return 1
        print(
            f"sk-toolfilter: error: {type(exc).__name__}: {_one_line(exc)} (run with -v for details)", file=sys.stderr
        )
        return 1


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[0] if len(lines) == 1 else f"{lines[0]} {'; '.join(lines[1:])}"


if __name__ == "__main__":
    sys.exit(main())
