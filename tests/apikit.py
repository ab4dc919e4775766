"""What the API and CLI tests share: a served app's calls, a submission made and scored, the
CLI run in-process, the organizer's checks."""

from __future__ import annotations

import io
import json
import re
import threading
import urllib.error

import jsonschema
import pytest
from click.testing import CliRunner
from sqlmodel import Session

from server.domain import people


def _h(token):
    return {"Authorization": f"Bearer {token}"}


def _tric_file(home, flip_every=5) -> bytes:
    gold = [
        json.loads(x)
        for x in (home / "tasks/tric-binary/gold/test/gold.jsonl").read_text().splitlines()
    ]
    rows = [
        {
            "instanceID": g["instanceID"],
            "label": (1 - g["label"]) if i % flip_every == 0 else g["label"],
        }
        for i, g in enumerate(gold)
    ]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def _submit(client, token, task, data: bytes, **form):
    return client.post(
        f"/api/v1/tasks/{task}/submissions",
        headers=_h(token),
        data={"file": (io.BytesIO(data), "pred.jsonl"), **form},
        content_type="multipart/form-data",
    )


def _run_job(sub_id):
    from server.jobs.scoring import score_submission

    return score_submission(sub_id)


def _resolve(spec, schema):
    """Inline $refs so jsonschema can check a response body."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[1]
            return _resolve(spec, spec["components"]["schemas"][name])
        return {k: _resolve(spec, v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_resolve(spec, v) for v in schema]
    return schema


def _cli(url, token, *args, ok=True):
    from cli.main import main

    r = CliRunner().invoke(
        main,
        list(args),
        env={
            "PALIMPSEST_SERVER": url,
            "PALIMPSEST_TOKEN": token,
            "XDG_CONFIG_HOME": "/nonexistent",
        },
        catch_exceptions=False,
    )
    if ok:
        assert r.exit_code == 0, (args, r.output)
    return r


def _one_json(r):
    return json.loads(r.stdout)  # exactly one document: json.loads refuses trailing text


def _bearer(token):
    return {"Authorization": f"Bearer {token}"} if token else {}


def _check(spec, r, status):
    """The answer has the status expected, and it is declared with this body's schema."""
    assert r.status_code == status, r.get_data(as_text=True)[:500]
    rule = r.request.path[len("/api/v1") :]
    for path, ops in spec["paths"].items():
        if (
            re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", path), rule)
            and r.request.method.lower() in ops
        ):
            declared = ops[r.request.method.lower()]["responses"]
            assert str(status) in declared, (rule, status)
            schema = declared[str(status)]["content"]["application/json"]["schema"]
            jsonschema.validate(r.json, _resolve(spec, schema))
            return r.json
    raise AssertionError(f"{r.request.method} {rule} is not in the OpenAPI description")


TASK = "tric-binary"


def _engine(app):
    return app.extensions["palimpsest.engine"]


def _setup(app, **settings):
    """The task's competition with these settings; its short id."""
    with Session(_engine(app)) as s:
        c = people.competition_of_task(s, TASK)
        for k, v in settings.items():
            setattr(c, k, v)
        s.add(c)
        s.commit()
        return c.slug


def _terms(client, token, slug, text):
    r = client.put(
        f"/api/v1/competitions/{slug}/pages/terms",
        json={"title": "Terms", "body_markdown": text},
        headers=_h(token),
    )
    assert r.status_code == 200, r.json


@pytest.fixture(params=["sqlite", "postgresql"])
def site(request):
    """The app on SQLite or PostgreSQL, served on a free port (the CLI talks to it over HTTP)."""
    from werkzeug.serving import WSGIRequestHandler, make_server

    app = request.getfixturevalue("app" if request.param == "sqlite" else "pg_app")

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield app, f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


def api(url, token, method, path, body=None, *, raw=False):
    req = urllib.request.Request(
        url + "/api/v1" + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            data = r.read()
            return r.status, data if raw else json.loads(data or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def cli(url, token, *args):
    from cli.main import main

    r = CliRunner().invoke(
        main,
        [*args, "--json"],
        env={"PALIMPSEST_SERVER": url, "PALIMPSEST_TOKEN": token, "XDG_CONFIG_HOME": "/none"},
        catch_exceptions=False,
    )
    assert r.exit_code == 0, (args, r.output)
    return json.loads(r.stdout)


def upload(base, token, data: bytes, /, filename="pred.jsonl", **fields) -> tuple[int, dict]:
    """A multipart upload to the API, as curl -F sends it."""
    boundary = "----palimpsest-test"
    parts = []
    for k, v in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        )
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    req = urllib.request.Request(
        base + "/api/v1/tasks/tric-binary/submissions",
        method="POST",
        data=b"".join(parts),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": f"multipart/form-data; boundary={boundary}",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")
