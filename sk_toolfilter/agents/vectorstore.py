"""``type: vectorstore`` tools: document search over a file or folder, kept in an SK vector store.

HoloDeck's agent files declare document-search tools this way. Each becomes one kernel function,
``vectorstore-<name>(query)``, returning the best passages with their source. Passages come from
``source`` — JSON (a list of records, or the list at ``record_path``), JSONL, Markdown or text,
chunked at paragraph boundaries (``chunk_size`` characters, ``chunk_overlap`` carried over) — and
are embedded with the agent's configured embedding service (the offline local model by default,
so a file works without keys) through :func:`~sk_toolfilter.retrieval.embeddings.embed_texts`
(bounded, cleaned, validated). They are stored through Semantic Kernel's vector-store abstraction:
an ``InMemoryCollection`` (``database`` unset or ``in-memory``) or a ``ChromaCollection`` on a
Chroma server (``database: {provider: chromadb, connection_string: http://host:8000}``; the
collection is rebuilt from the source at every start, so it never serves stale passages).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.embedding_generator_base import EmbeddingGeneratorBase
from semantic_kernel.functions import KernelFunctionFromMethod, KernelPlugin, kernel_function

from sk_toolfilter.agents.agent_file import AgentSpec, VectorDatabase, VectorstoreSource
from sk_toolfilter.basics.errors import ConfigError, ToolSourceError, install_line
from sk_toolfilter.basics.input_files import json_lines, parse_json, read_text
from sk_toolfilter.basics.redaction import library_logger, redact_url
from sk_toolfilter.retrieval.embeddings import (
    catalog_call_timeout,
    create_embedding_service,
    embed_texts,
    embedding_model_id,
)
from sk_toolfilter.retrieval.metadata import KEYWORDS_PROPERTY
from sk_toolfilter.retrieval.text import tokenize

logger = library_logger(__name__)

PLUGIN = "vectorstore"
"""The plugin every vectorstore tool's function belongs to (``vectorstore-search_papers``)."""
DOCUMENT_SUFFIXES = (".json", ".jsonl", ".md", ".markdown", ".txt")
TEXT_FIELDS = ("title", "text", "content", "body", "abstract", "summary", "description")
DEFAULT_CHUNK = 1000
DEFAULT_OVERLAP = 100
MAX_PASSAGES = 50_000
MAX_FILE_BYTES = 50_000_000
MAX_ANSWER_CHARS = 6000
IGNORED_KEYS = ("record_prefix", "meta_prefix", "delimiter", "defer_loading")


@dataclass(frozen=True)
class Passage:
    """One chunk of a document and where it came from."""

    key: str
    text: str
    source: str


async def add_vectorstore(
    kernel: Kernel,
    source: VectorstoreSource,
    spec: AgentSpec,
    where: str,
    service: EmbeddingGeneratorBase | None = None,
) -> int:
    """Load, chunk and embed `source`'s documents and add its search function to `kernel`.

    `service` is the agent's embedding service (created from ``tool_filtering.embedding`` when not
    given); pass the filter's own to load the local model once.
    """
    embedding = spec.tool_filtering.embedding
    service = service or create_embedding_service(embedding)
    if service is None:
        raise ConfigError(f"{where}: a vectorstore tool needs an embedding service (embedding.provider is 'none')")
    source = _adapt_to_service(source, where, embedding_model_id(service))
    root = None if source.allow_outside_agent_folder else spec.base_dir
    passages = load_passages(spec.resolve(source.source), source, where, root=root)
    call_timeout = catalog_call_timeout(embedding.timeout_seconds, min(embedding.batch_size, len(passages)))
    vectors = await embed_texts(service, [p.text for p in passages], embedding.batch_size, timeout=call_timeout)
    collection, scores_are_distances = await _collection(source, where, int(vectors.shape[1]))
    await collection.upsert(
        [
            {"key": p.key, "text": p.text, "source": p.source, "embedding": v.tolist()}
            for p, v in zip(passages, vectors, strict=True)
        ]
    )
    function = _search_function(source, service, collection, scores_are_distances, embedding.timeout_seconds)
    # Ranking matches what the documents are about, not only the tool's (often generic) description.
    function.metadata.additional_properties = {KEYWORDS_PROPERTY: topic_words([p.text for p in passages])}
    plugin = kernel.plugins.get(PLUGIN)
    if plugin is None:
        kernel.add_plugin(KernelPlugin(name=PLUGIN, description="Document search", functions=[function]))
    else:
        if function.name in plugin.functions:
            raise ConfigError(f"{where}: another vectorstore tool is already named {function.name!r}")
        plugin.add([function])  # SK's KernelPlugin.add takes a list or a dict, not one function
    logger.info("sk-toolfilter: %s: %d passages from %s", where, len(passages), source.source)
    return 1


def load_passages(path: Path, source: VectorstoreSource, where: str, *, root: Path | None = None) -> list[Passage]:
    """The passages of a file or of every document file under a folder (sorted, recursive).

    With `root` (the agent file's folder), every file read must lie inside it once symlinks are
    resolved: a downloaded agent file cannot serve ``~/.ssh`` or ``../private`` to the model.
    """
    if root is not None:
        _confine(path, root, where)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in DOCUMENT_SUFFIXES)
    elif path.is_file():
        files = [path]
    else:
        raise ConfigError(f"{where}.source: {path} does not exist")
    size = source.chunk_size or DEFAULT_CHUNK
    overlap = min(source.chunk_overlap if source.chunk_overlap is not None else DEFAULT_OVERLAP, size // 2)
    passages: list[Passage] = []
    for file in files:
        if root is not None:
            _confine(file, root, where)
        if file.stat().st_size > MAX_FILE_BYTES:
            raise ConfigError(f"{where}.source: {file} is larger than {MAX_FILE_BYTES:,} bytes")
        label = file.name if file == path else str(file.relative_to(path))
        for title, text in _documents(file, source, label, where):
            for number, chunk in enumerate(chunk_text(text, size, overlap), 1):
                passages.append(Passage(f"{title}#{number}", chunk, title))
                if len(passages) > MAX_PASSAGES:
                    raise ConfigError(f"{where}.source: more than {MAX_PASSAGES:,} passages")
    if not passages:
        raise ConfigError(f"{where}.source: no text found in {path}")
    return passages


def _confine(path: Path, root: Path, where: str) -> None:
    real, real_root = path.resolve(), root.resolve()
    if real != real_root and real_root not in real.parents:
        link = " (through a symbolic link)" if real != Path(os.path.normpath(path.absolute())) else ""
        raise ConfigError(
            f"{where}.source: {path} is outside the agent file's folder {real_root}{link}; move the documents "
            "there, or set allow_outside_agent_folder: true on this tool if you trust the agent file"
        )


TOPIC_WORDS = 30
"""Words a vectorstore tool is ranked by besides its description (see :func:`topic_words`)."""


def topic_words(texts: list[str], count: int = TOPIC_WORDS) -> list[str]:
    """What a set of passages is about: the content words found in most passages (then most often).

    A FAQ's tool described as "Search frequently asked questions" is then found for "What payment
    methods do you accept?" because its passages speak of payment.
    """
    in_passages: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for text in texts:
        words = [w for w in tokenize(text, stem=False) if len(w) >= 3 and not w.isdigit()]
        total.update(words)
        in_passages.update(set(words))
    ranked = sorted(in_passages, key=lambda w: (-in_passages[w], -total[w], w))
    return ranked[:count]


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """Paragraphs merged up to `size` characters; a chunk starts with the last `overlap` characters of
    the previous one; a paragraph longer than `size` is cut at spaces."""
    paragraphs = [" ".join(p.split()) for p in text.split("\n\n")]
    pieces: list[str] = []
    for paragraph in filter(None, paragraphs):
        while len(paragraph) > size:
            cut = paragraph.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            pieces.append(paragraph[:cut])
            paragraph = paragraph[cut:].strip()
        if paragraph:
            pieces.append(paragraph)
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + 2 + len(piece) > size:
            chunks.append(current)
            tail = current[-overlap:] if overlap else ""
            current = f"{tail[tail.find(' ') + 1 :] if ' ' in tail else tail} {piece}".strip() if tail else piece
        else:
            current = f"{current}\n\n{piece}" if current else piece
    if current:
        chunks.append(current)
    return chunks


def _documents(file: Path, source: VectorstoreSource, label: str, where: str) -> list[tuple[str, str]]:
    """(source label, text) of every document in one file."""
    try:
        suffix = file.suffix.lower()
        if suffix in (".md", ".markdown", ".txt"):
            return [(label, read_text(file, "document"))]
        if suffix == ".jsonl":
            records: Any = [value for _, value in json_lines(file, "document")]
        else:
            records = _records_at(parse_json(read_text(file, "document"), str(file)), source.record_path)
    except ConfigError as exc:
        raise ConfigError(f"{where}.source: {exc}") from None
    documents = []
    for position, record in enumerate(records if isinstance(records, list) else [records]):
        text = _record_text(record, source)
        if text.strip():
            documents.append((_record_label(record, source, label, position), text))
    return documents


def _records_at(data: Any, record_path: str | None) -> Any:
    if record_path:
        for part in record_path.split("."):
            data = data.get(part) if isinstance(data, dict) else None
        return data or []
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)]
        return lists[0] if len(lists) == 1 else [data]
    return data


def _record_text(record: Any, source: VectorstoreSource) -> str:
    if isinstance(record, str):
        return record
    if not isinstance(record, dict):
        return ""
    wanted = [source.vector_field] if isinstance(source.vector_field, str) else source.vector_field
    fields = wanted or [f for f in TEXT_FIELDS if f in record] or [k for k, v in record.items() if isinstance(v, str)]
    parts = [f"{record[f]}" for f in fields if record.get(f) not in (None, "")]
    meta = [f"{f}: {record[f]}" for f in source.meta_fields or [] if record.get(f) not in (None, "")]
    return source.field_separator.join([*parts, *meta])


def _record_label(record: Any, source: VectorstoreSource, label: str, position: int) -> str:
    if isinstance(record, dict):
        for field in (source.id_field, "id", "title", "name"):
            if field and record.get(field) not in (None, ""):
                return f"{label}: {record[field]}"
    return f"{label}[{position}]"


async def _collection(source: VectorstoreSource, where: str, dimensions: int) -> tuple[Any, bool]:
    """An empty SK collection for the tool's passages — in memory, or in Chroma (``database``) — and
    whether its scores are distances. Both use cosine; SK's in-memory store reports it as a
    similarity, Chroma's "cosine" space as a distance (1 - similarity).
    """
    from semantic_kernel.data.vector import DistanceFunction, VectorStoreCollectionDefinition, VectorStoreField

    definition = VectorStoreCollectionDefinition(
        fields=[
            VectorStoreField("key", name="key", type="str"),
            VectorStoreField("data", name="text", type="str"),
            VectorStoreField("data", name="source", type="str"),
            VectorStoreField(
                "vector",
                name="embedding",
                type="float",
                dimensions=dimensions,
                distance_function=DistanceFunction.COSINE_SIMILARITY,
            ),
        ]
    )
    name = f"sk_toolfilter_{source.name}"
    provider, url = _database(source)
    collection: Any
    if provider == "chromadb":
        try:
            collection = _chroma_collection(definition, name, url, where)
            if await collection.collection_exists():
                await collection.ensure_collection_deleted()  # the source file is the truth: rebuild
            await collection.ensure_collection_exists()
        except ConfigError:
            raise
        except Exception as exc:
            raise ToolSourceError(f"{where}: Chroma at {redact_url(url)} is not reachable ({exc})") from None
        return collection, True
    from semantic_kernel.connectors.in_memory import InMemoryCollection

    collection = InMemoryCollection(record_type=dict, definition=definition, collection_name=name)
    await collection.ensure_collection_exists()
    return collection, False


def _database(source: VectorstoreSource) -> tuple[str, str]:
    """(provider, URL) of the tool's ``database`` block; unsupported providers warn and use memory."""
    database = source.database
    provider = (database.provider if isinstance(database, VectorDatabase) else database) or "in-memory"
    provider = provider.lower().replace("_", "-")
    if provider in ("chromadb", "chroma"):
        secret = database.connection_string if isinstance(database, VectorDatabase) else None
        return "chromadb", secret.get_secret_value() if secret is not None else default_chroma_url()
    if provider not in ("in-memory", "inmemory", "memory"):
        logger.warning(
            "sk-toolfilter: vectorstore tool %s: database provider %r is not supported; the passages are kept in "
            "Semantic Kernel's in-memory vector store (supported: in-memory, chromadb)",
            source.name,
            provider,
        )
    return "in-memory", ""


def default_chroma_url() -> str:
    """Chroma's own client settings from the environment (``CHROMA_SERVER_HOST``,
    ``CHROMA_SERVER_HTTP_PORT``), else ``http://localhost:8000``."""
    host = os.environ.get("CHROMA_SERVER_HOST") or "localhost"
    port = os.environ.get("CHROMA_SERVER_HTTP_PORT") or "8000"
    return f"http://{host}:{port}"


def _chroma_collection(definition: Any, name: str, url: str, where: str) -> Any:
    try:
        import chromadb
        from semantic_kernel.connectors.chroma import ChromaCollection
    except ImportError:
        raise ConfigError(
            f"{where}: database provider chromadb needs the Chroma client: {install_line('chroma')}"
        ) from None
    parts = urlsplit(url if "://" in url else f"http://{url}")
    client = chromadb.HttpClient(
        host=parts.hostname or "localhost",
        port=parts.port or (443 if parts.scheme == "https" else 8000),
        ssl=parts.scheme == "https",
    )
    return ChromaCollection(record_type=dict, definition=definition, collection_name=name, client=client)


def _search_function(
    source: VectorstoreSource,
    service: EmbeddingGeneratorBase,
    collection: Any,
    scores_are_distances: bool,
    timeout: float,
) -> KernelFunctionFromMethod:
    description = source.description or f"Search the documents in {source.source} for passages about a query."

    @kernel_function(name=source.name, description=description)
    async def search(query: Annotated[str, "What to look for, in a few words"]) -> str:
        if not query.strip():
            return "error: give a query to search for."
        vector = (await embed_texts(service, [query[:4000]], timeout=timeout))[0]
        results = await collection.search(vector=vector.tolist(), top=source.top_k)
        lines: list[str] = []
        shown = 0
        async for result in results.results:
            if result.score is None:
                similarity = math.nan
            else:
                similarity = 1.0 - float(result.score) if scores_are_distances else float(result.score)
            if source.min_similarity_score is not None and similarity < source.min_similarity_score:
                continue
            shown += 1
            lines.append(f"[{shown}] {result.record['source']} (similarity {similarity:.2f})")
            lines.append(result.record["text"])
        if not lines:
            return f"No passage in {source.source} matches {query!r}."
        answer = "\n".join(lines)
        return answer if len(answer) <= MAX_ANSWER_CHARS else answer[: MAX_ANSWER_CHARS - 12] + " … [cut]"

    return KernelFunctionFromMethod(method=search, plugin_name=PLUGIN)


def _adapt_to_service(source: VectorstoreSource, where: str, configured: str) -> VectorstoreSource:
    """`source` as it applies with the agent's embedding service: keys with no meaning warned about,
    and a ``min_similarity_score`` set for another model dropped (similarities of two models are on
    different scales: 0.7 suits OpenAI's text-embedding-3 and drops every passage of MiniLM)."""
    _warn_about_ignored_keys(source, where, configured)
    if source.min_similarity_score is not None and source.embedding_model and source.embedding_model != configured:
        logger.warning(
            "sk-toolfilter: %s: min_similarity_score %s was set for %r; similarities of %s are on another scale, "
            "so it is not applied (set min_similarity_score without embedding_model, or with embedding_model %r, "
            "to apply one)",
            where,
            source.min_similarity_score,
            source.embedding_model,
            configured,
            configured,
        )
        return source.model_copy(update={"min_similarity_score": None})
    return source


def _warn_about_ignored_keys(source: VectorstoreSource, where: str, configured: str) -> None:
    ignored = [key for key in IGNORED_KEYS if getattr(source, key) is not None]
    if ignored:
        logger.warning("sk-toolfilter: %s: %s have no meaning here and are ignored", where, ", ".join(ignored))
    if source.embedding_model and source.embedding_model != configured:
        logger.warning(
            "sk-toolfilter: %s: embedding_model %r is not used; passages are embedded with the agent's embedding "
            "service (%s) so queries and passages share one model",
            where,
            source.embedding_model,
            configured,
        )
