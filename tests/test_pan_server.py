"""PAN text alignment on the server: the example bundle (examples/bundle-pan-alignment) created from
its YAML with a board per obfuscation type, runs in JSON Lines and PAN's XML through the one
intake ranked on each board by the value the scorer gives on the board's pairs; and the built-in
task's uploads in every accepted form through the REST API, the web form and the remote command
line, each storing the offline `score`'s result, a bad span refused on its line."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from apikit import _cli, _h, _one_json, _run_job
from backbone import burst, make_team, submit
from click.testing import CliRunner
from conftest import REPO, _make_backend
from sqlalchemy import select
from webkit import Browser

from tasks import pan

EXAMPLE = REPO / "examples" / "bundle-pan-alignment"
TASK = "pan-align"


@pytest.fixture(autouse=True)
def _forget():
    yield
    from tasks import unregister_declared

    unregister_declared(TASK)


def _xml(jsonl: str) -> str:
    by_pair: dict = {}
    for line in jsonl.splitlines():
        r = json.loads(line)
        by_pair.setdefault((r["this_reference"], r["source_reference"]), []).append(
            (r["this_offset"], r["this_length"], r["source_offset"], r["source_length"])
        )
    return (
        "<run>\n"
        + "".join(pan.detection_xml(t, s, v) for (t, s), v in by_pair.items())
        + "</run>\n"
    )


def test_the_example_bundle_ranks_runs_on_a_board_per_obfuscation(request, tmp_path, monkeypatch):
    import yaml

    from server.actions import bundles
    from server.boards.leaderboard import build_board
    from server.domain.provenance import current_provenance
    from server.models import Phase, Score, Submission
    from tasks import get_task
    from tasks.bundle_models import BoardSpec

    monkeypatch.setenv("PALIMPSEST_BOOTSTRAP_SAMPLES", "50")
    src = tmp_path / "src"
    (src / "tasks").mkdir(parents=True)
    b = _make_backend("embedded", request, tmp_path, src, monkeypatch)
    b.settings.bootstrap_samples = 50
    root = tmp_path / "bundle"
    import shutil

    shutil.copytree(EXAMPLE, root)
    spec = yaml.safe_load((root / "competition.yaml").read_text())
    spec["state"] = "visible"
    (root / "competition.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    with b.session() as s:
        bundles.create_from_bundle(s=s, actor=None, source=root, via="test", settings=b.settings)
    gold = [
        json.loads(x) for x in (EXAMPLE / "pan-align/test/test-gold.jsonl").read_text().splitlines()
    ]
    pairs = [
        json.loads(x) for x in (EXAMPLE / "pan-align/test/pairs.jsonl").read_text().splitlines()
    ]
    rows = [
        (p["suspicious"], p["source"], c["this_offset"] + 15, c["this_length"] - 15)
        + (c["source_offset"], c["source_length"])
        for p, g in zip(pairs, gold, strict=True)
        for c in g["cases"]
    ]
    good = pan.jsonl_detections(rows)
    runs = {}
    for name, data, fname in (
        ("jsonl", good.encode(), "run.jsonl"),
        ("xml", _xml(good).encode(), "run.xml"),
        ("half", "".join(good.splitlines(True)[::2]).encode(), "run.jsonl"),
    ):
        team, user = make_team(b, f"pan-{name}")
        runs[name] = submit(b, team, user, TASK, "evaluation", data=data, filename=fname).id
    burst(b)
    t = get_task(TASK)
    with b.session() as s:
        ph = s.execute(
            select(Phase).where(Phase.task_id == TASK, Phase.name == "evaluation")
        ).scalar_one()
        public = {}
        for name, sid in runs.items():
            assert s.get(Submission, sid).status == "scored", name
            sc = s.execute(
                select(Score).where(Score.submission_id == sid, Score.part == "public")
            ).scalar_one()
            public[name] = sc.result["metrics"]
        assert public["jsonl"] == public["xml"]
        specs = [BoardSpec.model_validate(d) for d in ph.boards]
        assert [x.name for x in specs] == ["no-obfuscation", "random", "translation"]
        prov = current_provenance(t, "test", b.settings.home)
        for spec in specs:
            board = build_board(s, t, ph, provenance=prov, board=spec, audience="organizer")
            key = board.primary.key
            got = {r.team: r.values[key] for r in board.rows}
            sub = spec.ranking.subset
            want = {f"pan-{n}": public[n][sub]["plagdet"] for n in runs}
            assert got == pytest.approx(want, abs=1e-12), spec.name
            assert all(r.rank for r in board.rows)


def test_uploads_on_every_surface_in_every_form_store_the_offline_score(served, tmp_path):
    """JSON Lines and PAN XML uploaded through the REST API, the web form and the remote command
    line (a zip of PAN's per-pair files through the API) each store the result the offline
    `palimpsest score` prints for the same file."""
    from sqlmodel import Session, select

    from cli.main import main
    from server.db import get_engine
    from server.domain.submissions import ensure_phases
    from server.models import Phase, Score
    from server.settings import Settings
    from tasks.importers import import_task

    url, tokens, home, app = served
    corpus = tmp_path / "corpus"
    pan.generate(corpus, seed=4, n_susp=6, n_src=6)
    import_task("pan-text-alignment", home, source=corpus)
    engine = get_engine(Settings(home=home).sqlalchemy_url())
    with Session(engine) as s:
        ensure_phases(s, home)
        for p in s.exec(select(Phase).where(Phase.task_id == "pan-text-alignment")).all():
            p.public_fraction = 1.0  # one part, "all": the whole split, as offline
            p.daily_limit = p.total_limit = p.concurrent_limit = None
            s.add(p)
        s.commit()
    c = pan.read_corpus(corpus)
    rows = [
        (t, s, x["this_offset"], x["this_length"], x["source_offset"], x["source_length"])
        for (t, s) in c["pairs"]
        for x in c["cases"][(t, s)]
    ]

    def files_for(k: int) -> dict[str, bytes]:
        """The run in each form, its lines turned by `k` (each surface's own bytes, one run)."""
        lines = pan.jsonl_detections(rows[1:]).splitlines(True)
        jl = "".join(lines[k:] + lines[:k])
        zbuf = io.BytesIO()
        with zipfile.ZipFile(zbuf, "w") as zf:
            by_pair: dict = {}
            for t, s, *v in rows[1:]:
                by_pair.setdefault((t, s), []).append(v)
            for (t, s), v in by_pair.items():
                zf.writestr(f"{pan.pair_id(t, s)}.xml", pan.detection_xml(t, s, v))
        return {"jsonl": jl.encode(), "xml": _xml(jl).encode(), "zip": zbuf.getvalue()}

    uploads = {  # (surface, form) -> the file
        (surface, form): data
        for k, surface in enumerate(("api", "web", "cli"))
        for form, data in files_for(k).items()
        if form != "zip" or surface == "api"
    }
    env = {"PALIMPSEST_HOME": str(home), "XDG_CONFIG_HOME": "/none"}
    offline, paths = {}, {}
    for (surface, form), data in uploads.items():
        paths[surface, form] = tmp_path / f"{surface}.{form}"
        paths[surface, form].write_bytes(data)
        r = CliRunner().invoke(
            main, ["score", "pan-text-alignment", str(paths[surface, form]), "--json"], env=env
        )
        assert r.exit_code == 0, r.output
        offline[surface, form] = json.loads(r.stdout)["metrics"]
    assert 0 < offline["api", "jsonl"]["all"]["plagdet"] < 1
    assert offline["api", "xml"]["all"]["plagdet"] == offline["api", "jsonl"]["all"]["plagdet"]

    client = app.test_client()
    web = Browser(app.test_client())
    web.login("alpha@example.org", "correct horse")
    sids = {}
    for (surface, form), path in paths.items():
        if surface == "api":
            r = client.post(
                "/api/v1/tasks/pan-text-alignment/submissions",
                headers=_h(tokens["alpha"]),
                data={"file": (io.BytesIO(path.read_bytes()), path.name), "phase": "test"},
                content_type="multipart/form-data",
            )
            assert r.status_code == 201, r.json
            sids[surface, form] = r.json["id"]
        elif surface == "web":
            r = web.post(
                "/tasks/pan-text-alignment/submit",
                {"phase": "test", "method_name": "web", "description": "", "url": "",
                 "show_publicly": "on", "file": (io.BytesIO(path.read_bytes()), path.name)},
                content_type="multipart/form-data",
            )  # fmt: skip
            assert r.status_code == 302, r.get_data(as_text=True)[:500]
            sids[surface, form] = int(r.headers["Location"].rsplit("/", 1)[1])
        else:  # the remote command line, through the API
            out = _cli(url, tokens["alpha"], "submit", "pan-text-alignment", str(path),
                       "--phase", "test", "--json")  # fmt: skip
            sids[surface, form] = _one_json(out)["id"]
    assert len(set(sids.values())) == len(sids) == 7
    with Session(engine) as s:
        for how, sid in sids.items():
            assert _run_job(sid)["status"] == "scored", how
            sc = s.exec(select(Score).where(Score.submission_id == sid, Score.part == "all"))
            assert sc.one().result["metrics"] == offline[how], how
    client = app.test_client()
    t, s, *_ = rows[0]
    bad = (
        f'<document reference="{t}">\n<feature name="detected-plagiarism" this_offset="5" '
        f'this_length="-2" source_reference="{s}" source_offset="0" source_length="3"/>\n'
        "</document>\n"
    )
    r = client.post(
        "/api/v1/tasks/pan-text-alignment/submissions",
        headers=_h(tokens["alpha"]),
        data={"file": (io.BytesIO(bad.encode()), "bad.xml"), "phase": "test", "method_name": "bad"},
        content_type="multipart/form-data",
    )
    if r.status_code == 201:
        assert _run_job(r.json["id"])["status"] == "failed"
        body = client.get(f"/api/v1/submissions/{r.json['id']}", headers=_h(tokens["alpha"])).json
        text = json.dumps(body)
    else:
        text = json.dumps(r.json)
    assert "this_length is negative" in text and "2" in text
