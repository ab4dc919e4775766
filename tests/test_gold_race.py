"""Gold-version numbers under a race: 20 closes of one decided campaign sent at once to the served
app (a threaded HTTP server over SQLite) write one new gold version (v2), and the gold files on
disk are that version's (a close that lost the race puts nothing back over them)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

from apikit import _h
from campaignkit import PHASE, TASK, _open_and_judge, world  # noqa: F401 — the fixture
from sqlmodel import Session, select

N = 20


def test_twenty_closes_at_once_write_one_gold_version(world):  # noqa: F811
    from server.models import GoldVersion
    from tasks.store import TaskStore, tree_sha256

    url, tokens, c, app, home = (world[k] for k in ("url", "tokens", "c", "app", "home"))
    opened, _items = _open_and_judge(world)
    cid = opened["id"]
    r = c.post(
        f"/api/v1/campaigns/{cid}/adjudicate", headers=_h(tokens["lorg"]), json={"majority": True}
    )
    assert r.status_code == 200, r.json
    go = threading.Barrier(N)
    got: list = [None] * N

    def close(i):
        req = urllib.request.Request(
            f"{url}/api/v1/campaigns/{cid}/close",
            method="POST",
            data=b"{}",
            headers={**_h(tokens["lorg"]), "Content-Type": "application/json"},
        )
        go.wait()
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                got[i] = (resp.status, json.loads(resp.read()))
        except urllib.error.HTTPError as e:
            got[i] = (e.code, json.loads(e.read() or b"null"))

    threads = [threading.Thread(target=close, args=(i,)) for i in range(N)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    codes: dict = {}
    for st, body in got:
        k = f"{st} {(body or {}).get('error', {}).get('code', '')}".strip()
        codes[k] = codes.get(k, 0) + 1
    engine = app.extensions["palimpsest.engine"]
    with Session(engine) as s:
        versions = list(
            s.exec(
                select(GoldVersion)
                .where(GoldVersion.task_id == TASK, GoldVersion.split == PHASE)
                .order_by(GoldVersion.version)
            )
        )
    store = TaskStore(TASK, home)
    on_disk = tree_sha256(store.root / "gold" / PHASE)
    print(f"{N} closes at once: {codes}; versions {[v.version for v in versions]}")
    assert codes.get("200") == 1 and codes.get("409 closed") == N - 1, codes
    assert [v.version for v in versions] == [1, 2]
    assert on_disk == versions[-1].sha256 == store.gold_checksum(PHASE)
