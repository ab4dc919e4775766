"""A served site's helpers for the live tests: free ports and a login flood."""

from __future__ import annotations

import socket


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
