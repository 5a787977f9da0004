"""One stored record per tool: its metadata, a content hash, the embedding model and the vector.

Records are immutable and content-addressed: the key hashes the tool's metadata with the model id
and the vector size, so a changed tool (or a new model) is a new record, and a catalog version is
just the list of its records' keys. Readers of an older version keep finding its records while a
writer adds the next one.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sk_toolfilter.retrieval.metadata import ParameterMetadata, ToolMetadata

RECORD_FIELDS = (
    "full_name",
    "plugin",
    "name",
    "description",
    "parameters",
    "keywords",
    "content_hash",
    "model_id",
    "dimensions",
)
"""The data fields of a tool record (besides its key ``id`` and its ``embedding``)."""


def content_hash(tool: ToolMetadata) -> str:
    """SHA-256 of everything ranking reads from the tool: names, description, each parameter's name,
    type, description and whether it is required, keywords (not parameter schemas: ranking never
    reads them, and serializing them canonically was most of the cost of hashing 50,000 tools)."""
    parts = [tool.full_name, tool.plugin, tool.name, tool.description]
    for p in tool.parameters:
        parts += [p.name, p.type, p.description, "1" if p.required else "0"]
    parts.append("\x1d".join(tool.keywords))
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def record_key(tool_hash: str, model_id: str, dimensions: int) -> str:
    """The key of a tool's record for one embedding model and vector size."""
    return hashlib.sha256(f"{tool_hash}\n{model_id}\n{dimensions}".encode()).hexdigest()[:40]


@dataclass(frozen=True)
class StoredTool:
    """A tool as the store holds it: metadata, key, content hash, and its unit vector (float32)."""

    key: str
    tool: ToolMetadata
    content_hash: str
    vector: np.ndarray


def to_record(tool: ToolMetadata, vector: np.ndarray, model_id: str) -> dict[str, Any]:
    """The record of `tool` embedded as `vector` by `model_id` (what the collection stores)."""
    fields = json.loads(_canonical(_metadata_fields(tool)))  # as it reads back: JSON values only
    tool_hash = content_hash(tool)
    dimensions = int(vector.shape[0])
    return {
        "id": record_key(tool_hash, model_id, dimensions),
        "full_name": tool.full_name,
        "plugin": tool.plugin,
        "name": tool.name,
        "description": tool.description,
        "parameters": _canonical(fields["parameters"]),
        "keywords": _canonical(fields["keywords"]),
        "content_hash": tool_hash,
        "model_id": model_id,
        "dimensions": dimensions,
        "embedding": np.asarray(vector, dtype=np.float32),
    }


def from_record(record: dict[str, Any]) -> StoredTool:
    """The tool and vector of a stored record; ValueError when the record is damaged.

    The content hash is taken as stored (the record's key commits to it; recomputing it for
    50,000 tools would cost a replica half a second of its start)."""
    try:
        parameters = tuple(
            ParameterMetadata(
                name=str(p["name"]),
                type=str(p["type"]),
                description=str(p["description"]),
                required=bool(p["required"]),
                schema=p.get("schema"),
            )
            for p in json.loads(record["parameters"])
        )
        tool = ToolMetadata(
            plugin=str(record["plugin"]),
            name=str(record["name"]),
            full_name=str(record["full_name"]),
            description=str(record["description"] or ""),
            parameters=parameters,
            keywords=tuple(str(k) for k in json.loads(record["keywords"])),
        )
        vector = _as_vector(record["embedding"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"damaged tool record {record.get('id')!r}: {exc}") from None
    if vector.shape[0] != int(record["dimensions"]) or not np.isfinite(vector).all():
        raise ValueError(f"damaged tool record {record.get('id')!r}: vector does not match its dimensions")
    return StoredTool(key=str(record["id"]), tool=tool, content_hash=str(record["content_hash"]), vector=vector)


def _metadata_fields(tool: ToolMetadata) -> dict[str, Any]:
    return {
        "plugin": tool.plugin,
        "name": tool.name,
        "full_name": tool.full_name,
        "description": tool.description,
        "parameters": _params(tool),
        "keywords": list(tool.keywords),
    }


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _as_vector(value: Any) -> np.ndarray:
    """A stored vector as float32, whatever the connector returned (array, list, pgvector object)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32).reshape(-1)


class StoredCatalog:
    """A whole catalog version as read from the store: tool names in order, their content hashes
    and record keys, one float32 row per tool, and (from an image) the BM25 statistics the writer
    built. Hashes and keys are kept as byte-string arrays and a tool's metadata is decoded only when
    asked for (a replica whose kernel holds the same tool uses its own): reading 50,000 tools makes
    no 150,000 short-lived strings."""

    def __init__(
        self,
        names: list[str],
        hashes: Sequence[str] | np.ndarray,
        keys: Sequence[str] | np.ndarray,
        vectors: np.ndarray,
        *,
        tools: list[ToolMetadata] | None = None,
        meta: tuple[bytes, np.ndarray] | None = None,
        bm25: dict[str, np.ndarray] | None = None,
        bm25_config: dict[str, Any] | None = None,
    ) -> None:
        self.hashes = np.asarray(hashes, dtype="S64")
        self.keys = np.asarray(keys, dtype="S40")
        if not (len(names) == len(self.hashes) == len(self.keys) == len(vectors)) or vectors.ndim != 2:
            raise ValueError("a stored catalog's parts disagree in length")
        if (tools is None) == (meta is None):
            raise ValueError("a stored catalog needs its tools or their metadata")
        if meta is not None and len(meta[1]) != len(names) + 1:
            raise ValueError("a stored catalog's metadata does not match its names")
        self.names, self.vectors = names, vectors
        self.bm25, self.bm25_config = bm25, bm25_config
        self._tools: list[ToolMetadata | None] = list(tools) if tools is not None else [None] * len(names)
        self._meta = meta

    def __len__(self) -> int:
        return len(self.names)

    def tool(self, row: int) -> ToolMetadata:
        """The metadata of the tool in `row` (ValueError if its stored form is damaged)."""
        tool = self._tools[row]
        if tool is None:
            assert self._meta is not None
            blob, offsets = self._meta
            tool = self._tools[row] = _decode_tool(blob[offsets[row] : offsets[row + 1]].decode("utf-8"))
        return tool

    @property
    def tools(self) -> list[ToolMetadata]:
        """Every tool's metadata, in order."""
        return [self.tool(row) for row in range(len(self.names))]

    def unchanged(self, hashes: Sequence[str], rows: Sequence[int | None] | None = None) -> list[bool]:
        """Per tool: its stored row holds the same content (`hashes`). `rows` gives each tool's row
        (None: absent); without it, the tools are the stored ones in the stored order."""
        if rows is None:  # one vectorized comparison
            return list((self.hashes == np.asarray(hashes, dtype="S64")).tolist())
        return [r is not None and self.hashes[r].decode() == h for r, h in zip(rows, hashes, strict=True)]

    @classmethod
    def from_records(cls, stored: list[StoredTool], dimensions: int) -> StoredCatalog:
        vectors = np.zeros((len(stored), dimensions), dtype=np.float32)
        for row, tool in enumerate(stored):
            vectors[row] = tool.vector
        return cls(
            [s.tool.full_name for s in stored],
            [s.content_hash for s in stored],
            [s.key for s in stored],
            vectors,
            tools=[s.tool for s in stored],
        )


IMAGE_FORMAT = 2


def pack_image(catalog: StoredCatalog) -> bytes:
    """The catalog as one read-optimized blob (``.npz``, no pickles): a replica starts from one row
    instead of one record per tool, and takes the BM25 statistics instead of tokenizing."""
    meta = [_canonical(_metadata_fields(t)).encode("utf-8") for t in catalog.tools]
    arrays: dict[str, np.ndarray] = {
        "format": np.array(IMAGE_FORMAT),
        "names": _text_array("\n".join(catalog.names)),
        "meta": np.frombuffer(b"".join(meta), dtype=np.uint8),
        "meta_offsets": np.concatenate(([0], np.cumsum([len(m) for m in meta], dtype=np.int64))),
        "hashes": catalog.hashes,
        "keys": catalog.keys,
        "vectors": catalog.vectors.astype(np.float32, copy=False),
    }
    if catalog.bm25 is not None:
        arrays.update({f"bm25_{name}": value for name, value in catalog.bm25.items()})
        arrays["bm25_config"] = _text_array(_canonical(catalog.bm25_config))
    buffer = io.BytesIO()
    np.savez(buffer, allow_pickle=False, **arrays)
    return buffer.getvalue()


def unpack_image(blob: bytes) -> StoredCatalog:
    """The catalog of :func:`pack_image`; ValueError when the blob is damaged or of another format."""
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as data:
            if int(data["format"]) != IMAGE_FORMAT:
                raise ValueError(f"image format {int(data['format'])}")
            bm25 = {name[5:]: data[name] for name in data.files if name.startswith("bm25_") and name != "bm25_config"}
            return StoredCatalog(
                _lines(data["names"]),
                data["hashes"],
                data["keys"],
                data["vectors"],
                meta=(data["meta"].tobytes(), data["meta_offsets"]),
                bm25=bm25 or None,
                bm25_config=json.loads(_lines(data["bm25_config"])[0]) if "bm25_config" in data else None,
            )
    except (KeyError, IndexError, TypeError, ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"damaged catalog image: {exc}") from None


def _decode_tool(line: str) -> ToolMetadata:
    try:
        fields = json.loads(line)
        return ToolMetadata(
            plugin=str(fields["plugin"]),
            name=str(fields["name"]),
            full_name=str(fields["full_name"]),
            description=str(fields["description"]),
            parameters=tuple(
                ParameterMetadata(
                    str(p["name"]), str(p["type"]), str(p["description"]), bool(p["required"]), p["schema"]
                )
                for p in fields["parameters"]
            ),
            keywords=tuple(str(k) for k in fields["keywords"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"damaged catalog image: tool metadata ({exc})") from None


def _text_array(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8)


def _lines(array: np.ndarray) -> list[str]:
    text = array.tobytes().decode("utf-8")
    return text.split("\n") if text else []


def _params(tool: ToolMetadata) -> list[dict[str, Any]]:
    return [
        {"name": p.name, "type": p.type, "description": p.description, "required": p.required, "schema": p.schema}
        for p in tool.parameters
    ]
