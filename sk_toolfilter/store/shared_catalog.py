"""A named, versioned catalog of tool records kept in two Semantic Kernel vector-store collections.

* **tool records** (one collection per vector size): immutable, content-addressed (see
  :mod:`sk_toolfilter.store.records`); a changed tool is a new record.
* **catalog rows**: per catalog and embedding model, one *version row* ``<catalog>@<model>``
  naming the current version; per version, a *manifest row* listing its records' keys and an
  *image* (in rows of 8 MB): the same tools, vectors and BM25 statistics packed in one blob, so a replica
  starts with one read (50,000 tools: ~0.5 s, where reading 50,000 records through the connector
  and tokenizing them took ~4 s). The records stay the truth: writers diff against them, and a
  version without a sound image is read record by record.

A writer upserts the new records, then the new manifest, then switches the version row. The switch
is a single-row upsert, one transaction, and the records and manifest it points to exist before it:
a reader sees the old catalog or the new one, never a mix. Checking for a new version reads one
small row. Records only the version before last used are deleted when a version is published, so
a reader still loading the previous version finds its records.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from semantic_kernel.data.vector import (
    DistanceFunction,
    IndexKind,
    VectorStoreCollection,
    VectorStoreCollectionDefinition,
    VectorStoreField,
)

from sk_toolfilter.basics.errors import IndexStoreError, causes, first_line
from sk_toolfilter.basics.redaction import library_logger
from sk_toolfilter.store.records import RECORD_FIELDS, StoredCatalog, from_record, unpack_image

logger = library_logger(__name__)

T = TypeVar("T")

if TYPE_CHECKING:
    Collection = VectorStoreCollection[str, dict[str, Any]]
else:  # parametrizing SK's pydantic generic at run time is refused (it holds type[dict])
    Collection = VectorStoreCollection
CollectionFactory = Callable[[str, VectorStoreCollectionDefinition], Awaitable[Collection]]
"""Opens (creating it if needed) the collection of that name with that definition."""

READ_BATCH = 2_000
"""Records fetched per ``get`` call; a few run at once."""

IMAGE_PART_BYTES = 8 * 2**20
"""An image is stored in rows of at most this size: a reader's memory peak (and what its allocator
keeps after) follows the largest row it reads (one 96 MB row kept ~100 MB; 8 MB parts ~33 MB)."""


def tool_record_definition(dimensions: int) -> VectorStoreCollectionDefinition:
    """The tool-record collection: key, metadata fields, and the vector (cosine, no ANN index)."""
    return VectorStoreCollectionDefinition(
        fields=[
            VectorStoreField("key", name="id", type="str"),
            *(
                VectorStoreField("data", name=name, type="int" if name == "dimensions" else "str")
                for name in RECORD_FIELDS
            ),
            VectorStoreField(
                "vector",
                name="embedding",
                type="float",
                dimensions=dimensions,
                distance_function=DistanceFunction.COSINE_SIMILARITY,
                # Ranking reads the vectors into the process (measured faster than the database's
                # nearest-neighbour search at every catalog size we tried; see the README), so the
                # table needs no approximate index, whose upkeep slows every write.
                index_kind=IndexKind.FLAT,
            ),
        ]
    )


CATALOG_DEFINITION = VectorStoreCollectionDefinition(
    fields=[
        VectorStoreField("key", name="id", type="str"),
        VectorStoreField("data", name="catalog", type="str"),
        VectorStoreField("data", name="model_id", type="str"),
        VectorStoreField("data", name="dimensions", type="int"),
        VectorStoreField("data", name="version", type="str"),
        VectorStoreField("data", name="previous", type="str"),
        VectorStoreField("data", name="tools", type="int"),
        VectorStoreField("data", name="published_at", type="str"),
        VectorStoreField("data", name="manifest", type="str"),
        VectorStoreField("data", name="image", type="bytes"),
        VectorStoreField("data", name="image_parts", type="int"),
    ]
)
"""The catalog collection: version rows, manifest rows and image rows share one shape."""


@dataclass(frozen=True)
class CatalogVersion:
    """What a version row says: which version is current, and what it holds."""

    version: str
    previous: str
    model_id: str
    dimensions: int
    tools: int
    published_at: str
    image_parts: int = 0


class SharedCatalog:
    """One catalog (`name`) of tools embedded by one model, in a store's collections.

    Every call is bounded by `timeout` seconds; any failure of the store (unreachable, refused,
    malformed rows) is an :class:`IndexStoreError` naming what was being done.
    """

    def __init__(
        self,
        open_collection: CollectionFactory,
        name: str,
        model_id: str,
        *,
        table_prefix: str = "sk_toolfilter",
        timeout: float = 5.0,
        concurrency: int = 4,
    ) -> None:
        self.name, self.model_id = name, model_id
        self.timeout = timeout
        self._open = open_collection
        self._prefix = table_prefix
        self._catalogs: Collection | None = None
        self._tools: dict[int, Collection] = {}
        self._concurrency = concurrency
        self._version_key = f"{name}@{model_id}"

    # --- reading ------------------------------------------------------------------------------
    async def current(self) -> CatalogVersion | None:
        """The current version (one small row), or None when nothing was published yet."""
        catalogs = await self._catalog_collection()
        row = await self._bounded("reading the catalog version", catalogs.get(self._version_key))
        return None if row is None else _version_of(_one(row))

    async def load(self, version: CatalogVersion) -> StoredCatalog:
        """Every tool of `version` with its vector: from the version's image (one row) when it has a
        sound one, else record by record. IndexStoreError if a record is gone or damaged (e.g.
        deleted by a newer publish: read :meth:`current` again)."""
        image = await self.load_image(version)
        return image if image is not None else await self.load_records(version)

    async def load_image(self, version: CatalogVersion) -> StoredCatalog | None:
        """The version's image, or None when it has none (or a damaged one: then one warning)."""
        if version.image_parts <= 0:
            return None
        parts: list[bytes] = []
        catalogs = await self._catalog_collection()
        for part in range(version.image_parts):
            row = await self._bounded("reading the catalog image", catalogs.get(self._image_key(version.version, part)))
            blob = None if row is None else _one(row).get("image")
            if not blob:
                logger.warning(
                    "sk-toolfilter: catalog %r version %s: image part %d is missing; reading its records",
                    self.name,
                    version.version,
                    part,
                )
                return None
            parts.append(bytes(blob))
        blob = b"".join(parts)
        del parts
        try:
            catalog = unpack_image(blob)
        except ValueError as exc:
            logger.warning(
                "sk-toolfilter: catalog %r version %s: %s; reading its records", self.name, version.version, exc
            )
            return None
        if catalog.vectors.shape != (version.tools, version.dimensions):
            logger.warning(
                "sk-toolfilter: catalog %r version %s: image does not match its version row", self.name, version.version
            )
            return None
        return catalog

    async def load_records(self, version: CatalogVersion) -> StoredCatalog:
        """Every tool of `version`, read record by record (a few batches at once)."""
        keys = await self._manifest(version)
        tools = await self._tool_collection(version.dimensions)
        semaphore = asyncio.Semaphore(self._concurrency)

        async def fetch(batch: list[str]) -> list[dict[str, Any]]:
            async with semaphore:
                found = await self._bounded(
                    "reading tool records", tools.get(batch, include_vectors=True), scale=len(batch) / READ_BATCH
                )
            return [] if found is None else list(found) if isinstance(found, Sequence) else [found]

        batches = [keys[i : i + READ_BATCH] for i in range(0, len(keys), READ_BATCH)]
        rows = {r["id"]: r for found in await asyncio.gather(*map(fetch, batches)) for r in found}
        missing = [k for k in keys if k not in rows]
        if missing:
            raise IndexStoreError(
                f"index store: version {version.version} of catalog {self.name!r} lists {len(missing)} record(s) "
                "that are not in the store (a newer version replaced it)"
            )
        try:
            return StoredCatalog.from_records([from_record(rows[k]) for k in keys], version.dimensions)
        except ValueError as exc:
            raise IndexStoreError(f"index store: catalog {self.name!r}: {exc}") from None

    async def _manifest(self, version: CatalogVersion) -> list[str]:
        catalogs = await self._catalog_collection()
        row = await self._bounded("reading the catalog manifest", catalogs.get(self._manifest_key(version.version)))
        if row is None:
            raise IndexStoreError(
                f"index store: the manifest of version {version.version} of catalog {self.name!r} is gone "
                "(a newer version replaced it)"
            )
        try:
            keys = json.loads(_one(row)["manifest"])
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ValueError("not a list of keys")
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexStoreError(f"index store: the manifest of catalog {self.name!r} is damaged ({exc})") from None
        return keys

    # --- writing ------------------------------------------------------------------------------
    async def publish(
        self,
        keys: Sequence[str],
        new_records: Sequence[dict[str, Any]],
        dimensions: int,
        image: Callable[[], bytes] | None = None,
    ) -> CatalogVersion:
        """Make the tools `keys` (in order) the current version; `new_records` are the records the
        store may not have yet, `image` makes the version's image (see :func:`pack_image`).
        Returns the version now current (unchanged if it already was)."""
        manifest = json.dumps(list(keys), separators=(",", ":"))
        version_id = hashlib.sha256(f"{dimensions}\n{manifest}".encode()).hexdigest()[:16]
        current = await self.current()
        if current is not None and current.version == version_id:
            return current
        tools = await self._tool_collection(dimensions)
        for start in range(0, len(new_records), READ_BATCH):
            batch = list(new_records[start : start + READ_BATCH])
            await self._bounded("writing tool records", tools.upsert(batch), scale=len(batch) / READ_BATCH)
        blob = image() if image is not None else b""
        parts = _image_parts(blob)
        del blob
        published = CatalogVersion(
            image_parts=len(parts),
            version=version_id,
            previous=current.version if current is not None else "",
            model_id=self.model_id,
            dimensions=dimensions,
            tools=len(keys),
            published_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        )
        catalogs = await self._catalog_collection()
        await self._bounded(
            "writing the catalog manifest",
            catalogs.upsert(self._row(self._manifest_key(version_id), published, manifest)),
        )
        for number, part in enumerate(parts):
            await self._bounded(
                "writing the catalog image",
                catalogs.upsert(self._row(self._image_key(version_id, number), published, image=part)),
            )
        del parts
        # The switch: one row, one statement, one transaction.
        await self._bounded("switching the catalog version", catalogs.upsert(self._row(self._version_key, published)))
        if current is not None and current.previous and current.previous != version_id:
            await self._collect_garbage(current, set(keys))
        return published

    async def _collect_garbage(self, replaced: CatalogVersion, kept: set[str]) -> None:
        """Delete the version before `replaced` (and its records no later version uses)."""
        catalogs = await self._catalog_collection()
        older = CatalogVersion(replaced.previous, "", replaced.model_id, replaced.dimensions, 0, "")
        older_row = await self._bounded("reading a replaced manifest", catalogs.get(self._manifest_key(older.version)))
        older_parts = int(_one(older_row).get("image_parts") or 0) if older_row is not None else 0
        try:
            old_keys = set(await self._manifest(older))
            kept |= set(await self._manifest(replaced))
        except IndexStoreError:
            return  # already collected (or never complete): nothing of ours to delete
        garbage = sorted(old_keys - kept)
        tools = await self._tool_collection(replaced.dimensions)
        for start in range(0, len(garbage), READ_BATCH):
            await self._bounded("deleting replaced tool records", tools.delete(garbage[start : start + READ_BATCH]))
        await self._bounded(
            "deleting a replaced manifest",
            catalogs.delete(
                [self._manifest_key(older.version), *(self._image_key(older.version, i) for i in range(older_parts))]
            ),
        )

    # --- small talk ---------------------------------------------------------------------------
    async def load_small_talk(self, key: str, rows: int, dims: int) -> np.ndarray | None:
        """The small-talk vectors kept for this catalog's model under `key` (see
        :mod:`sk_toolfilter.retrieval.small_talk`), or None when none are kept or they do not fit."""
        catalogs = await self._catalog_collection()
        head = await self._bounded("reading the small-talk vectors", catalogs.get(self._small_talk_key(key, 0)))
        if head is None:
            return None
        parts, blobs = int(_one(head).get("image_parts") or 0), [bytes(_one(head).get("image") or b"")]
        for part in range(1, parts):
            row = await self._bounded("reading the small-talk vectors", catalogs.get(self._small_talk_key(key, part)))
            blobs.append(bytes(_one(row).get("image") or b"") if row is not None else b"")
        try:
            with np.load(io.BytesIO(b"".join(blobs)), allow_pickle=False) as data:
                vectors = np.asarray(data["vectors"], dtype=np.float32)
        except (OSError, ValueError, KeyError, EOFError):
            return None
        return vectors if vectors.shape == (rows, dims) and np.isfinite(vectors).all() else None

    async def save_small_talk(self, key: str, vectors: np.ndarray) -> None:
        """Keep `vectors` (small talk embedded by this catalog's model) for the replicas that start later."""
        buffer = io.BytesIO()
        np.savez(buffer, allow_pickle=False, vectors=np.asarray(vectors, dtype=np.float32))
        blob = buffer.getvalue()
        parts = _image_parts(blob)
        rows, dims = vectors.shape
        described = CatalogVersion("small-talk", "", self.model_id, dims, rows, "", image_parts=len(parts))
        catalogs = await self._catalog_collection()
        for number in reversed(range(len(parts))):  # the head (part 0) last: a reader finds every part it names
            row = self._row(self._small_talk_key(key, number), described, image=parts[number])
            await self._bounded("writing the small-talk vectors", catalogs.upsert(row))

    # --- plumbing -----------------------------------------------------------------------------
    def _small_talk_key(self, key: str, part: int) -> str:
        return f"small-talk@{self.model_id}#{key}#{part}"

    def _manifest_key(self, version: str) -> str:
        return f"{self._version_key}#{version}"

    def _image_key(self, version: str, part: int) -> str:
        return f"{self._version_key}#{version}#image#{part}"

    def _row(self, key: str, version: CatalogVersion, manifest: str = "", image: bytes = b"") -> dict[str, Any]:
        return {
            "id": key,
            "catalog": self.name,
            "model_id": version.model_id,
            "dimensions": version.dimensions,
            "version": version.version,
            "previous": version.previous,
            "tools": version.tools,
            "published_at": version.published_at,
            "manifest": manifest,
            "image": image,
            "image_parts": version.image_parts,
        }

    async def _catalog_collection(self) -> Collection:
        if self._catalogs is None:
            self._catalogs = await self._bounded(
                "opening the catalog table", self._open(f"{self._prefix}_catalogs", CATALOG_DEFINITION)
            )
        return self._catalogs

    async def _tool_collection(self, dimensions: int) -> Collection:
        if dimensions not in self._tools:
            self._tools[dimensions] = await self._bounded(
                "opening the tool table",
                self._open(f"{self._prefix}_tools_{dimensions}", tool_record_definition(dimensions)),
            )
        return self._tools[dimensions]

    async def _bounded(self, doing: str, call: Awaitable[T], *, scale: float = 1.0) -> T:
        """`call`, bounded by the timeout (scaled for big batches); every failure an IndexStoreError."""
        try:
            return await asyncio.wait_for(call, self.timeout * max(1.0, scale))
        except IndexStoreError:
            raise
        except asyncio.TimeoutError:
            raise IndexStoreError(
                f"index store: {doing} for catalog {self.name!r} took longer than {self.timeout:g}s"
            ) from None
        except Exception as exc:
            raise IndexStoreError(f"index store: {doing} for catalog {self.name!r} failed: {_reason(exc)}") from exc


def _image_parts(blob: bytes) -> list[bytes]:
    """`blob` in rows of at most :data:`IMAGE_PART_BYTES` (a catalog's image, the small-talk vectors)."""
    return [blob[i : i + IMAGE_PART_BYTES] for i in range(0, len(blob), IMAGE_PART_BYTES)]


def _one(row: Any) -> dict[str, Any]:
    if isinstance(row, Sequence) and not isinstance(row, (str, bytes)):
        row = row[0]
    if not isinstance(row, dict):
        raise IndexStoreError(f"index store: unexpected row type {type(row).__name__}")
    return row


def _version_of(row: dict[str, Any]) -> CatalogVersion:
    try:
        return CatalogVersion(
            version=str(row["version"]),
            previous=str(row.get("previous") or ""),
            model_id=str(row["model_id"]),
            dimensions=int(row["dimensions"]),
            tools=int(row["tools"]),
            image_parts=int(row.get("image_parts") or 0),
            published_at=str(row["published_at"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise IndexStoreError(f"index store: a catalog version row is damaged ({exc})") from None


def _reason(exc: BaseException) -> str:
    """The innermost useful message of a connector error (SK wraps the driver's)."""
    seen: list[str] = []
    for error in causes(exc):
        text = first_line(error)
        if text not in seen:
            seen.append(text)
    return seen[-1]
