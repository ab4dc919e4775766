"""A small HTTP client for the Palimpsest REST API (stdlib only, so commands start fast).

Transient failures (connection errors, 5xx answers) are retried with backoff. A submission is
retried too: the server deduplicates uploads by content hash per team and phase, so a retried
upload can never count twice.
"""

from __future__ import annotations

import json
import os
import random
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

RETRY_STATUS = {500, 502, 503, 504}  # safe for uploads too: the server deduplicates them


class ClientError(Exception):
    """A failure to tell the user in one line; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None, body: dict | None = None):
        super().__init__(message)
        self.status = status
        self.body = body or {}


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "palimpsest" / "config.json"


def load_config() -> dict:
    """Server URL and token: the config file, overridden by PALIMPSEST_SERVER / PALIMPSEST_TOKEN."""
    cfg: dict = {}
    p = config_path()
    if p.is_file():
        try:
            cfg = json.loads(p.read_text(encoding="utf-8"))
        except ValueError:
            cfg = {}
    if os.environ.get("PALIMPSEST_SERVER"):
        cfg["server"] = os.environ["PALIMPSEST_SERVER"]
    if os.environ.get("PALIMPSEST_TOKEN"):
        cfg["token"] = os.environ["PALIMPSEST_TOKEN"]
    return cfg


def save_config(server: str, token: str) -> Path:
    """Write the config file with mode 0600 (created so, never world-readable in between)."""
    p = config_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump({"server": server.rstrip("/"), "token": token}, f)
    os.chmod(tmp, 0o600)
    os.replace(tmp, p)
    return p


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict

    def json(self):
        return json.loads(self.body.decode("utf-8")) if self.body else None


class Client:
    def __init__(
        self,
        server: str,
        token: str | None,
        retries: int = 4,
        backoff: float = 0.5,
        timeout: float = 60.0,
    ):
        if not server:
            raise ClientError(
                "no server configured: run `palimpsest login --server URL --token TOKEN` "
                "or set PALIMPSEST_SERVER"
            )
        self.server = server.rstrip("/")
        self.token = token
        self.retries = retries
        self.backoff = backoff
        self.timeout = timeout

    @classmethod
    def from_config(cls) -> "Client":
        cfg = load_config()
        return cls(cfg.get("server", ""), cfg.get("token"))

    def url(self, path: str, params: dict | None = None) -> str:
        q = (
            "?" + urllib.parse.urlencode({k: v for k, v in (params or {}).items() if v is not None})
            if params
            else ""
        )
        return f"{self.server}/api/v1{path}{q}"

    def request(
        self,
        method: str,
        path: str,
        params: dict | None = None,
        data: bytes | None = None,
        headers: dict | None = None,
        body_factory: Callable[[], object] | None = None,
    ) -> Response:
        hdrs = {"Accept": "application/json", "User-Agent": "palimpsest-cli/0.1"}
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        hdrs.update(headers or {})
        url = self.url(path, params)
        attempt = 0
        while True:
            body = body_factory() if body_factory else data
            req = urllib.request.Request(url, data=body, method=method, headers=hdrs)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    return Response(r.status, r.read(), dict(r.headers))
            except urllib.error.HTTPError as e:
                payload = e.read()
                if e.code in RETRY_STATUS and attempt < self.retries:
                    attempt += 1
                    self._sleep(attempt)
                    continue
                raise self._http_error(e.code, payload) from None
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as e:
                if attempt < self.retries:
                    attempt += 1
                    self._sleep(attempt)
                    continue
                reason = getattr(e, "reason", e)
                raise ClientError(f"cannot reach the server at {self.server} ({reason})") from None

    def _sleep(self, attempt: int) -> None:
        time.sleep(self.backoff * (2 ** (attempt - 1)) * (1 + random.random() / 4))

    @staticmethod
    def _http_error(status: int, payload: bytes) -> ClientError:
        try:
            body = json.loads(payload.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            body = {}
        err = body.get("error", body) if isinstance(body, dict) else {}
        message = err.get("message") if isinstance(err, dict) else None
        if not message:
            message = {
                401: "the server refused the token (run `palimpsest login` again)",
                403: "not allowed",
                404: "not found",
            }.get(status, f"the server answered {status}")
        return ClientError(message, status, err if isinstance(err, dict) else {})

    def get_json(self, path: str, **params):
        return self.request("GET", path, params).json()

    def send_json(self, method: str, path: str, body: dict | None = None, **params):
        """POST/PATCH a JSON body; the answer's JSON."""
        data = json.dumps(body or {}).encode("utf-8")
        return self.request(
            method, path, params, data=data, headers={"Content-Type": "application/json"}
        ).json()

    def get_all(self, path: str, limit: int | None = None, **params) -> list:
        """Every item of a paginated list (following `next_cursor`), or the first `limit`."""
        items: list = []
        cursor = None
        while True:
            want = 500 if limit is None else max(1, min(500, limit - len(items)))
            page = self.get_json(path, **params, limit=want, cursor=cursor)
            if isinstance(page, list):  # a server from before lists were paginated
                return page if limit is None else page[:limit]
            items += page.get("items", [])
            cursor = page.get("next_cursor")
            if not cursor or (limit is not None and len(items) >= limit):
                return items

    def upload(
        self,
        path: str,
        file: Path,
        fields: dict,
        progress: Callable[[int, int], None] | None = None,
    ):
        """POST a multipart form with one file, reporting bytes sent."""
        boundary = uuid.uuid4().hex
        head = b""
        for k, v in fields.items():
            if v is None:
                continue
            head += (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
            ).encode()
        fname = file.name.replace('"', "_")
        head += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{fname}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        size = file.stat().st_size
        total = len(head) + size + len(tail)

        def body():
            return _MultipartStream(head, file, tail, total, progress)

        return self.request(
            "POST",
            path,
            body_factory=body,
            headers={
                "Content-Type": f"multipart/form-data; boundary={boundary}",
                "Content-Length": str(total),
            },
        ).json()


class _MultipartStream:
    """A file-like body that streams head + file + tail and reports progress."""

    def __init__(self, head: bytes, file: Path, tail: bytes, total: int, progress):
        self.parts = [head, file, tail]
        self.total, self.sent, self.progress = total, 0, progress
        self._f = None

    def read(self, n: int = 1 << 16) -> bytes:
        while self.parts:
            part = self.parts[0]
            if isinstance(part, bytes):
                chunk, rest = part[:n], part[n:]
                if rest:
                    self.parts[0] = rest
                else:
                    self.parts.pop(0)
            else:
                if self._f is None:
                    self._f = open(part, "rb")
                chunk = self._f.read(n)
                if not chunk:
                    self._f.close()
                    self.parts.pop(0)
                    continue
            self.sent += len(chunk)
            if self.progress:
                self.progress(self.sent, self.total)
            return chunk
        return b""

    def __len__(self) -> int:
        return self.total
