"""`palimpsest serve`: the database's migrations, then the embedded Redis, worker processes, the
reconciler and the web app in one command. It restarts what dies (RQ's worker exits when Redis goes
away) and stops everything on Ctrl-C or SIGTERM.

It owns its children: they die with it, even on `kill -9` (server.jobs.procs: PR_SET_PDEATHSIG), and
one `serve` per data directory holds `<home>/run/serve.lock`. At start it stops what an earlier
`serve` of the same data directory left running (the pids in `<home>/run/children.json`, and a
Redis of that directory by its pid file), then starts a Redis and the workers of its own.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from werkzeug.serving import make_server

from server.db import session_scope
from server.domain.submissions import ensure_phases
from server.jobs.embedded import EmbeddedRedis
from server.jobs.procs import RunDir, preexec_die_with_parent, stop_pid
from server.jobs.queue import redis_url
from server.jobs.reconciler import start_thread
from server.migrate import prepare
from server.settings import Settings, ensure_secret

log = logging.getLogger("palimpsest.serve")


# a worker's command: -P (no current directory on the module path), since `serve` may run inside
# its data directory, whose `tasks/` folder would otherwise pass for the `tasks` package
WORKER_ARGV = (sys.executable, "-P", "-m", "server.jobs.worker")


def child_env(settings) -> dict:
    """The environment of a worker process: the same data directory, database and Redis."""
    env = dict(os.environ)
    env["PALIMPSEST_HOME"] = str(settings.home)
    env["REDIS_URL"] = redis_url(settings)
    if settings.database_url:
        env["DATABASE_URL"] = settings.database_url
    return env


class Supervisor:
    """Starts and watches the parts of a one-machine Palimpsest."""

    def __init__(
        self,
        settings: Settings,
        *,
        host: str = "127.0.0.1",
        port: int = 5000,
        app_factory,
        seed=None,
        workers: int = 1,
        echo=print,
    ):
        """`app_factory()` builds the web app (the surface above this layer hands it down);
        `seed(settings, engine)`, when given, fills the site once it serves (the demo) and returns
        a line to print."""
        self.settings = settings
        self.host, self.port, self.n_workers = host, port, workers
        self.app_factory, self.seed = app_factory, seed
        self.echo = echo
        self.stop_event = threading.Event()
        self.redis = None
        self.workers: list[subprocess.Popen | None] = []
        self.restarts = 0
        self.http = None
        self.serving = False  # whether serve_forever runs (shutdown() waits for it otherwise)
        self.redis_owned = False
        self.run_dir = None

    # ------------------------------------------------------------------ parts

    def child_env(self) -> dict:
        return child_env(self.settings)

    def start_worker(self) -> subprocess.Popen:
        env = self.child_env()
        env["PALIMPSEST_SUPERVISOR_PID"] = str(
            os.getpid()
        )  # the worker dies with us (server.jobs.worker)
        return subprocess.Popen(WORKER_ARGV, env=env, stdin=subprocess.DEVNULL)

    def record(self) -> None:
        """Write the children's pids to <home>/run/children.json (the next start reads them)."""
        if self.run_dir is not None:
            redis_pid = (
                self.redis.proc.pid
                if self.redis is not None and self.redis.proc is not None
                else None
            )
            self.run_dir.write(
                workers=[w.pid for w in self.workers if w is not None], redis=redis_pid
            )

    def clean_leftovers(self) -> None:
        """Stop what an earlier serve of this data directory left running: its workers (they may be
        finishing a job: SIGTERM twice, then SIGKILL) and its Redis (SIGTERM: it saves first)."""
        for pid in self.run_dir.leftover_workers():
            how = stop_pid(pid, grace=10, twice=True)
            self.echo(
                f"a worker (pid {pid}) of an earlier serve of this data directory was still "
                f"running: {how}"
            )
        if self.settings.embedded_redis():
            redis = EmbeddedRedis(self.settings.home)
            pid = redis.running_pid()
            if pid is not None:
                how = stop_pid(pid, grace=30)
                self.echo(
                    f"the embedded Redis (pid {pid}) of an earlier run was still running: {how}; "
                    "starting one of our own"
                )
            elif (
                redis.alive()
            ):  # answering, but not by its pid file: shut it down through the socket
                redis.stop()

    def start_redis(self) -> None:
        if self.settings.embedded_redis():
            self.redis = EmbeddedRedis(self.settings.home)
            # SIGTERM when we die, even by kill -9: redis-server saves its data and exits
            self.redis.start(preexec_fn=preexec_die_with_parent(signal.SIGTERM))
            self.redis_owned = True

    def watch(self) -> None:
        """Restart a dead worker or a dead embedded Redis."""
        changed = False
        if (
            self.redis is not None
            and self.redis_owned
            and self.redis.proc is not None
            and self.redis.proc.poll() is not None
        ):
            self.echo("the embedded Redis exited; starting it again")
            self.redis.start(preexec_fn=preexec_die_with_parent(signal.SIGTERM))
            changed = True
        for i, w in enumerate(self.workers):
            if w is not None and w.poll() is not None:
                self.restarts += 1
                self.echo(f"worker {w.pid} exited ({w.returncode}); starting another")
                self.workers[i] = self.start_worker()
                changed = True
        if changed:
            self.record()

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> int:

        # The embedded default is migrated here, before the app and the workers check it (created
        # on the first run); a DATABASE_URL is only checked: `palimpsest db upgrade` migrates it.
        prepare(self.settings)

        def on_signal(signum, _frame):
            self.stop_event.set()

        self.run_dir = RunDir(self.settings.home)
        holder = self.run_dir.lock()
        if holder is not None:
            self.echo(
                f"another palimpsest serve (pid {holder}) runs on the data directory "
                f"{self.settings.home}; stop it first"
            )
            self.run_dir = None
            return 1
        old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.clean_leftovers()
            self.start_redis()
            if self.redis is not None:
                os.environ["REDIS_URL"] = (
                    self.redis.url
                )  # the web app and the reconciler use it too
                self.settings.redis_url = self.redis.url
            # the server is bound first so that a free port (--port 0) is known before the app
            # is built: mail links start with the bound address when no PALIMPSEST_BASE_URL is set
            self.http = make_server(self.host, self.port, None, threaded=True)
            if not self.settings.base_url:
                os.environ["PALIMPSEST_BASE_URL"] = self.settings.base_url = self.bound_url()
            if self.settings.secret_key is None:  # first start: a random key, kept in the home
                self.settings.secret_key = ensure_secret(self.settings.home)
            app = self.app_factory()
            self.http.app = app
            engine = app.extensions["palimpsest.engine"]

            with session_scope(engine) as s:  # the start-up's own step
                ensure_phases(s, self.settings.home)
            self.workers = [self.start_worker() for _ in range(self.n_workers)]
            self.record()
            if self.seed is not None:
                self.echo(self.seed(self.settings, engine))
            _, rec_stop = start_thread(self.settings, engine)
            web = threading.Thread(target=self.http.serve_forever, name="web", daemon=True)
            web.start()
            self.serving = True
            self.echo(
                f"Palimpsest on {self.bound_url()}/  (data: {self.settings.home}; Ctrl-C stops it)"
            )
            while not self.stop_event.wait(0.5):
                self.watch()
            rec_stop.set()
            return 0
        finally:
            self.shutdown()
            for s, h in old.items():
                signal.signal(s, h)

    def bound_url(self) -> str:
        """The address the web server listens on, as a URL (the machine's name for a wildcard)."""
        host = self.host
        if host in ("0.0.0.0", "::", ""):
            host = socket.gethostname()
        elif ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.http.server_port}"

    def shutdown(self) -> None:
        self.echo("stopping ...")
        if self.http is not None:
            if self.serving:
                self.http.shutdown()
            self.http.server_close()
        for w in self.workers:
            if w is not None and w.poll() is None:
                w.send_signal(signal.SIGTERM)  # warm shutdown: the current job finishes
        deadline = time.monotonic() + 15
        for w in self.workers:
            if w is None:
                continue
            try:
                w.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        if self.redis is not None and self.redis_owned:
            self.redis.stop()
        if self.run_dir is not None:
            self.run_dir.children.unlink(missing_ok=True)
            self.run_dir.unlock()
        self.echo("stopped")
