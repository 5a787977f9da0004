from __future__ import annotations

import asyncio
import contextlib
import hashlib
import inspect
import json
import os
import socket
import subprocess
import time
from typing import Any

import numpy as np
import pytest
from pydantic import PrivateAttr
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.embedding_generator_base import EmbeddingGeneratorBase

from sk_toolfilter.demo import ALL_PLUGINS
from sk_toolfilter.retrieval.text import tokenize
from tests.pg_server import PostgresServer, free_port


class RateLimited(Exception):
    """What a rate-limited embedding API raises (HTTP 429)."""


class HashEmbedder(EmbeddingGeneratorBase):
    """Small deterministic embedder for unit tests: hashed bag of stemmed words, 64 dimensions.

    Counts its calls and texts; can be told to fail or to return wrong shapes.
    """

    ai_model_id: str = "hash-64"
    dims: int = 64
    _calls: int = PrivateAttr(default=0)
    _texts: int = PrivateAttr(default=0)
    _mode: str = PrivateAttr(default="ok")
    _delay: float = PrivateAttr(default=0.0)

    @property
    def calls(self) -> int:
        return self._calls

    @property
    def texts_embedded(self) -> int:
        return self._texts

    def set_mode(self, mode: str, delay: float = 0.0) -> None:
        self._mode = mode
        self._delay = delay

    def vector(self, text: str) -> np.ndarray:
        v = np.zeros(self.dims, dtype=np.float32)
        for token in tokenize(text):
            v[int(hashlib.md5(token.encode()).hexdigest(), 16) % self.dims] += 1.0
        return v

    async def generate_embeddings(self, texts: list[str], settings: Any = None, **kwargs: Any) -> np.ndarray:
        self._calls += 1
        self._texts += len(texts)
        for text in texts:
            text.encode("utf-8")  # like a real HTTP API: a lone surrogate cannot be sent
        if self._delay:
            await asyncio.sleep(self._delay)
        if self._mode == "hang":
            await asyncio.Event().wait()
        if self._mode == "cancel":
            raise asyncio.CancelledError()
        if self._mode == "ragged":
            return [[1.0] * (self.dims - 1) + [[1.0, 2.0]] for _ in texts]  # a row with a list inside
        if self._mode == "strings":
            return [["x"] * self.dims for _ in texts]
        if self._mode == "generator_exit":
            raise GeneratorExit("a BaseException that is not Exception")
        if self._mode == "raise":
            raise RuntimeError("service unavailable")
        if self._mode == "ratelimit":
            raise RateLimited("429 Too Many Requests")
        if self._mode == "quoting":  # some gateways quote the request in their error
            raise ValueError(f"invalid input: {texts!r}")
        if self._mode == "slow":
            await asyncio.sleep(5)
        if self._mode == "nan":
            return np.full((len(texts), self.dims), np.nan)
        if self._mode == "wrong_dims":
            return np.ones((len(texts), self.dims + 3))
        if self._mode == "wrong_count":
            return np.ones((len(texts) + 1, self.dims))
        return np.stack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dims))


def build_demo_kernel(root: str) -> Kernel:
    kernel = Kernel()
    for name, cls in ALL_PLUGINS.items():
        instance = cls(root) if "root" in inspect.signature(cls).parameters else cls()
        kernel.add_plugin(instance, name)
    return kernel


@pytest.fixture
def demo_kernel(tmp_path) -> Kernel:
    """The bundled demo plugins: 46 real @kernel_function tools in 6 plugins, sandboxed in tmp_path."""
    return build_demo_kernel(str(tmp_path / "sandbox"))


@pytest.fixture
def hash_embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture(autouse=True)
def isolated_secrets():
    """Secrets one test makes the library remember stay that test's (Hypothesis draws strings such
    as "connection_string" from the source, and a remembered one would mask it in later messages)."""
    from sk_toolfilter.basics import redaction

    with redaction._lock:
        before, public = set(redaction._remembered), set(redaction._public)
    yield
    with redaction._lock:
        redaction._remembered.intersection_update(before)
        redaction._public.intersection_update(public)


@pytest.fixture(autouse=True)
def isolated_embedding_cache(tmp_path, monkeypatch):
    """Every test gets its own empty embedding cache folder (never the user's)."""
    monkeypatch.setenv("SK_TOOLFILTER_CACHE", str(tmp_path / "embedding-cache"))


def require_server(path: str | None, what: str, how: str) -> str:
    """A server installed by .ci/run: its path, or a skip (a failure in CI) saying how to get it."""
    if path and os.path.exists(path):
        return path
    reason = f"{what} is not installed: {how}"
    if os.environ.get("SK_TOOLFILTER_REQUIRE_SERVERS"):
        pytest.fail(reason)
    pytest.skip(reason)


@contextlib.contextmanager
def serve_on_loopback(command: list[str], port: int, what: str, env: dict[str, str] | None = None):
    """Run a server process until it accepts connections on 127.0.0.1:`port`; stop it afterwards."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.05)
    else:
        process.kill()
        pytest.fail(f"{what} did not start")
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def chroma_server(tmp_path):
    """A real Chroma server on a free loopback port (data in tmp_path); yields its URL."""
    chroma = require_server(
        os.environ.get("SK_TOOLFILTER_CHROMA"),
        "the Chroma server",
        "run .ci/install-chroma DIR and set SK_TOOLFILTER_CHROMA=DIR/bin/chroma",
    )
    port = free_port()
    command = [chroma, "run", "--path", str(tmp_path / "chroma"), "--host", "127.0.0.1", "--port", str(port)]
    with serve_on_loopback(command, port, "the Chroma server"):
        yield f"http://127.0.0.1:{port}"


def postgres_install() -> str:
    return require_server(
        os.environ.get("SK_TOOLFILTER_POSTGRES"),
        "PostgreSQL with pgvector",
        "run .ci/install-postgres DIR and set SK_TOOLFILTER_POSTGRES=DIR",
    )


@contextlib.contextmanager
def running_postgres():
    try:
        server = PostgresServer(postgres_install())
        server.start()
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"PostgreSQL did not start: {exc}")
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture(scope="session")
def postgres_session():
    """One real PostgreSQL server for the test session (tests isolate by table prefix)."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def postgres(postgres_session) -> PostgresServer:
    """The session's PostgreSQL server (skips, or in CI fails, when it is not installed)."""
    return postgres_session


@pytest.fixture
def own_postgres():
    """A PostgreSQL server of this test's own (for tests that stop it)."""
    with running_postgres() as server:
        yield server


def chat_completion(body: dict, message: dict, usage: tuple[int, int]) -> dict:
    """An OpenAI chat-completion response carrying `message`, with (prompt, completion) token `usage`."""
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "m"),
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def send_json(handler: Any, data: bytes) -> None:
    """Answer an HTTP request with `data` as a 200 JSON response."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@pytest.fixture
def openai_compatible_server():
    """A loopback OpenAI-compatible server answering every chat completion with plain text."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self.server.bodies.append(body)  # type: ignore[attr-defined]
            reply = chat_completion(body, {"role": "assistant", "content": "hi there"}, (1, 1))
            data = json.dumps(reply).encode()
            send_json(self, data)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.bodies = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
