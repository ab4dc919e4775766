"""cli/client.py against a real server behind a proxy that drops connections: idempotent requests
are retried, a publish POST never is, an upload carrying its dedup key is retried and ends as one
submission."""

from __future__ import annotations

import socket
import threading

import pytest
from apikit import _tric_file
from sqlmodel import Session, select
from werkzeug.serving import make_server

from cli.client import Client, ClientError
from server.models import Phase, Submission


def _read_request(conn: socket.socket) -> bytes:
    """One whole HTTP request: its head, then Content-Length bytes of body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class DroppingProxy:
    """A threaded TCP proxy on a free loopback port. The first `drop` connections are closed
    without an answer: `before` the request reaches the server, or `after` it was handled
    (the answer lost on the way back). `requests` lists each request line the server received."""

    def __init__(self, backend_port: int):
        self.backend_port = backend_port
        self.drop, self.when = 0, "before"
        self.seen: list[str] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def arm(self, drop: int, when: str) -> None:
        with self.lock:
            self.drop, self.when, self.seen, self.connections = drop, when, [], 0

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            request = _read_request(conn)
            if not request:
                return
            with self.lock:
                self.connections += 1
                dropping = self.connections <= self.drop
                when = self.when
            if dropping and when == "before":
                return  # closed: the server never saw it
            with self.lock:
                self.seen.append(request.split(b"\r\n", 1)[0].decode())
            with socket.create_connection(("127.0.0.1", self.backend_port)) as up:
                up.sendall(request)
                answer = b""
                while chunk := up.recv(65536):
                    answer += chunk
            if not dropping:
                conn.sendall(answer)

    def close(self) -> None:
        self.sock.close()


@pytest.fixture()
def proxied(api_env):  # noqa: F811
    app, tokens, home = api_env
    http = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=http.serve_forever, daemon=True).start()
    proxy = DroppingProxy(http.server_port)
    yield app, tokens, home, proxy
    proxy.close()
    http.shutdown()


def _client(proxy: DroppingProxy, token: str) -> Client:
    return Client(f"http://127.0.0.1:{proxy.port}", token, retries=3, backoff=0.01, timeout=20)


def test_a_get_is_retried_after_dropped_connections(proxied):
    _app, tokens, _home, proxy = proxied
    c = _client(proxy, tokens["alpha"])
    proxy.arm(drop=2, when="after")
    assert c.get_json("/me")["email"] == "alpha@example.org"
    assert proxy.connections == 3 and len(proxy.seen) == 3  # twice handled, answers lost
    proxy.arm(drop=5, when="before")  # more drops than retries: a clear error, no traceback
    with pytest.raises(ClientError, match="cannot reach the server"):
        c.get_json("/me")
    assert proxy.connections == 4  # the first try and three retries


def test_a_publish_post_is_never_retried(proxied):
    app, tokens, _home, proxy = proxied
    c = _client(proxy, tokens["org"])
    proxy.arm(drop=1, when="after")
    with pytest.raises(ClientError, match="cannot reach the server"):
        c.send_json("POST", "/tasks/tric-binary/phases/test/close")
    assert proxy.connections == 1 and len(proxy.seen) == 1  # sent once, not again
    proxy.arm(drop=1, when="before")
    with pytest.raises(ClientError):
        c.send_json("POST", "/tasks/tric-binary/phases/test/publish", {"close": True})
    assert proxy.connections == 1 and proxy.seen == []
    with Session(app.extensions["palimpsest.engine"]) as s:
        phase = s.exec(
            select(Phase).where(Phase.task_id == "tric-binary", Phase.name == "test")
        ).one()
        assert phase.closes_at is not None  # the first POST did its work
        assert phase.published_at is None  # the dropped publish was not sent again


def test_an_upload_with_its_dedup_key_is_retried_and_counted_once(proxied, tmp_path):
    app, tokens, home, proxy = proxied
    c = _client(proxy, tokens["alpha"])
    f = tmp_path / "pred.jsonl"
    f.write_bytes(_tric_file(home))
    sent = []
    proxy.arm(drop=2, when="after")  # handled twice, both answers lost
    sub = c.upload(
        "/tasks/tric-binary/submissions",
        f,
        {"phase": "test"},
        progress=lambda n, total: sent.append((n, total)),
    )
    assert proxy.connections == 3 and len(proxy.seen) == 3
    assert all(line.startswith("POST /api/v1/tasks/tric-binary/submissions") for line in proxy.seen)
    assert sub["duplicate"] is True  # the third try found the first one's submission
    assert sent[-1][0] == sent[-1][1]  # the body was rewound and sent whole each time
    with Session(app.extensions["palimpsest.engine"]) as s:
        subs = s.exec(select(Submission)).all()
        assert [x.id for x in subs] == [sub["id"]]
