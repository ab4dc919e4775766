"""Fact sheets, anonymous boards and published boards without an address: the declared fields
checked once for every surface (web form, API, CLI), every problem named in one 422 and nothing
stored on a refusal; the published ranking's fact sheets exported to its organizers; names hidden
on an anonymous board until publication; no email in a published snapshot."""

# ruff: noqa: F811 — the fixtures are imported
from __future__ import annotations

import csv
import io
import json
import re

import pytest
from apikit import _cli, _h, _one_json, _run_job, _submit, _tric_file
from sqlmodel import Session, select

from server import api_models as m
from server.actions import competitions as comp
from server.domain import people
from server.domain.facts import check_facts
from server.exceptions import UploadFieldsInvalid
from server.models import Phase, RankingVersion, Submission
from tests.webkit import Browser

FIELDS = [
    {"key": "affiliation", "label": "Affiliation", "kind": "text", "required": True},
    {
        "key": "approach",
        "label": "Approach",
        "kind": "choice",
        "choices": ["neural", "rules", "hybrid"],
        "required": True,
        "phases": ["test"],
    },
    {"key": "external_data", "label": "External data?", "kind": "yes_no"},
    {"key": "paper", "label": "Paper", "kind": "url", "help": "where it is described"},
    {"key": "summary", "label": "Summary", "kind": "long_text"},
]
GOOD = {
    "affiliation": "Uni X",
    "approach": "hybrid",
    "external_data": "yes",
    "paper": "https://example.org/p",
}


def _engine(app):
    return app.extensions["palimpsest.engine"]


def _declare(app, *, anonymous: bool | None = None, fields=FIELDS):
    """Put tric-binary in a competition asking the fact sheet (the server's shell acts)."""
    with Session(_engine(app), expire_on_commit=False) as s:
        c = people.ensure_competition(s, "tric-binary")
        s.commit()
        comp.edit_competition(
            s=s,
            actor=None,
            via="test",
            competition=c.slug,
            settings=m.CompetitionSettings(
                fact_fields=[m.FactField(**f) for f in fields], anonymous_board=anonymous
            ),
        )
        return c.slug


def _subs(app) -> list[Submission]:
    with Session(_engine(app)) as s:
        return list(s.exec(select(Submission).order_by(Submission.id)))


def _fact_form(facts: dict) -> dict:
    return {f"fact.{k}": v for k, v in facts.items()}


# ----------------------------------------------------------------------------- the check


def test_every_problem_is_named_at_once_keyed_by_field():
    with pytest.raises(UploadFieldsInvalid) as e:
        check_facts(
            FIELDS,
            "test",
            {
                "approach": "magic",
                "external_data": "maybe",
                "paper": "ftp://x.org/p",
                "summary": "x" * 20_001,
                "colour": "blue",
            },
        )
    f = e.value.fields
    assert set(f) == {
        "facts.affiliation",
        "facts.approach",
        "facts.external_data",
        "facts.paper",
        "facts.summary",
        "facts.colour",
    }
    assert "required" in f["facts.affiliation"]
    assert "neural, rules, hybrid" in f["facts.approach"]
    assert "yes or no" in f["facts.external_data"]
    assert "https://" in f["facts.paper"]
    assert "20000" in f["facts.summary"]
    assert "affiliation, approach, external_data, paper, summary" in f["facts.colour"]
    with pytest.raises(UploadFieldsInvalid) as e:
        check_facts(FIELDS, "dev", {"affiliation": "a" * 501 + "\x01"})
    assert "control character" in e.value.fields["facts.affiliation"]
    with pytest.raises(UploadFieldsInvalid) as e:
        check_facts(FIELDS, "dev", {"affiliation": "a" * 501})
    assert "at most 500" in e.value.fields["facts.affiliation"]


def test_required_per_phase_and_typed_values():
    # "approach" is required in the test phase only
    assert check_facts(FIELDS, "dev", {"affiliation": " Uni X "}) == {"affiliation": "Uni X"}
    with pytest.raises(UploadFieldsInvalid, match="facts.approach: required"):
        check_facts(FIELDS, "test", {"affiliation": "Uni X"})
    got = check_facts(FIELDS, "test", {**GOOD, "external_data": "False"})
    assert got["external_data"] is False and got["approach"] == "hybrid"
    assert check_facts(FIELDS, "test", GOOD)["external_data"] is True
    # an organizer's baseline entry answers nothing
    assert check_facts(FIELDS, "test", {}, require=False) == {}
    assert check_facts([], "test", {}) == {}


def _dev_file(home, flip_every: int = 5) -> bytes:
    """A tric-binary file of the dev split's ids (a test file is refused on a dev phase)."""
    gold = [
        json.loads(x)
        for x in (home / "tasks/tric-binary/gold/dev/gold.jsonl").read_text().splitlines()
    ]
    rows = [
        {
            "instanceID": g["instanceID"],
            "label": (1 - g["label"]) if i % flip_every == 0 else g["label"],
        }
        for i, g in enumerate(gold)
    ]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


# ----------------------------------------------------------------------------- submitting


def test_api_refuses_a_sheet_with_problems_storing_nothing_then_stores_it_typed(api_env):
    app, tokens, home = api_env
    _declare(app)
    c = app.test_client()
    data = _tric_file(home)
    r = _submit(
        c, tokens["alpha"], "tric-binary", data, phase="test", **_fact_form({"approach": "x"})
    )
    assert r.status_code == 422, r.json
    msg = r.json["error"]["message"]
    assert "facts.affiliation: required" in msg and "facts.approach" in msg
    assert _subs(app) == []  # nothing stored, no half submission
    # the dev phase does not ask for the approach
    r = _submit(
        c,
        tokens["alpha"],
        "tric-binary",
        _dev_file(home),
        phase="dev",
        **_fact_form({"affiliation": "U"}),
    )
    assert r.status_code == 201, r.json
    r = _submit(c, tokens["alpha"], "tric-binary", data, phase="test", **_fact_form(GOOD))
    assert r.status_code == 201, r.json
    subs = _subs(app)
    assert subs[0].facts == {"affiliation": "U"}
    assert subs[1].facts == {
        "affiliation": "Uni X",
        "approach": "hybrid",
        "external_data": True,
        "paper": "https://example.org/p",
    }
    spec = c.get("/api/v1/openapi.json").json
    form = spec["components"]["schemas"]["UploadForm"]
    assert "facts" not in form["properties"] and form["patternProperties"]


def test_web_form_shows_the_sheet_keeps_answers_and_marks_each_problem(api_env):
    app, tokens, home = api_env
    _declare(app)
    b = Browser(app.test_client())
    b.login("alpha@example.org", "correct horse")
    page = b.get("/tasks/tric-binary/submit?phase=test").get_data(as_text=True)
    for bit in (
        'name="fact.affiliation"',
        '<select name="fact.approach"',
        '<option value="hybrid"',
        '<textarea name="fact.summary"',
        'type="url" name="fact.paper"',
        "where it is described",
        "(required in the test phase)",
    ):
        assert bit in page, bit
    form = {
        "phase": "test",
        "method_name": "m",
        **_fact_form({"affiliation": "Uni Kept", "external_data": "perhaps"}),
    }
    r = b.post(
        "/tasks/tric-binary/submit",
        {**form, "file": (io.BytesIO(_tric_file(home)), "p.jsonl")},
        content_type="multipart/form-data",
    )
    assert r.status_code == 422
    page = r.get_data(as_text=True)
    assert 'value="Uni Kept"' in page  # kept after the refusal
    errors = re.findall(r'<span class="field-error" role="alert">([^<]*)</span>', page)
    assert any("required" in e for e in errors) and any("yes or no" in e for e in errors)
    assert _subs(app) == []
    r = b.post(
        "/tasks/tric-binary/submit",
        {
            **form,
            **_fact_form(GOOD),
            "file": (io.BytesIO(_tric_file(home)), "p.jsonl"),
        },
        content_type="multipart/form-data",
    )
    assert r.status_code == 302, r.get_data(as_text=True)[:2000]
    assert _subs(app)[0].facts["approach"] == "hybrid"


def test_cli_sends_the_sheet_from_a_file_and_flags(served, tmp_path):
    url, tokens, home, app = served
    _declare(app)
    pred = tmp_path / "p.jsonl"
    pred.write_bytes(_tric_file(home))
    r = _cli(url, tokens["alpha"], "submit", "tric-binary", str(pred), "--phase", "test", ok=False)
    assert r.exit_code == 1 and "facts.affiliation: required" in r.stderr
    assert "facts.approach: required" in r.stderr and _subs(app) == []
    sheet = tmp_path / "facts.json"
    sheet.write_text(
        json.dumps({"affiliation": "From File", "approach": "rules", "external_data": False})
    )
    r = _cli(
        url,
        tokens["alpha"],
        "submit",
        "tric-binary",
        str(pred),
        "--phase",
        "test",
        "--facts",
        str(sheet),
        "--fact",
        "approach=neural",
        "--json",
    )
    sub = _one_json(r)
    with Session(_engine(app)) as s:
        assert s.get(Submission, sub["id"]).facts == {
            "affiliation": "From File",
            "approach": "neural",  # --fact over --facts
            "external_data": False,
        }
    r = _cli(
        url,
        tokens["alpha"],
        "submit",
        "tric-binary",
        str(pred),
        "--fact",
        "nokey",
        "--json",
        ok=False,
    )
    assert r.exit_code == 1 and "KEY=VALUE" in _one_json(r)["error"]["message"]


# ----------------------------------------------------------------------------- export


def _publish(c, tokens):
    r = c.post(
        "/api/v1/tasks/tric-binary/phases/test/publish",
        headers=_h(tokens["org"]),
        json={"close": True},
    )
    assert r.status_code == 201, r.json


def test_the_published_rankings_fact_sheets_go_to_its_organizers(served, tmp_path):
    url, tokens, home, app = served
    _declare(app)
    c = app.test_client()
    ids = {}
    for team, flip, aff in (("alpha", 5, "=cmd()"), ("beta", 3, "Uni B")):
        r = _submit(
            c,
            tokens[team],
            "tric-binary",
            _tric_file(home, flip),
            phase="test",
            method_name=f"{team}-m",
            **_fact_form({**GOOD, "affiliation": aff}),
        )
        ids[team] = r.json["id"]
        _run_job(r.json["id"])
    q = "/api/v1/tasks/tric-binary/phases/test/export?facts=true&format=csv"
    r = c.get(q, headers=_h(tokens["org"]))
    assert r.status_code == 409 and r.json["error"]["code"] == "not_published"
    _publish(c, tokens)
    with Session(_engine(app)) as s:
        before = s.exec(select(RankingVersion)).one().body_json
    r = c.get(q, headers=_h(tokens["beta"]))
    assert r.status_code == 403
    r = c.get(q, headers=_h(tokens["org"]))
    assert r.status_code == 200 and r.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(r.get_data(as_text=True))))
    by_team = {row["team"]: row for row in rows}
    assert set(by_team) == {"alpha", "beta"}
    assert by_team["beta"]["submission_id"] == str(ids["beta"])
    assert by_team["beta"]["method_name"] == "beta-m"
    assert by_team["beta"]["affiliation"] == "Uni B" and by_team["beta"]["external_data"] == "yes"
    assert by_team["alpha"]["affiliation"] == "'=cmd()"  # no formula in a spreadsheet
    assert list(rows[0])[-5:] == ["affiliation", "approach", "external_data", "paper", "summary"]
    # current values from the database; the snapshot stays byte for byte
    with Session(_engine(app)) as s:
        sub = s.get(Submission, ids["beta"])
        sub.facts = {**sub.facts, "affiliation": "Uni B (renamed)"}
        s.add(sub)
        s.commit()
    out = tmp_path / "facts.json"
    _cli(
        url,
        tokens["org"],
        "organizer",
        "export",
        "tric-binary",
        "test",
        "--facts",
        "--format",
        "json",
        "-o",
        str(out),
    )
    doc = json.loads(out.read_text())
    assert doc["version"] == 1 and [f["key"] for f in doc["fields"]][0] == "affiliation"
    got = {r["team"]: r for r in doc["rows"]}
    assert got["beta"]["facts"]["affiliation"] == "Uni B (renamed)"
    assert got["beta"]["facts"]["external_data"] is True
    with Session(_engine(app)) as s:
        assert s.exec(select(RankingVersion)).one().body_json == before
    assert "affiliation" not in before
    r = c.get(q.replace("csv", "tex"), headers=_h(tokens["org"]))
    assert r.status_code == 422 and "csv or json" in r.json["error"]["message"]
    # the organizer's web page too
    b = Browser(app.test_client())
    b.login("org@example.org", "correct horse")
    with Session(_engine(app)) as s:
        pid = s.exec(
            select(Phase.id).where(Phase.task_id == "tric-binary", Phase.name == "test")
        ).one()
    r = b.get(f"/organizer/phases/{pid}/export.csv?facts=1")
    assert r.status_code == 200 and "Uni B (renamed)" in r.get_data(as_text=True)
    # a refused LaTeX export with fact sheets: the API's refusal, in the site's layout, a way back
    r = b.get(f"/organizer/phases/{pid}/export.tex?facts=1")
    page = r.get_data(as_text=True)
    assert r.status_code == 422 and r.mimetype == "text/html", r.status_code
    assert "csv or json" in page and f'href="/organizer/phases/{pid}/ranking"' in page


# ----------------------------------------------------------------------------- anonymous boards


def _board(c, who=None, fmt="json"):
    if who is None:
        ext = "" if fmt == "html" else f".{fmt}"
        r = c.get(f"/tasks/tric-binary/leaderboard{ext}?phase=test")
    else:
        r = c.get("/api/v1/tasks/tric-binary/leaderboard?phase=test", headers=_h(who))
    assert r.status_code == 200, r.get_data(as_text=True)[:500]
    return r


def _teams(board: dict) -> dict[str, str]:
    return {r["team"]: r.get("method_name", "") for r in board["rows"] if r["row_type"] == "team"}


def test_anonymous_board_hides_names_until_publication(api_env):
    app, tokens, home = api_env
    c = app.test_client()
    for team, flip in (("alpha", 5), ("beta", 3)):
        r = _submit(
            c,
            tokens[team],
            "tric-binary",
            _tric_file(home, flip),
            phase="test",
            method_name=f"{team}-secret-method",
            url=f"https://{team}.example.org/code",
        )
        _run_job(r.json["id"])
    assert set(_teams(_board(c).json)) == {"alpha", "beta"}  # cached, named
    _declare(app, anonymous=True, fields=[])  # the change makes every cached board stale
    public = _board(c).json
    assert _teams(public) == {"Team 1": "", "Team 2": ""}  # numbered by first run: alpha first
    for body in (
        _board(c, fmt="csv").get_data(as_text=True),
        _board(c, fmt="html").get_data(as_text=True),
        json.dumps(public),
    ):
        for secret in ("alpha", "beta", "secret-method", ".example.org/code"):
            assert secret not in body, secret
    # the team sees its own name and method, no one else's; the organizer sees every one
    assert _teams(_board(c, tokens["alpha"]).json) == {
        "alpha": "alpha-secret-method",
        "Team 2": "",
    }
    assert _teams(_board(c, tokens["beta"]).json) == {"Team 1": "", "beta": "beta-secret-method"}
    assert _teams(_board(c, tokens["org"]).json) == {
        "alpha": "alpha-secret-method",
        "beta": "beta-secret-method",
    }
    # nor does a plot of the board
    svg = c.get("/tasks/tric-binary/leaderboard/plot.svg?phase=test&kind=time")
    assert svg.status_code == 200 and b"alpha" not in svg.data and b"beta" not in svg.data
    # publication shows the names as published
    _publish(c, tokens)
    with Session(_engine(app)) as s:
        snap = json.loads(s.exec(select(RankingVersion)).one().body_json)
    assert _teams(snap) == {"alpha": "alpha-secret-method", "beta": "beta-secret-method"}
    assert _teams(_board(c).json) == _teams(snap)


def test_turning_anonymity_off_invalidates_the_cached_board(api_env):
    app, tokens, home = api_env
    c = app.test_client()
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test", method_name="am")
    _run_job(r.json["id"])
    _declare(app, anonymous=True, fields=[])
    assert _teams(_board(c).json) == {"Team 1": ""}
    _declare(app, anonymous=False, fields=[])
    assert _teams(_board(c).json) == {"alpha": "am"}


# ----------------------------------------------------------------------------- no email


def test_a_published_snapshot_holds_no_email(api_env):
    app, tokens, home = api_env
    c = app.test_client()
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test")
    _run_job(r.json["id"])
    _publish(c, tokens)
    with Session(_engine(app)) as s:
        rv = s.exec(select(RankingVersion)).one()
        bodies = [rv.body_json, rv.body_csv, rv.body_latex]
    assert json.loads(rv.body_json)["ranking"]["published_by"] == "organizer"
    bodies += [_board(c, fmt=f).get_data(as_text=True) for f in ("json", "csv", "html")] + [
        _board(c, tokens["beta"]).get_data(as_text=True)
    ]
    for body in bodies:
        assert "@example.org" not in body and not re.search(r"[\w.+-]+@[\w-]+\.\w", body)


def test_the_submissions_answer_carries_its_fact_sheet(api_env):
    """The team (and its organizers) read back the answers a run carries; others see nothing."""
    app, tokens, home = api_env
    _declare(app)
    c = app.test_client()
    r = _submit(
        c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test", **_fact_form(GOOD)
    )
    assert r.status_code == 201, r.json
    assert r.json["facts"]["approach"] == "hybrid"
    got = c.get(f"/api/v1/submissions/{r.json['id']}", headers=_h(tokens["alpha"])).json
    assert got["facts"]["affiliation"] == "Uni X" and got["facts"]["external_data"] is True
    assert c.get(f"/api/v1/submissions/{r.json['id']}", headers=_h(tokens["beta"])).status_code == (
        404
    )
