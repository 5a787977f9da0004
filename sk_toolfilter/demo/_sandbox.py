from __future__ import annotations

import os
from pathlib import Path


def sandbox_root(root: str | os.PathLike[str] | None) -> Path:
    """The sandbox folder: `root`, else ``$SK_TOOLFILTER_SANDBOX``, else ``./sandbox``; created if needed."""
    path = Path(root or os.environ.get("SK_TOOLFILTER_SANDBOX") or "sandbox").resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def inside(root: Path, relative: str) -> Path:
    """`relative` resolved under `root`; refuses paths that escape it."""
    target = (root / relative).resolve()
    if target != root and root not in target.parents:
        raise ValueError(f"path {relative!r} is outside the sandbox")
    return target
