"""One stored record per tool: its metadata, a content hash, the embedding model and the vector.

Records are immutable and content-addressed: the key hashes the tool's metadata with the model id
and the vector size, so a changed tool (or a new model) is a new record, and a catalog version is
just the list of its records' keys. Readers of an older version keep finding its records while a
writer adds the next one.
"""

from __future__ import annotations

import hashlib
import json
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
    """SHA-256 of everything ranking reads from the tool (names, description, parameters, keywords)."""
    return hashlib.sha256(_canonical(_metadata_fields(tool)).encode("utf-8")).hexdigest()


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
        "parameters": [
            {"name": p.name, "type": p.type, "description": p.description, "required": p.required, "schema": p.schema}
            for p in tool.parameters
        ],
        "keywords": list(tool.keywords),
    }


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _as_vector(value: Any) -> np.ndarray:
    """A stored vector as float32, whatever the connector returned (array, list, pgvector object)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32).reshape(-1)
