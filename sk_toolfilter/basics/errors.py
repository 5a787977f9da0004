"""Exceptions raised by sk-toolfilter. Every one carries a message a user can act on."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from difflib import get_close_matches
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from sk_toolfilter.basics.redaction import MASK, is_secret_key, redact_text


class ToolFilterError(Exception):
    """Base class of every sk-toolfilter error. Its message never carries a secret: it passes
    through :func:`sk_toolfilter.basics.redaction.redact_text` when the error is created."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(redact_text(a) if isinstance(a, str) else a for a in args))


class ConfigError(ToolFilterError, ValueError):
    """A configuration value is missing, malformed or out of range."""


class UnknownToolError(ConfigError):
    """A configured tool name is not a function of the kernel."""

    def __init__(self, key: str, name: str, known: Iterable[str]) -> None:
        self.name = name
        suggestions = closest_names(name, known)
        hint = f"; closest real names: {', '.join(suggestions)}" if suggestions else ""
        super().__init__(f"{key}: {name!r} is not a kernel function (use the full name 'Plugin-function'){hint}")


class ToolSourceError(ToolFilterError):
    """A tool source failed at run time: an MCP server that does not start, answer or stay up."""


class IndexStoreError(ToolFilterError):
    """The shared index store (``index.store``) is unreachable, refused a call, or holds damaged rows."""


class RerankError(ToolFilterError):
    """The second stage could not score a shortlist (missing or damaged model files, a failing session);
    the first stage's order stands (see ``rerank`` in the configuration)."""


class EmbeddingServiceError(ToolFilterError):
    """The embedding service failed, or returned vectors of the wrong shape or with NaNs."""


def naming(exc: ToolFilterError, source: str) -> ToolFilterError:
    """`exc` with its message starting with `source` (the agent file it concerns), once."""
    message = str(exc.args[0]) if exc.args else ""
    if source and not message.startswith(source):
        exc.args = (f"{source}: {message}", *exc.args[1:])
    return exc


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (its type's name when it has none): a driver's text
    can run over many lines."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def causes(exc: BaseException, limit: int = 5) -> list[BaseException]:
    """`exc` and the errors it wraps (``__cause__``, else ``__context__``), outermost first, at most `limit`."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < limit:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def error_chain(exc: BaseException, limit: int = 5) -> list[str]:
    """``Type: first line`` of `exc` and of the errors it wraps (``__cause__`` / ``__context__``),
    outermost first, a wrapper that only quotes an inner error left out: a client library's wrapper says
    little, what it wraps says why."""
    chain = [(type(error).__name__, first_line(error)) for error in causes(exc, limit)]
    # A wrapper that quotes what it wraps (SK's repr of a tuple) gives way to the error it quotes.
    kept = [
        (kind, text) for i, (kind, text) in enumerate(chain) if not any(inner in text for _, inner in chain[i + 1 :])
    ]
    return [text if text == kind else f"{kind}: {text}" for kind, text in kept]


def closest_names(name: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The `n` known names most similar to `name`, compared case-insensitively."""
    by_lower = {k.lower(): k for k in known}
    candidates = get_close_matches(name.lower().replace(".", "-"), list(by_lower), n=n, cutoff=0.4)
    return [by_lower[c] for c in candidates]


def _format_location(prefix: str, loc: Sequence[Any], union_tags: Iterable[str] = ()) -> str:
    parts = [prefix] if prefix else []
    tags = set(union_tags)
    for position, item in enumerate(loc):
        if item in tags and position and isinstance(loc[position - 1], int):
            continue  # pydantic puts the tagged-union member's tag in the path; users never wrote it
        parts.append(f"[{item}]" if isinstance(item, int) else str(item))
    return ".".join(parts).replace(".[", "[") or "(root)"


def _models_named(title: str) -> list[type[BaseModel]]:
    found, stack = [], [BaseModel]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__name__ == title and cls.__module__.startswith("sk_toolfilter"):
            found.append(cls)
    return found


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (``X``, ``X | None``, ``list[X]``, ``dict[str, X]``, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in get_args(annotation) for m in _models_in(arg)]


def _keys_beside(title: str, loc: Sequence[Any]) -> list[str]:
    """The keys allowed where the unknown key ``loc[-1]`` was written (the model reached by ``loc[:-1]``)."""
    models = _models_named(title)
    for part in loc[:-1]:
        if not isinstance(part, str):
            continue  # a list index or dict key: the same models
        inner = [
            m for model in models if part in model.model_fields for m in _models_in(model.model_fields[part].annotation)
        ]
        if inner:
            models = inner
        else:  # a tagged union's tag in the path (``tools[0].plugin``): the member whose ``type`` it is
            models = [
                m for m in models if "type" in m.model_fields and part in get_args(m.model_fields["type"].annotation)
            ] or models
    return sorted({field.alias or key for model in models for key, field in model.model_fields.items()})


def describe_validation_error(error: ValidationError, prefix: str = "", union_tags: Iterable[str] = ()) -> str:
    """One line per problem, each naming the key path and the bad value.

    Values under keys that look secret (``api_key``, ``token``, ``env``, ``headers``…) are never
    echoed; other values pass through the redaction rule.
    """
    lines = []
    for err in error.errors(include_url=False):
        loc = err.get("loc", ())
        where = _format_location(prefix, loc, union_tags)
        message = err.get("msg", "invalid value").removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            close = closest_names(str(loc[-1]), _keys_beside(error.title, loc), n=1) if loc else []
            lines.append(f"{where}: unknown key" + (f" (did you mean {close[0]!r}?)" if close else ""))
            continue
        if err.get("type") == "missing":
            lines.append(f"{where}: required key is missing")
            continue
        if isinstance(err.get("input"), dict):  # a whole block: its values may hold secrets, and it is long
            lines.append(f"{where}: {message}")
            continue
        is_secret = any(is_secret_key(part) for part in loc)
        shown = MASK if is_secret else redact_text(repr(err.get("input")))
        if len(shown) > 80:
            shown = shown[:77] + "..."
        lines.append(f"{where}: {message} (got {shown})")
    return "\n".join(lines)


def install_line(extra: str) -> str:
    """The pip command that adds `extra` to this installation, as it was installed: from an index
    (``pip install 'sk-toolfilter[postgres]'``), from a wheel or sdist file, or from a clone (editable or
    not). An error that needs an extra prints this, so the line works where the user got the package."""
    import json
    from importlib import metadata
    from urllib.parse import unquote, urlparse

    origin = None
    try:  # the installed distribution's record (a build folder's egg-info on sys.path has none)
        for distribution in metadata.distributions(name="sk-toolfilter"):
            raw = distribution.read_text("direct_url.json")
            if raw:
                origin = json.loads(raw)
                break
    except (ValueError, OSError):
        origin = None
    if not isinstance(origin, dict) or not isinstance(origin.get("url"), str):
        return f"pip install 'sk-toolfilter[{extra}]'"
    url = origin["url"]
    where = unquote(urlparse(url).path) if url.startswith("file://") else url
    editable = bool((origin.get("dir_info") or {}).get("editable"))
    return f"pip install {'-e ' if editable else ''}'{where}[{extra}]'"
