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
