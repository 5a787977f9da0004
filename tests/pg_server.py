"""A throwaway PostgreSQL server with pgvector, from the binaries .ci/install-postgres installs
(``SK_TOOLFILTER_POSTGRES``), on a free loopback port. Used by the tests and the benchmarks."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """A real PostgreSQL (with pgvector) from .ci/install-postgres, on a free loopback port.

    PostgreSQL refuses to run as root: as root, the binaries are copied where another user can read
    them and the server runs as ``nobody``.
    """

    def __init__(self, install: str) -> None:
        self.port = free_port()
        self._scratch = tempfile.mkdtemp(prefix="sk-toolfilter-pg-")
        os.chmod(self._scratch, 0o755)
        self._user: str | None = None
        if os.geteuid() == 0:
            self._user = "nobody"
            copy = os.path.join(self._scratch, "install")
            for part in ("pgserver/pginstall", "pgserver.libs"):  # the binaries find their libraries at ../../../
                shutil.copytree(os.path.join(install, part), os.path.join(copy, part), symlinks=True)
            install = copy
        self.bin = os.path.join(install, "pgserver", "pginstall", "bin")
        self.data = os.path.join(self._scratch, "data")
        os.mkdir(self.data, 0o700)
        if self._user:
            shutil.chown(self.data, self._user)
        self._run("initdb", "-D", self.data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale")
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def _run(self, program: str, *args: str) -> None:
        subprocess.run(
            [os.path.join(self.bin, program), *args], check=True, capture_output=True, user=self._user, timeout=60
        )

    def start(self) -> None:
        command = [os.path.join(self.bin, "postgres"), "-D", self.data, "-h", "127.0.0.1", "-p", str(self.port)]
        command += ["-k", self.data, "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=50"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, user=self._user)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited at start (code {self.process.returncode})")
            ready = subprocess.run(
                [os.path.join(self.bin, "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"],
                capture_output=True,
            )
            if ready.returncode == 0:
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("PostgreSQL did not accept connections within 30 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # "fast" shutdown: ends the sessions, as a DB restart does
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self._scratch, ignore_errors=True)


def main() -> int:
    """``python -m tests.pg_server DIR``: a local PostgreSQL + pgvector for trying the shared index on
    a laptop — the binaries CI uses (``.ci/install-postgres DIR`` first), on loopback, until Ctrl-C."""
    import sys

    install = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SK_TOOLFILTER_POSTGRES", "")
    if not install or not os.path.isdir(install):
        print("usage: .ci/install-postgres DIR && python -m tests.pg_server DIR", file=sys.stderr)
        return 2

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # Ctrl-C or SIGTERM at any point (even while starting) stops the server and removes its data;
    # set explicitly, since a process started in the background inherits SIGINT ignored.
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    server = PostgresServer(install)
    try:
        server.start()
        print(f"PostgreSQL + pgvector on 127.0.0.1:{server.port}; in the agent file:", flush=True)
        print(f"  tool_filtering: {{index: {{store: postgres, connection_string: '{server.dsn}'}}}}", flush=True)
        print("Ctrl-C stops it and removes its data.", flush=True)
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        server.remove()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
