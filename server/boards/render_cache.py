"""The render cache: each phase's board version in one query, rendered boards kept per version in
this process (`RenderCache`) and shared by every process of the site through Redis
(`SharedRenders`)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Optional

from server.models import utcnow

# ----------------------------------------------------------------------------- the cache
# A board's version is its phase's row: every change a board shows goes through
# server.domain.lifecycle,
# which bumps the phase's revision in the same transaction. One small statement per request.
# A blind run's output changes the boards at its `shown_at` (code_runs.unshown_outputs), when no
# revision moves: the latest such moment past is part of the version (its transitions before
# then move no revision, `lifecycle._moved`, so that nothing of a board tells when it ended).
_VERSION_SQL = """SELECT p.id, p.name, p.split, p.revision, p.frozen, p.frozen_at, p.published_at,
       p.leaderboard_open, p.public_fraction, p.opens_at,
       (SELECT max(c.shown_at) FROM coderun c WHERE c.phase_id = p.id
        AND c.submission_id IS NOT NULL AND c.shown_at <= :now)
FROM phase p WHERE p.task_id = :task"""


@dataclass
class PhaseState:
    id: int
    name: str
    split: str
    leaderboard_open: bool
    opens_at: Optional[datetime]
    version: str
    published: bool = False
    shape: str = ""  # what must never be served stale: publication, freeze, openness, gold


def _raw_rows(engine, sql, task_id: str) -> list[tuple]:
    # the DBAPI directly: this runs on every leaderboard request, and SQLAlchemy's statement
    # machinery would cost more than the query itself
    now = utcnow()
    if engine.dialect.paramstyle == "pyformat":
        stmt = sql.replace(":task", "%(task)s").replace(":now", "%(now)s")
    else:  # SQLite keeps a time as SQLAlchemy writes it, a text compared as one
        stmt, now = sql, now.strftime("%Y-%m-%d %H:%M:%S.%f")
    conn = engine.raw_connection()
    try:
        cur = conn.cursor()
        cur.execute(stmt, {"task": task_id, "now": now})
        rows = cur.fetchall()
        cur.close()
        return rows
    finally:
        conn.close()


def phase_states(engine, task_id: str, provenance=None) -> list[PhaseState]:
    """Every phase of a task with the version of its leaderboard, in one query; `provenance(split)`
    gives the current gold and scorer versions of a split, which the version includes (a gold
    re-import makes earlier scores stale)."""
    out = []
    for row in _raw_rows(engine, _VERSION_SQL, task_id):
        (pid, name, split, rev, frozen, frozen_at, published_at, lb_open, frac, opens_at, seen) = (
            row
        )
        prov = provenance(split) if provenance else None
        v = (
            f"{pid}:{rev}:{int(bool(frozen))}:{frozen_at}:{published_at}:{int(bool(lb_open))}:"
            f"{frac}:{prov}"
        )
        if seen is not None:  # a blind run's output shown since (none: the version as before)
            v += f":{seen}"
        if isinstance(opens_at, str):  # SQLite through a raw connection
            opens_at = datetime.fromisoformat(opens_at)
        shape = f"{pid}:{int(bool(frozen))}:{frozen_at}:{published_at}:{int(bool(lb_open))}:"
        shape += f"{frac}:{prov}"
        out.append(
            PhaseState(
                pid,
                name,
                split,
                bool(lb_open),
                opens_at,
                hashlib.sha1(v.encode()).hexdigest()[:16],
                published_at is not None,
                hashlib.sha1(shape.encode()).hexdigest()[:16],
            )
        )
    return out


class SharedRenders:
    """A second level of the render cache that every process and machine of a site shares (Redis):
    a board rendered once is served by every gunicorn process and web machine. Per key the site's
    newest render is kept with its version (served stale while the next is built), and a claim
    that lets one process of the site render a key once per interval. Only bytes (or tuples of
    bytes) are kept, framed, never pickled; a Redis that does not answer is left alone for a while
    and each process renders on its own."""

    TTL = 24 * 3600
    RETRY = 30.0

    def __init__(self, connect, site: str):
        self._connect = connect  # () -> redis.Redis
        self._site = hashlib.sha256(site.encode("utf-8")).hexdigest()[:12]
        self._down_until = 0.0

    def _key(self, key: tuple, kind: str = "render") -> str:
        ident = json.dumps(list(map(str, key)))
        return f"palimpsest:{kind}:{self._site}:{hashlib.sha256(ident.encode()).hexdigest()}"

    def _conn(self):
        if time.monotonic() < self._down_until:
            return None
        try:
            return self._connect()
        except Exception:  # noqa: BLE001 — no shared cache: render here
            self._down_until = time.monotonic() + self.RETRY
            return None

    def _failed(self) -> None:
        self._down_until = time.monotonic() + self.RETRY

    def latest(self, key: tuple) -> tuple[str, Any] | None:
        """The site's newest render of `key`: (its version, the value), or None."""
        conn = self._conn()
        if conn is None:
            return None
        try:
            raw = conn.get(self._key(key))
        except Exception:  # noqa: BLE001
            self._failed()
            return None
        if not raw or raw[:1] != b"v":
            return None
        n = raw[1]
        value = _unpack(raw[2 + n :])
        return None if value is None else (raw[2 : 2 + n].decode("ascii"), value)

    def version(self, key: tuple) -> str | None:
        """The version of the site's newest render of `key` (its first bytes only), or None."""
        conn = self._conn()
        if conn is None:
            return None
        try:
            head = conn.getrange(self._key(key), 0, 257)
        except Exception:  # noqa: BLE001
            self._failed()
            return None
        if not head or head[:1] != b"v" or len(head) < 2 + head[1]:
            return None
        return head[2 : 2 + head[1]].decode("ascii")

    def get(self, key: tuple, version: str):
        got = self.latest(key)
        return got[1] if got is not None and got[0] == version else None

    def put(self, key: tuple, version: str, value) -> None:
        packed = _pack(value)
        tag = version.encode("ascii")
        conn = self._conn() if packed is not None and len(tag) < 256 else None
        if conn is None:
            return
        try:
            conn.set(self._key(key), b"v" + bytes([len(tag)]) + tag + packed, ex=self.TTL)
        except Exception:  # noqa: BLE001
            self._failed()

    def claim(self, key: tuple, seconds: float) -> bool:
        """Whether this process may render `key` now: the first to ask in each interval of
        `seconds` is told yes, every other process of the site no (a Redis that does not answer:
        yes, each process keeps its own interval)."""
        conn = self._conn()
        if conn is None:
            return True
        try:
            return bool(conn.set(self._key(key, "claim"), b"1", nx=True, px=int(seconds * 1000)))
        except Exception:  # noqa: BLE001
            self._failed()
            return True


def _pack(value) -> bytes | None:
    if isinstance(value, bytes):
        return b"b" + value
    if isinstance(value, tuple) and all(isinstance(v, bytes) for v in value):
        head = json.dumps([len(v) for v in value]).encode("ascii")
        return b"t" + len(head).to_bytes(4, "big") + head + b"".join(value)
    return None


def _unpack(raw: bytes):
    if raw[:1] == b"b":
        return raw[1:]
    if raw[:1] == b"t":
        n = int.from_bytes(raw[1:5], "big")
        sizes, at, out = json.loads(raw[5 : 5 + n]), 5 + n, []
        for size in sizes:
            out.append(raw[at : at + size])
            at += size
        return tuple(out)
    return None


class RenderCache:
    """Rendered leaderboards per (task, phase, audience, format), in this process and through
    `shared` (SharedRenders) across the site's processes.

    `interval` (seconds; the setting `board_refresh_seconds`): 0 renders each new version at once
    (one render per key at a time, the others waiting for it). Above 0 the cache serves stale
    while it revalidates (RFC 5861): a key whose version moved is served from its last render
    while one request (one in the whole site, with `shared`) builds the next, and a key is
    rendered at most once per interval whatever the rate of changes; only a key never rendered
    waits for its first render. `shape`: what must never be served stale (a publication, a
    freeze, a new gold): a render of another shape is never served in its place.

    `refresh` (a lookup's; with an interval): asks for the next render elsewhere (a job on the
    worker queue) and says whether it could; the request that wins the interval's claim then
    serves the last render instead of rendering, and the job's render reaches every process
    through `shared`. A key asked for that way and still not rendered after `patience` seconds
    (no worker takes the queue) is rendered in the request, as without `refresh`.
    """

    PATIENCE = 30.0  # at least; six intervals where that is longer

    def __init__(
        self, max_entries: int = 512, shared: SharedRenders | None = None, interval: float = 0.0
    ):
        # key -> (version, value, shape, when rendered (time.monotonic()))
        self._d: dict[tuple, tuple[str, Any, str, float]] = {}
        self._lock = threading.Lock()
        self._busy: dict[tuple, threading.Lock] = {}
        self.max_entries = max_entries
        self.renders = 0
        self.shared = shared
        self.interval = float(interval)
        self.patience = max(self.PATIENCE, 6 * self.interval)
        # key -> (the version served when the next render was first asked for elsewhere, when)
        self._asked: dict[tuple, tuple[str, float]] = {}
        # a key served stale within its interval looks for a newer render of the site's this often
        # (its version alone: a few bytes), so that a render made elsewhere is served at once
        self.poll = min(0.5, self.interval / 4)
        self._polled: dict[tuple, float] = {}
        self.clock = time.monotonic

    def get(self, key: tuple, version: str, render, shape: str = ""):
        return self.lookup(key, version, render, shape)[1]

    def lookup(
        self, key: tuple, version: str, render, shape: str = "", refresh=None
    ) -> tuple[str, Any]:
        """(the version served, the value): the render of `key` at `version`, or, while the next
        one is built elsewhere or the interval since the last one has not passed, the last one of
        the same shape. The site's shared renders are asked at most once per interval (within it,
        only whether a newer render came, every `poll` seconds while one is stale);
        `refresh()`: ask for the next render elsewhere (True when asked) rather than render it
        here."""
        hit = self._d.get(key)
        if hit is not None and hit[0] == version:
            return version, hit[1]
        now = self.clock()
        stale = hit if hit is not None and hit[2] == shape else None
        skey = (*key, shape)
        with self._lock:
            busy = self._busy.setdefault(key, threading.Lock())
        if self.interval > 0:
            if stale is not None and now - stale[3] < self.interval:
                if self.shared is not None and now - self._polled.get(key, 0.0) >= self.poll:
                    self._polled[key] = now
                    tag = self.shared.version(skey)
                    got = self.shared.latest(skey) if tag not in (None, stale[0]) else None
                    if got is not None:  # rendered elsewhere since: the same interval goes on
                        self._store(key, got[0], got[1], shape, stale[3])
                        return got
                return stale[0], stale[1]
            got = self.shared.latest(skey) if self.shared is not None else None
            if got is not None:
                if got[0] == version:
                    self._store(key, version, got[1], shape, now)
                    return got
                stale = (got[0], got[1], shape, 0.0)
            if stale is not None:
                if not busy.acquire(blocking=False):
                    return stale[0], stale[1]  # being rendered now by another request
                try:
                    if self.shared is not None and not self.shared.claim(skey, self.interval):
                        # another process of the site renders it: the stale one for an interval
                        self._store(key, stale[0], stale[1], shape, now)
                        return stale[0], stale[1]
                    if refresh is not None and self._ask(key, stale[0], now, refresh):
                        # rendered elsewhere: the last render until it reaches `shared`
                        self._store(key, stale[0], stale[1], shape, now)
                        return stale[0], stale[1]
                    return version, self._render(key, version, render, shape)
                finally:
                    busy.release()
        elif self.shared is not None:
            got = self.shared.latest(skey)
            if got is not None and got[0] == version:
                self._store(key, version, got[1], shape, now)
                return got
        with busy:  # a key's first render (or no interval): one at a time, the others wait
            hit = self._d.get(key)
            if hit is not None and hit[2] == shape and (hit[0] == version or self.interval > 0):
                return hit[0], hit[1]  # rendered while this request waited
            return version, self._render(key, version, render, shape)

    def _ask(self, key: tuple, served: str, now: float, refresh) -> bool:
        """Ask for the next render of `key` elsewhere; False (render it here) when that cannot be
        asked, or was asked `patience` ago with nothing newer than `served` come since."""
        asked = self._asked.get(key)
        if asked is not None and asked[0] == served and now - asked[1] > self.patience:
            self._asked.pop(key, None)
            return False
        try:
            if not refresh():
                return False
        except Exception:  # noqa: BLE001 — not asked: rendered here
            return False
        if asked is None or asked[0] != served:
            self._asked[key] = (served, now)
        return True

    def peek(self, key: tuple, version: str, shape: str = ""):
        """The render of `key` at `version` where this process or the site's shared renders hold
        it, else None; renders nothing."""
        hit = self._d.get(key)
        if hit is not None and hit[0] == version and hit[2] == shape:
            return hit[1]
        got = self.shared.latest((*key, shape)) if self.shared is not None else None
        if got is not None and got[0] == version:
            self._store(key, version, got[1], shape, self.clock())
            return got[1]
        return None

    def render_now(self, key: tuple, version: str, render, shape: str = ""):
        """Render `key` at `version` here and now, for every process of the site (the job a
        `refresh` asked for)."""
        return self._render(key, version, render, shape)

    def _render(self, key: tuple, version: str, render, shape: str):
        value = render()
        with self._lock:
            self.renders += 1
        self._store(key, version, value, shape, self.clock())
        if self.shared is not None:
            self.shared.put((*key, shape), version, value)
        return value

    def _store(self, key, version, value, shape, when) -> None:
        with self._lock:
            if len(self._d) >= self.max_entries and key not in self._d:
                self._d.clear()
                self._asked.clear()
                self._polled.clear()
            self._d[key] = (version, value, shape, when)

    def clear(self) -> None:
        with self._lock:
            self._d.clear()
            self._asked.clear()
            self._polled.clear()
