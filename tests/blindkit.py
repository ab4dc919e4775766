"""Blind runs in the tests: a system, its archive, a competition and a blind phase to run it on,
and the sandbox's inputs."""

from __future__ import annotations

import io
import urllib.error
import urllib.request
from pathlib import Path

from sqlmodel import Session, select
from webkit import engine_of, make_token, make_user, update_phase

from server.models import Phase
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "bundle-sts-latin"


SYSTEM = REPO / "examples" / "system-sts-latin"


SLUG, TASK = "sts-latin-2027", "sts-latin"


def _h(token):
    return {"Authorization": f"Bearer {token}"}


def _zip(folder: Path, out: Path, replace: dict[str, str] | None = None) -> bytes:
    from cli.participant.submit import zip_system

    src = folder
    if replace:
        src = out.parent / f"{out.stem}-src"
        src.mkdir()
        for p in folder.iterdir():
            (src / p.name).write_bytes(p.read_bytes())
        for name, text in replace.items():
            (src / name).write_text(text)
    return zip_system(src, out).read_bytes()


def _competition(app):
    """The example competition, visible, with ann approved in team Lexica and the systems phase
    open now; returns the tokens."""
    from server.actions import bundles
    from server.settings import get_settings

    with Session(engine_of(app)) as s:
        bundles.create_from_bundle(
            s=s, actor=None, source=EXAMPLE, via="test", settings=get_settings()
        )
    admin = make_user(app, "admin@x.org", organizer=True)
    ann = make_user(app, "ann@x.org")
    tok = {"admin": make_token(app, admin), "ann": make_token(app, ann)}
    c = app.test_client()
    assert c.patch(
        f"/api/v1/competitions/{SLUG}", json={"state": "visible"}, headers=_h(tok["admin"])
    ).status_code in (200, 403)
    with Session(engine_of(app)) as s:
        from server.actions import competitions as comp
        from server.domain import people
        from server.models import Competition

        cid = comp.find(s, SLUG).id
        people.grant(s, cid, admin, people.OWNER, by=None)
        s.get(Competition, cid).state = "visible"
        s.commit()
    r = c.post(
        f"/api/v1/competitions/{SLUG}/registration",
        json={"accept_terms": True},
        headers=_h(tok["ann"]),
    )
    assert r.status_code == 200, r.json
    r = c.post(
        f"/api/v1/competitions/{SLUG}/participants/ann@x.org/approve",
        json={},
        headers=_h(tok["admin"]),
    )
    assert r.status_code == 200, r.json
    r = c.post("/api/v1/team", json={"name": "Lexica", "competition": SLUG}, headers=_h(tok["ann"]))
    assert r.status_code == 201, r.json
    with Session(engine_of(app)) as s:
        for p in s.exec(select(Phase).where(Phase.task_id == TASK)).all():
            update_phase(app, p.id, opens_at=None, closes_at=None)
    return tok


def _second_team(app, tok: dict, email: str, team: str) -> str:
    """Another participant of the example competition, approved, in a team of their own; their
    token."""
    user = make_user(app, email)
    token = make_token(app, user)
    c = app.test_client()
    r = c.post(
        f"/api/v1/competitions/{SLUG}/registration", json={"accept_terms": True}, headers=_h(token)
    )
    assert r.status_code == 200, r.json
    r = c.post(
        f"/api/v1/competitions/{SLUG}/participants/{email}/approve",
        json={},
        headers=_h(tok["admin"]),
    )
    assert r.status_code == 200, r.json
    r = c.post("/api/v1/team", json={"name": team, "competition": SLUG}, headers=_h(token))
    assert r.status_code == 201, r.json
    return token


def _phase(app, name) -> Phase:
    with Session(engine_of(app)) as s:
        return s.exec(select(Phase).where(Phase.task_id == TASK, Phase.name == name)).one()


def _facts():
    return {"fact.system_description": "word overlap"}


def _system(tmp_path: Path, script: str, name: str = "sys") -> Path:
    code = tmp_path / name
    code.mkdir()
    (code / "main.py").write_text(script)
    (code / "system.yaml").write_text("command: [python3, main.py]\n")
    code.chmod(0o755)
    (code / "main.py").chmod(0o644)
    return code


def _inputs(tmp_path: Path) -> Path:
    d = tmp_path / "inputs"
    d.mkdir()
    (d / "inputs.jsonl").write_text('{"pair_id": "x"}\n')
    d.chmod(0o755)
    (d / "inputs.jsonl").chmod(0o644)
    return d


def _http(method, url, token, body: bytes | None = None, ctype: str | None = None):
    req = urllib.request.Request(url, data=body, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if ctype:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _multipart(fields: dict, code: bytes) -> tuple[bytes, str]:
    boundary = "----p45gate"
    out = io.BytesIO()
    for k, v in fields.items():
        out.write(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n'.encode())
        out.write(f"{v}\r\n".encode())
    out.write(
        f'--{boundary}\r\nContent-Disposition: form-data; name="code"; filename="s.zip"\r\n'
        "Content-Type: application/zip\r\n\r\n".encode()
    )
    out.write(code + b"\r\n")
    out.write(f"--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def _submit(base, token, code: bytes, phase="systems"):
    body, ctype = _multipart({"phase": phase, **_facts()}, code)
    return _http("POST", f"{base}/api/v1/tasks/{TASK}/runs", token, body, ctype)


def app_tmp(app):
    d = app.extensions["palimpsest.settings"].home.parent / "zips"
    d.mkdir(exist_ok=True)
    return d
