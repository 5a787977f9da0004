"""Who may use the gateway over HTTP: each caller's bearer token, the tools it may see and run, and
whose learning its sessions read and write — read from a callers file, independent of the MCP SDK.

.. code-block:: yaml

    callers:
      - name: ci-bot
        token_env: CI_BOT_TOKEN          # the token, from the environment at start
        allow: ["Math-*", "Files-read_file"]   # names or globs (default: every visible tool)
        scope: team-a                    # learning.scope's value (default: the caller's name)
      - name: ops
        token_sha256: 9f86d081884c7d65…  # or the token's SHA-256, so the file holds no secret

Tokens are compared by their SHA-256 digests in constant time; a token shorter than
:data:`MIN_TOKEN_CHARS` is refused at start.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import ipaddress
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError, model_validator

from sk_toolfilter.basics.errors import ConfigError
from sk_toolfilter.basics.redaction import remember_secret
from sk_toolfilter.config.base import StrictConfig

MIN_TOKEN_CHARS = 16
"""Shortest bearer token accepted (``python -c "import secrets; print(secrets.token_urlsafe(32))"`` makes one)."""
TOKEN_ENV = "SK_TOOLFILTER_GATEWAY_TOKEN"
"""Without a callers file, a token in this variable admits one caller (``default``) to every tool."""


class CallerEntry(StrictConfig):
    """One caller of a callers file."""

    name: Annotated[str, Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.@-]+$")]
    token_env: str | None = None
    token_sha256: Annotated[str, Field(pattern=r"^[0-9a-fA-F]{64}$")] | None = None
    allow: list[str] | None = None
    scope: str | None = None

    @model_validator(mode="after")
    def _one_token(self) -> CallerEntry:
        if (self.token_env is None) == (self.token_sha256 is None):
            raise ValueError("give exactly one of token_env and token_sha256")
        return self


class CallersFile(StrictConfig):
    callers: Annotated[list[CallerEntry], Field(min_length=1)]


@dataclass(frozen=True)
class Caller:
    """An admitted caller: its name, the tools it may see and run (None: every visible tool), and the
    learning scope its sessions use (``learning.scope``'s value)."""

    name: str
    allowed: frozenset[str] | None
    scope: str | None


@dataclass(frozen=True)
class Callers:
    """The callers a gateway admits, by their tokens' digests."""

    by_digest: Mapping[bytes, Caller]

    def identify(self, authorization: str | None) -> Caller | None:
        """The caller an ``Authorization: Bearer …`` header names, or None (missing, malformed, unknown)."""
        scheme, _, token = (authorization or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        digest = hashlib.sha256(token.strip().encode()).digest()
        found = None
        for known, caller in self.by_digest.items():  # every digest compared: no early exit to time
            if hmac.compare_digest(known, digest):
                found = caller
        return found

    @classmethod
    def single(cls, token: str, scope: str | None = None) -> Callers:
        """One caller (``default``) with `token`, every visible tool, learning in `scope`."""
        _check_token(token, TOKEN_ENV)
        return cls({hashlib.sha256(token.encode()).digest(): Caller("default", None, scope)})


def load_callers(path: str | Path, catalog: Collection[str], environ: Mapping[str, str] | None = None) -> Callers:
    """Read a callers file; every allow pattern must name at least one tool of `catalog` (the visible
    tools' full names) and every token must be there and long enough, else :class:`ConfigError`."""
    from sk_toolfilter.agents.yaml_reader import read_yaml

    env = os.environ if environ is None else environ
    try:
        parsed = CallersFile.model_validate(read_yaml(path))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{path}: {where}: {first['msg']}") from None
    by_digest: dict[bytes, Caller] = {}
    for entry in parsed.callers:
        if entry.token_env is not None:
            token = env.get(entry.token_env, "")
            if not token:
                raise ConfigError(f"{path}: caller {entry.name}: ${entry.token_env} is not set")
            _check_token(token, f"${entry.token_env}")
            digest = hashlib.sha256(token.encode()).digest()
        else:
            digest = bytes.fromhex(entry.token_sha256 or "")
        if digest in by_digest:
            raise ConfigError(f"{path}: callers {by_digest[digest].name} and {entry.name} have the same token")
        allowed = None if entry.allow is None else _resolve(entry.allow, catalog, f"{path}: caller {entry.name}")
        by_digest[digest] = Caller(entry.name, allowed, entry.scope if entry.scope is not None else entry.name)
    return Callers(by_digest)


def is_loopback(host: str) -> bool:
    """True for an address only this machine reaches (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[::1]:PORT`` or a bare ``PORT`` (loopback) as (host, port)."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", value
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--http {value!r}: expected HOST:PORT (e.g. 127.0.0.1:8765) or a port")
    return (host.strip("[]") or "127.0.0.1"), int(port)


def _check_token(token: str, where: str) -> None:
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(
            f"{where}: a gateway token needs at least {MIN_TOKEN_CHARS} characters; make one with "
            'python -c "import secrets; print(secrets.token_urlsafe(32))"'
        )
    remember_secret(token)


def _resolve(patterns: list[str], catalog: Collection[str], where: str) -> frozenset[str]:
    names: set[str] = set()
    for pattern in patterns:
        wanted = pattern if "-" in pattern else pattern.replace(".", "-", 1)  # Math.add is Math-add
        matched = [name for name in catalog if fnmatch.fnmatchcase(name, wanted)]
        if not matched:
            raise ConfigError(f"{where}: allow {pattern!r} names no visible tool of the agent")
        names.update(matched)
    return frozenset(names)
