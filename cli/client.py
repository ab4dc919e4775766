"""The HTTP client of the `palimpsest` command for the Palimpsest REST API (requests + urllib3).

Retries follow what is safe to repeat. Idempotent requests (GET, HEAD, PUT, DELETE) are retried on
a dropped connection, a timeout or a 502/503/504 answer, with backoff. A POST is never retried
once it may have reached the server (publish, rescore, close...): only a connection that could not
be opened at all is tried again, since then nothing was sent. An upload is the one POST retried
like an idempotent request, because it carries its dedup key: the server keeps one submission per
team, phase and file content (sha256), so a retried upload answers with the first one; the client
sends the sha256 it computed and checks the server stored that very file.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
RETRY_STATUS = frozenset({502, 503, 504})  # the server or a proxy in front is not there (yet)


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
    """A session with one server: its token, its retry rules and its timeout."""

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
        self._sessions: dict = {}  # dedup -> requests.Session, made on first use

    @classmethod
    def from_config(cls) -> Client:
        """A client for the server and token of the config file (or the environment)."""
        cfg = load_config()
        return cls(cfg.get("server", ""), cfg.get("token"))

    def url(self, path: str) -> str:
        """The API address of `path`."""
        return f"{self.server}/api/v1{path}"

    def _session(self, dedup: bool):
        """The pooled session whose retries fit the request: idempotent methods only, or POST
        too for an upload carrying its dedup key."""
        if dedup not in self._sessions:
            # imported here: requests and urllib3 take about 0.1 s to load, which only commands
            # that talk to a server should pay (`palimpsest --help` and `validate` start fast)
            import requests
            from requests.adapters import HTTPAdapter, Retry  # urllib3's Retry, as requests has it

            retry = Retry(
                total=self.retries,
                connect=self.retries,  # nothing was sent: safe for any method
                read=self.retries,  # the request may have been handled: allowed methods only
                status=self.retries,
                other=0,
                allowed_methods=(IDEMPOTENT | {"POST"}) if dedup else IDEMPOTENT,
                status_forcelist=RETRY_STATUS,
                backoff_factor=self.backoff,
                raise_on_status=False,  # the last answer is returned and turned into an error
                respect_retry_after_header=True,
            )
            s = requests.Session()
            adapter = HTTPAdapter(max_retries=retry)
            s.mount("http://", adapter)
            s.mount("https://", adapter)
            s.headers.update({"Accept": "application/json", "User-Agent": "palimpsest-cli/0.2"})
            if self.token:
                s.headers["Authorization"] = f"Bearer {self.token}"
            self._sessions[dedup] = s
        return self._sessions[dedup]

    def request(
        self,
        method: str,
        path: str,
        params: dict | None = None,
        data: bytes | object | None = None,
        headers: dict | None = None,
        *,
        dedup_key: str | None = None,
    ) -> Response:
        """Send one request (retried as the module docstring says); a ClientError unless 2xx/3xx.
        `dedup_key` marks a POST the server deduplicates, so that it may be retried."""
        if dedup_key is not None and method.upper() != "POST":
            raise ValueError("a dedup key is for uploads (POST)")
        params = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            r = self._session(dedup_key is not None).request(
                method,
                self.url(path),
                params=params or None,
                data=data,
                headers=headers,
                timeout=self.timeout,
            )
        except OSError as e:  # requests.RequestException is an OSError (IOError)
            reason = getattr(e, "args", [e])[0] if e.args else e
            raise ClientError(f"cannot reach the server at {self.server} ({reason})") from None
        if r.status_code >= 400:
            raise self._http_error(r.status_code, r.content)
        return Response(r.status_code, r.content, dict(r.headers))

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
        field: str = "file",
    ):
        """POST a multipart form with one file, streamed, reporting bytes sent. It carries its
        dedup key (the file's sha256), so it is retried like an idempotent request."""
        sha = file_sha256(file)
        boundary = os.urandom(16).hex()
        head = b""
        for k, v in {**fields, "sha256": sha}.items():
            if v is None:
                continue
            head += (
                f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
            ).encode()
        fname = file.name.replace('"', "_")
        head += (
            f"--{boundary}\r\nContent-Disposition: form-data; "
            f'name="{field}"; filename="{fname}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        tail = f"\r\n--{boundary}--\r\n".encode()
        total = len(head) + file.stat().st_size + len(tail)
        with _MultipartStream(head, file, tail, total, progress) as body:
            answer = self.request(
                "POST",
                path,
                data=body,
                headers={
                    "Content-Type": f"multipart/form-data; boundary={boundary}",
                    "Content-Length": str(total),
                },
                dedup_key=sha,
            ).json()
        stored = answer.get("sha256") if isinstance(answer, dict) else None
        if stored is not None and stored != sha:
            raise ClientError(f"the server stored a different file (sha256 {stored}, sent {sha})")
        return answer


def _upload_state(sha: str) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "palimpsest" / "uploads" / f"{sha}.json"


def upload_large(
    client: Client,
    task_id: str,
    file: Path,
    fields: dict,
    progress: Callable[[int, int], None] | None = None,
    stop_after: int | None = None,
):
    """Send a file straight to the site's object store in parts through presigned URLs, then
    complete it as a submission. Resumable: the ticket is kept in the user's cache
    (`~/.cache/palimpsest/uploads/<sha256>.json`) until the upload completes, and a later call for
    the same file sends only the parts the store does not hold. Returns the submission, or None
    when the site keeps no object store (send the file as a plain upload then). `stop_after`
    (tests) stops after sending that many parts, as a dropped connection would."""
    import requests  # plain PUTs to the store's URLs, outside the API's retrying session

    sha = file_sha256(file)
    size = file.stat().st_size
    state = _upload_state(sha)
    ticket = None
    if state.is_file():
        try:
            saved = json.loads(state.read_text())
            if saved.get("server") == client.server:
                ticket = saved["upload"]
        except (ValueError, KeyError):
            ticket = None
    plan = None
    if ticket is not None:
        try:
            plan = client.send_json("POST", "/uploads/parts", {"upload": ticket})
        except ClientError as e:
            if e.status != 404:
                raise
            plan = None
    if plan is None:
        try:
            plan = client.send_json(
                "POST",
                f"/tasks/{task_id}/uploads",
                {"phase": fields.get("phase"), "filename": file.name, "size": size},
            )
        except ClientError as e:
            if e.status == 409 and (e.body or {}).get("code") == "no_store":
                return None
            raise
        state.parent.mkdir(parents=True, exist_ok=True)
        state.write_text(json.dumps({"server": client.server, "upload": plan["upload"]}))
    part = int(plan["part_size"])
    sent = len(plan.get("done", [])) * part
    http = requests.Session()
    with open(file, "rb") as f:
        for k, p in enumerate(plan["parts"]):
            if stop_after is not None and k >= stop_after:
                raise ClientError("the upload stopped (run the command again to resume)")
            f.seek((p["number"] - 1) * part)
            data = f.read(part)
            for attempt in range(client.retries + 1):
                try:
                    r = http.put(p["url"], data=data, timeout=client.timeout)
                    if r.status_code < 500:
                        break
                except OSError:
                    if attempt == client.retries:
                        raise ClientError(
                            "the object store did not take a part (run the command again to resume)"
                        ) from None
            if r.status_code >= 400:
                raise ClientError(f"the object store refused part {p['number']} ({r.status_code})")
            sent += len(data)
            if progress is not None:
                progress(min(sent, size), size)
    body = {k: v for k, v in fields.items() if v is not None}
    for k in ("show_publicly", "primary"):
        if isinstance(body.get(k), str):
            body[k] = body[k] == "true"
    facts = {k[5:]: body.pop(k) for k in list(body) if k.startswith("fact.")}
    if facts:
        body["facts"] = facts
    answer = client.send_json("POST", "/uploads/complete", {**body, "upload": plan["upload"]})
    state.unlink(missing_ok=True)
    stored = answer.get("sha256") if isinstance(answer, dict) else None
    if stored is not None and stored != sha:
        raise ClientError(f"the server stored a different file (sha256 {stored}, sent {sha})")
    return answer


def file_sha256(file: Path) -> str:
    """The sha256 of a file, read in chunks: the dedup key of its upload."""
    h = hashlib.sha256()
    with open(file, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class _MultipartStream:
    """A file-like body that streams head + file + tail and reports progress; it can be rewound
    (urllib3 seeks it back to 0 before a retry)."""

    def __init__(self, head: bytes, file: Path, tail: bytes, total: int, progress):
        self.head, self.tail, self.total, self.progress = head, tail, total, progress
        self._f = open(file, "rb")
        self.pos = 0

    def __enter__(self) -> _MultipartStream:
        return self

    def __exit__(self, *_exc) -> None:
        self._f.close()

    def tell(self) -> int:
        return self.pos

    def seek(self, pos: int, whence: int = 0) -> int:
        if (pos, whence) != (0, 0):
            raise OSError("the upload body rewinds to its start only")
        self.pos = 0
        self._f.seek(0)
        return 0

    def read(self, n: int = 1 << 16) -> bytes:
        if n is None or n < 0:
            n = self.total
        head_end, file_end = len(self.head), self.total - len(self.tail)
        if self.pos < head_end:
            chunk = self.head[self.pos : self.pos + n]
        elif self.pos < file_end:
            chunk = self._f.read(min(n, file_end - self.pos))
        else:
            chunk = self.tail[self.pos - file_end : self.pos - file_end + n]
        self.pos += len(chunk)
        if chunk and self.progress:
            self.progress(self.pos, self.total)
        return chunk

    def __len__(self) -> int:
        return self.total
