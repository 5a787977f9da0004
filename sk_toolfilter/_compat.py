"""Old flat module paths (``sk_toolfilter.manager`` …) keep importing for one release, with a warning.

0.2 moved every module into a sub-package by concern, 0.3 the shared basics (and the errors) into
``basics`` (see CHANGELOG.md). Every old path and name is one row here, and all of them go away
together in 0.4: a meta-path finder maps each old module path (:data:`MOVED`) to its new module, so
``from sk_toolfilter.service import ...`` still works; a moved name of a module that still exists
(:data:`MOVED_ATTRIBUTES`) is served by that module's ``__getattr__``. Each says where the name
lives now, in a DeprecationWarning attributed to the user's own line (shown under Python's default
filters).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Callable
from types import FrameType, ModuleType
from typing import Any

MOVED: dict[str, str] = {
    **{name: f"retrieval.{name}" for name in ("text", "metadata", "bm25", "embeddings", "cache", "faults")},
    **{name: f"retrieval.{name}" for name in ("batching", "fusion", "names", "cutoff", "index", "search")},
    **{name: f"selection.{name}" for name in ("manager", "query", "visibility", "sticky", "discovery")},
    "usage": "selection.call_counts",
    "settings": "selection.settings",
    "service": "integration.service",
    "guard": "integration.guard",
    **{name: f"agents.{name}" for name in ("agent_file", "sources", "catalog", "agent")},
    **{name: f"measure.{name}" for name in ("wire", "tokens", "report", "metrics", "evaluation", "eval_run")},
    # 0.3: the shared basics moved into one package.
    **{name: f"basics.{name}" for name in ("progress", "input_files", "redaction", "wire_json", "tokenizer")},
    "errors": "basics.errors",
    "measure.tokens": "basics.tokenizer",
}


# Names a module of 0.2 kept for its callers and that live elsewhere now: module (under
# sk_toolfilter) → name → its module now. Each such module's ``__getattr__`` is
# ``moved_attributes(__name__)``, so ``from sk_toolfilter.retrieval.cache import cached`` still works,
# with a DeprecationWarning at the importing line.
MOVED_ATTRIBUTES: dict[str, dict[str, str]] = {
    "retrieval.cache": {"CachedEmbeddings": "retrieval.embeddings", "cached": "retrieval.embeddings"},
    "retrieval.embeddings": {"embed_texts": "retrieval.encoders", "catalog_call_timeout": "retrieval.encoders"},
    "measure.report": {"prefix_stable_share": "measure.token_report"},
    "selection.manager": {"kernel_fingerprint": "selection.tool_source"},
}


# Public names of 0.1 whose new home is not the module their old module moved to: the module
# under sk_toolfilter that has the name now (``module:attribute`` when it is spelled differently).
MOVED_NAMES: dict[str, dict[str, str]] = {
    "service": {"enable_tool_filtering": "integration.setup", "create_tool_filter": "integration.setup"},
    "query": {"split_query_parts": "retrieval.text"},
    "discovery": {"MIN_MATCH_SCORE": "selection.lookup"},
}

# Public names of 0.1 that are gone, and what replaced them (CHANGELOG.md, 0.2).
REMOVED_NAMES: dict[str, dict[str, str]] = {
    "sources": {"SafeMCPStdioPlugin": "MCP servers run on the MCP SDK (sk_toolfilter.agents.mcp.MCPConnection)"},
    "sticky": {
        "conversation_key": "sticky lists are keyed by the conversation's own content (StickyLists.update)",
        "MAX_CONVERSATIONS": "StickyLists(max_conversations=...)",
    },
    "service": {"NO_FUNCTION": "an empty selection sends no tools (settings.tools = None)"},
    "agent_file": {"SECRET_KEYS": "sk_toolfilter.basics.redaction.is_secret_key"},
    "manager": {"DISCOVERY_FUNCTIONS": "ToolFilterManager.discovery_names"},
}


def moved_attributes(module: str) -> Callable[[str], Any]:
    """The module-level ``__getattr__`` of `module`: its :data:`MOVED_ATTRIBUTES` row, each name
    imported from its new home with a DeprecationWarning attributed to the line that asked for it."""
    rows = MOVED_ATTRIBUTES[module.removeprefix("sk_toolfilter.")]

    def __getattr__(name: str) -> Any:
        if name not in rows:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        home = f"sk_toolfilter.{rows[name]}"
        warnings.warn(
            f"{module}.{name} moved to {home}.{name} (public names: from sk_toolfilter import ...); "
            "the old path goes away in 0.4",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    return __getattr__


class _OldPathModule(ModuleType):
    """An old module path: the new module's names, and the 0.1 names that moved elsewhere."""

    def __init__(self, name: str, new: ModuleType, extra: dict[str, str], removed: dict[str, str]) -> None:
        super().__init__(name, new.__doc__)
        self._new, self._extra, self._removed = new, extra, removed

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr in ("_new", "_extra", "_removed"):
            raise AttributeError(attr)
        if attr in self._extra:
            module, _, name = self._extra[attr].partition(":")
            return getattr(importlib.import_module(f"sk_toolfilter.{module}"), name or attr)
        if attr in self._removed:  # a name of 0.1 that is gone: say what replaced it
            raise AttributeError(f"{self.__name__}.{attr} was removed in 0.2; use {self._removed[attr]}")
        return getattr(self._new, attr)

    def __dir__(self) -> list[str]:
        return sorted({*dir(self._new), *self._extra})


class _MovedModuleLoader(importlib.abc.Loader):
    def __init__(self, new_name: str, old: str) -> None:
        self.new_name, self.old = new_name, old

    def create_module(self, spec: Any) -> ModuleType:
        new = importlib.import_module(self.new_name)
        extra, removed = MOVED_NAMES.get(self.old, {}), REMOVED_NAMES.get(self.old, {})
        if not extra and not removed:
            return new
        return _OldPathModule(spec.name, new, extra, removed)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the new module is already imported."""


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Resolves ``sk_toolfilter.<old>`` to ``sk_toolfilter.<package>.<old>`` with a DeprecationWarning."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith("sk_toolfilter."):
            return None
        old = fullname.removeprefix("sk_toolfilter.")
        if old not in MOVED:
            return None
        new_name = f"sk_toolfilter.{MOVED[old]}"
        elsewhere = sorted({home.partition(":")[0] for home in MOVED_NAMES.get(old, {}).values()})
        names = ", ".join(n for n, home in MOVED_NAMES.get(old, {}).items() if home.partition(":")[0] in elsewhere)
        where = "".join(f"; {names} now in sk_toolfilter.{home}" for home in elsewhere)
        warnings.warn(
            f"{fullname} moved to {new_name}{where} (public names: from sk_toolfilter import ...); "
            "the old path goes away in 0.4",
            DeprecationWarning,
            _importer_stacklevel(),
        )
        return importlib.util.spec_from_loader(fullname, _MovedModuleLoader(new_name, old))


def _importer_stacklevel() -> int:
    """The ``stacklevel`` of the code that wrote the import: the first frame outside importlib's own
    machinery and this module. Python shows a DeprecationWarning by default only when it is attributed
    to ``__main__``, so it must point at the user's own file and line. (``warnings`` itself skips
    importlib's bootstrap frames when it counts levels, so they are not counted here either.)"""
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None:
        name = frame.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name
        if not internal and name != __file__ and name != importlib.__file__:  # import_module(...) is passed too
            break
        frame, level = frame.f_back, level + (0 if internal else 1)
    return level


def install() -> None:
    """Add the finder once (importing ``sk_toolfilter`` does this)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
