"""Changes of a whole task or phase under races, against a served app (gunicorn, 4 processes of
5 threads), on SQLite and PostgreSQL, each race real parallel requests released by a barrier:

- 10 updates of a task at once (two different edited bundles, five each): every request is
  answered (200, or 409 naming the change in progress), none 500; the database's newest version
  is the files' version, one version per update that changed something; no staging folder is
  left in the data directory; a later update succeeds;
- 20 publications of a phase at once (each closing it first): one ranking version, no 500, and
  every request that succeeded names that version.
"""

from __future__ import annotations

import io
import json
import shutil
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
import yaml
from livekit import _at_once, _codes, _people, gunicorn_site
from sqlmodel import Session, select

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "bundle-sts-latin"
SLUG, TASK = "sts-latin-2027", "sts-latin"
pytestmark = pytest.mark.slow


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def served(request, tmp_path_factory, private_redis_url):
    """A gunicorn serving the app on a fresh database and data directory of its own (its tasks
    are installed by the test, not shared); yields (url, engine, home, kind, log)."""
    yield from gunicorn_site(
        request, tmp_path_factory, private_redis_url, name="changes", secret="c"
    )


def _bundle_zip(tmp: Path, name: str, edit=None) -> bytes:
    root = tmp / name
    shutil.copytree(EXAMPLE, root)
    spec = yaml.safe_load((root / "competition.yaml").read_text(encoding="utf-8"))
    spec["registration"]["approval"] = "auto"
    spec["state"] = "visible"
    # no required fact (the track, which the track-b board filters on, is optional)
    spec["fact_fields"] = [f for f in spec["fact_fields"] if f["key"] == "track"]
    if edit is not None:
        edit(spec, root)
    (root / "competition.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for p in sorted(root.rglob("*")):
            if p.is_file():
                z.write(p, p.relative_to(root).as_posix())
    return buf.getvalue()


def _primary(metric: str):
    def edit(spec, root):
        spec["tasks"][0]["primary"] = {"subset": "all", "metric": metric}

    return edit


def _gold_flip(spec, root):
    gold = root / "sts-latin" / "dev" / "dev-gold.jsonl"
    lines = gold.read_text().splitlines()
    row = json.loads(lines[0])
    row["score"] = 0.0 if row["score"] > 0.5 else 1.0
    lines[0] = json.dumps(row)
    gold.write_text("\n".join(lines) + "\n")


def _post_bundle(web: str, token: str, path: str, data: bytes, **fields):
    b = "----palimpsest-bundle"
    body = b""
    for k, v in fields.items():
        body += f'--{b}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
    body += (
        f'--{b}\r\nContent-Disposition: form-data; name="bundle"; filename="bundle.zip"\r\n'
        "Content-Type: application/zip\r\n\r\n"
    ).encode()
    body += data + f"\r\n--{b}--\r\n".encode()
    req = urllib.request.Request(
        web + path,
        data=body,
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": f"multipart/form-data; boundary={b}",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def _call(url, token, body=None):
    req = urllib.request.Request(
        url,
        method="POST",
        data=json.dumps(body or {}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def _staging(home: Path) -> list[str]:
    """Staging and backup folders (hidden names) left in the data directory's tasks."""
    return sorted(
        p.relative_to(home).as_posix()
        for p in (home / "tasks").rglob(".*")
        if p.name not in (".touch",)
    )


@pytest.fixture(scope="module")
def competition(served, tmp_path_factory):
    from server.models import User

    eng, web = served["engine"], served["url"]
    ((admin, tok),) = _people(eng, 1, "admin")
    with Session(eng) as s:
        u = s.get(User, admin)
        u.is_admin = True
        s.add(u)
        s.commit()
    tmp = tmp_path_factory.mktemp("bundles")
    st, body = _post_bundle(web, tok, "/api/v1/competitions/bundle", _bundle_zip(tmp, "v1"))
    assert st == 201, body
    return {"token": tok, "tmp": tmp}


def _versions(served, token) -> tuple[int, list[int], int]:
    """(the version the served app names, the versions the database records, the version in
    the task's declaration on disk)."""
    from server.models import TaskVersion

    web, eng, home = served["url"], served["engine"], served["home"]
    req = urllib.request.Request(
        f"{web}/api/v1/tasks/{TASK}/versions", headers={"Authorization": f"Bearer {token}"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        state = json.loads(r.read())
    with Session(eng) as s:
        recorded = sorted(
            s.exec(select(TaskVersion.version).where(TaskVersion.task_id == TASK)).all()
        )
    declared = json.loads((home / "tasks" / TASK / "declaration.json").read_text())
    return state["version"], recorded, declared.get("version", 1)


def test_ten_updates_of_a_task_at_once_leave_one_consistent_version_each(served, competition):
    web, home, tok, tmp = served["url"], served["home"], competition["token"], competition["tmp"]
    first, _, _ = _versions(served, tok)
    bundles = [
        _bundle_zip(tmp, "pearson", _primary("pearson")),
        _bundle_zip(tmp, "gold", _gold_flip),
    ]
    got = _at_once(
        [
            lambda data=bundles[i % 2], i=i: _post_bundle(
                web, tok, f"/api/v1/tasks/{TASK}/versions", data, reason=f"race {i}"
            )
            for i in range(10)
        ]
    )
    print(f"{served['kind']}: 10 updates at once: {_codes(got)}")
    assert all(st in (200, 409) for st, _ in got), got
    busy = [b for st, b in got if st == 409]
    assert all(b["error"]["code"] == "change_in_progress" for b in busy), busy
    made = sum(
        1 for st, b in got if st == 200 and any(t.get("version") for t in b.get("tasks", []))
    )
    served_v, recorded, declared = _versions(served, tok)
    # each update that changed the task made one version; the files, the database and the
    # served app agree on the newest
    assert recorded[-1] == served_v == declared, (recorded, served_v, declared)
    assert len(set(recorded)) == len(recorded)
    assert _staging(home) == []
    assert recorded[-1] >= first + 1 and made >= 1
    # a later update succeeds and makes the next version
    st, body = _post_bundle(
        web,
        tok,
        f"/api/v1/tasks/{TASK}/versions",
        _bundle_zip(tmp, "spearman-2", _primary("spearman")),
        reason="after the race",
    )
    assert st == 200, body
    served_v2, recorded2, declared2 = _versions(served, tok)
    assert served_v2 == recorded2[-1] == declared2 == recorded[-1] + 1
    assert _staging(home) == []


def test_twenty_publications_at_once_make_one_ranking_version(served, competition):
    from server.models import Phase, RankingVersion

    web, eng, tok = served["url"], served["engine"], competition["token"]
    with Session(eng) as s:  # open now: each request closes it, then publishes
        p = s.exec(select(Phase).where(Phase.task_id == TASK, Phase.name == "development")).one()
        p.opens_at = p.closes_at = None
        s.add(p)
        s.commit()
    got = _at_once(
        [
            lambda: _call(
                f"{web}/api/v1/tasks/{TASK}/phases/development/publish", tok, {"close": True}
            )
            for _ in range(20)
        ]
    )
    with Session(eng) as s:
        versions = s.exec(
            select(RankingVersion.version).where(
                RankingVersion.task_id == TASK, RankingVersion.phase_name == "development"
            )
        ).all()
    print(f"{served['kind']}: 20 publications at once: {_codes(got)}; versions {versions}")
    assert versions == [1], versions
    assert all(st in (200, 201) for st, _ in got), _codes(got)


def test_twenty_publications_of_a_phase_with_boards_make_one_set_of_board_rankings(
    served, competition
):
    """The evaluation phase declares three boards beside its default one: twenty publications at
    once make one version, with exactly one published ranking of each board."""
    from server.models import BoardRanking, Phase, RankingVersion

    web, eng, tok = served["url"], served["engine"], competition["token"]
    with Session(eng) as s:
        p = s.exec(select(Phase).where(Phase.task_id == TASK, Phase.name == "evaluation")).one()
        p.opens_at = p.closes_at = None
        s.add(p)
        s.commit()
        assert [b["name"] for b in p.boards] == ["prose", "verse", "track-b"]
    got = _at_once(
        [
            lambda: _call(
                f"{web}/api/v1/tasks/{TASK}/phases/evaluation/publish", tok, {"close": True}
            )
            for _ in range(20)
        ]
    )
    with Session(eng) as s:
        rvs = s.exec(
            select(RankingVersion).where(
                RankingVersion.task_id == TASK, RankingVersion.phase_name == "evaluation"
            )
        ).all()
        boards = s.exec(
            select(BoardRanking.board).where(BoardRanking.ranking_id.in_([r.id for r in rvs]))
        ).all()
    print(f"{served['kind']}: 20 publications of a phase with boards: {_codes(got)}")
    assert [r.version for r in rvs] == [1]
    assert sorted(boards) == ["prose", "track-b", "verse"]
    assert all(st in (200, 201) for st, _ in got), _codes(got)


def test_an_update_the_exposure_rule_refuses_answers_422_and_changes_nothing(served, competition):
    """An edited bundle whose public dev gold names the hidden test pairs with their labels."""

    def leak(spec, root):
        test_gold = (root / "sts-latin" / "test" / "test-gold.jsonl").read_text()
        dev = root / "sts-latin" / "dev"
        (dev / "dev-gold.jsonl").write_text((dev / "dev-gold.jsonl").read_text() + test_gold)
        inputs = [
            json.dumps({**json.loads(line), "sentence1": "a", "sentence2": "b"})
            for line in test_gold.splitlines()
        ]
        (dev / "inputs.jsonl").write_text(
            (dev / "inputs.jsonl").read_text() + "\n".join(inputs) + "\n"
        )

    web, tok, tmp = served["url"], competition["token"], competition["tmp"]
    before = _versions(served, tok)
    st, body = _post_bundle(
        web, tok, f"/api/v1/tasks/{TASK}/versions", _bundle_zip(tmp, "leak", leak), reason="x"
    )
    print(f"{served['kind']}: a leaking update: {st} {body['error']['code']}")
    assert st == 422, body
    assert body["error"]["code"] in ("exposure_refused", "invalid_bundle"), body
    assert "LAT-test-0000" not in json.dumps(body)  # the refusal names no hidden pair
    assert _versions(served, tok) == before and _staging(served["home"]) == []
