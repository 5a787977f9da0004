"""Old flat module paths (``sk_toolfilter.manager`` …) keep importing for one release, with a warning.

0.2 moved every module into a sub-package by concern (see CHANGELOG.md). A meta-path finder maps
each old name to its new module, so ``from sk_toolfilter.service import ...`` still works and says
where the name lives now.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

MOVED: dict[str, str] = {
    **{name: f"retrieval.{name}" for name in ("text", "metadata", "bm25", "embeddings", "cache", "faults")},
    **{name: f"retrieval.{name}" for name in ("batching", "fusion", "names", "cutoff", "index", "search")},
    **{name: f"selection.{name}" for name in ("manager", "query", "visibility", "sticky", "usage", "discovery")},
    "settings": "selection.settings",
    "service": "integration.service",
    "guard": "integration.guard",
    **{name: f"agents.{name}" for name in ("agent_file", "sources", "catalog", "agent")},
    **{name: f"measure.{name}" for name in ("wire", "tokens", "report", "metrics", "evaluation", "eval_run")},
}


class _MovedModuleLoader(importlib.abc.Loader):
    def __init__(self, new_name: str) -> None:
        self.new_name = new_name

    def create_module(self, spec: Any) -> ModuleType:
        return importlib.import_module(self.new_name)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module is already imported."""


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Resolves ``sk_toolfilter.<old>`` to ``sk_toolfilter.<package>.<old>`` with a DeprecationWarning."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        package, _, old = fullname.rpartition(".")
        if package != "sk_toolfilter" or old not in MOVED:
            return None
        new_name = f"sk_toolfilter.{MOVED[old]}"
        warnings.warn(f"{fullname} moved to {new_name}; the old path goes away in 0.3", DeprecationWarning, 3)
        return importlib.util.spec_from_loader(fullname, _MovedModuleLoader(new_name))


def install() -> None:
    """Add the finder once (importing ``sk_toolfilter`` does this)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
