"""A served site's helpers for the live tests: free ports and a login flood."""

from __future__ import annotations

import socket
import threading

from sqlmodel import Session


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _login_flood(port: int, email: str, n: int) -> list[int]:
    import http.cookiejar
    import re
    import urllib.error
    import urllib.parse

    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    with opener.open(f"http://127.0.0.1:{port}/auth/login", timeout=10) as r:
        token = re.search(r'name="csrf_token" value="([^"]+)"', r.read().decode()).group(1)
    out = []
    for _ in range(n):
        data = urllib.parse.urlencode(
            {"email": email, "password": "not the password", "csrf_token": token}
        ).encode()
        try:
            with opener.open(f"http://127.0.0.1:{port}/auth/login", data=data, timeout=10) as r:
                out.append(r.status)
        except urllib.error.HTTPError as e:
            out.append(e.code)
    return out


_seq = iter(range(10**6))


def _people(eng, n: int, tag: str) -> list[tuple[int, str]]:
    """`n` new accounts with API tokens: (user id, token)."""
    from server.domain.accounts import create_token, create_user

    out = []
    with Session(eng, expire_on_commit=False) as s:
        for i in range(n):
            u = create_user(s, email=f"{tag}-{i}-{next(_seq)}@x.org", password="correct horse 1")
            _, tok = create_token(s, user=u)
            out.append((u.id, tok))
        s.commit()
    return out


def _at_once(calls) -> list[tuple[int, dict]]:
    """Run the calls (functions of no argument) in parallel threads released by one barrier."""
    go = threading.Barrier(len(calls))
    got: list = [None] * len(calls)

    def run(i, f):
        go.wait()
        got[i] = f()

    ts = [threading.Thread(target=run, args=(i, f)) for i, f in enumerate(calls)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(180)
    return got


def _code(body) -> str:
    return ((body or {}).get("error") or {}).get("code", "") if isinstance(body, dict) else ""


def _codes(got) -> dict:
    out: dict = {}
    for status, body in got:
        key = f"{status} {_code(body)}".strip()
        out[key] = out.get(key, 0) + 1
    return out


def gunicorn_site(request, tmp_path_factory, redis_url, *, name, secret, tasks_from=None):
    """A gunicorn (four workers of five threads) serving the app on a fresh database of the
    kind `request.param` ("sqlite" or "postgres") and a data directory of its own: its tasks
    linked from `tasks_from`'s, or an empty folder the test fills. A generator for a fixture to
    `yield from`: yields {url, engine, home, kind, log}; afterwards the server is stopped and its
    log must hold no traceback and no 500. Passwords hash at a cheap cost meanwhile."""
    import os
    import signal
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    from argon2 import PasswordHasher
    from conftest import build_schema, empty_schema

    from server.db import get_engine
    from server.domain import accounts

    repo = Path(__file__).resolve().parent.parent
    kind = request.param
    base = tmp_path_factory.mktemp(f"{name}-{kind}")
    data = base / "data"
    data.mkdir()
    if tasks_from is None:
        (data / "tasks").mkdir()
    else:
        (data / "tasks").symlink_to(Path(tasks_from) / "tasks", target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    if kind == "sqlite":
        url = f"sqlite:///{data / 'palimpsest.db'}"
    else:
        url = request.getfixturevalue("pg_server_url")
        env["DATABASE_URL"] = url
    eng = get_engine(url)
    (build_schema if kind == "sqlite" else empty_schema)(eng)
    old_hasher, accounts.hasher = (
        accounts.hasher,
        PasswordHasher(time_cost=1, memory_cost=64, parallelism=1),
    )
    request.addfinalizer(lambda: setattr(accounts, "hasher", old_hasher))
    port = _free_port()
    env.update(
        PALIMPSEST_HOME=str(data),
        PYTHONPATH=str(repo),
        REDIS_URL=redis_url,
        PALIMPSEST_SECRET_KEY=secret * 40,
    )
    log = base / "gunicorn.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-w", "4", "-k", "gthread", "--threads", "5"]
        + ["-b", f"127.0.0.1:{port}", "--timeout", "180", "server:create_app()"],
        env=env,
        cwd=repo,
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    web = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            urllib.request.urlopen(web + "/api/v1/openapi.json", timeout=5).read()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(log.read_text()[-3000:]) from None
            time.sleep(0.3)
    yield {"url": web, "engine": eng, "home": data, "kind": kind, "log": log}
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text()
    assert "Internal Server Error" not in text and "Traceback" not in text, text[-3000:]
