"""Texts that become mail headers or single-line names (competition, page and announcement
titles, team and method names) refuse line breaks and control characters with a 422 naming the
field; a subject that holds one anyway (stored before) is sent as one line, never failing for
good; a form part without a name is a 400, not a 500."""

from __future__ import annotations

import io

import pytest
from apikit import _h, _submit, _tric_file

from server.domain.bounds import one_line, one_line_problem

BREAKS = ["\n", "\r", "\u2028", "\u2029", "\x85", "\x0b", "\t", "\x9f"]


def test_one_line_rule():
    for ch in BREAKS:
        assert one_line_problem(f"a{ch}b"), repr(ch)
        assert one_line(f"a{ch}{ch} b") == "a b"
    assert one_line_problem("Reuse of Vergil — 2027 (Ælfric)") is None


@pytest.mark.parametrize("ch", ["\n", "\r", "\u2028", "\x85"])
def test_titles_and_names_refuse_line_breaks_with_a_422_naming_the_field(api_env, ch):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    org = _h(tokens["org"])
    r = c.post("/api/v1/competitions", headers=org, json={"id": "lb", "title": f"A{ch}B"})
    assert r.status_code == 422 and r.json["error"]["message"].startswith("title"), r.json
    r = c.post("/api/v1/competitions", headers=org, json={"id": "lb", "title": "Line"})
    assert r.status_code == 201, r.json
    r = c.patch("/api/v1/competitions/lb", headers=org, json={"title": f"X{ch}Bcc: y@z"})
    assert r.status_code == 422 and "title" in r.json["error"]["message"]
    r = c.put(
        "/api/v1/competitions/lb/pages/overview",
        headers=org,
        json={"title": f"O{ch}v", "body_markdown": "x"},
    )
    assert r.status_code == 422 and "title" in r.json["error"]["message"]
    r = c.post(
        "/api/v1/competitions/lb/announcements",
        headers=org,
        json={"title": f"News{ch}Bcc: all@x.org", "body_markdown": "x"},
    )
    assert r.status_code == 422 and "title" in r.json["error"]["message"]
    r = c.post("/api/v1/team", headers=_h(tokens["loner"]), json={"name": f"Night{ch}Owls"})
    assert r.status_code == 422 and "name" in r.json["error"]["message"], r.json
    r = _submit(
        c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test", method_name=f"m{ch}1"
    )
    assert r.status_code == 422 and "method_name" in r.json["error"]["message"], r.json
    assert c.get("/api/v1/competitions/lb", headers=org).json["title"] == "Line"


def test_the_action_refuses_too(api_env):  # noqa: F811
    """The rule lives in the actions: the web forms and the CLI meet it as the API does."""
    from sqlmodel import Session, select

    from server.actions import competitions as comp
    from server.domain import teams
    from server.exceptions import TeamRefused, UploadFieldsInvalid
    from server.models import User

    app, tokens, home = api_env
    with Session(app.extensions["palimpsest.engine"]) as s:
        admin = s.exec(select(User).where(User.email == "org@example.org")).one()
        with pytest.raises(UploadFieldsInvalid) as e:
            comp.create_competition(
                s=s, actor=admin, via="web", competition="x", title="A\u2028B", state="draft"
            )
        assert "title" in e.value.fields
        loner = s.exec(select(User).where(User.email == "loner@example.org")).one()
        with pytest.raises(TeamRefused) as e:
            teams.create_team(s, loner, "A\x85B")
        assert e.value.status == 422 and "name" in str(e.value)


def test_a_subject_with_a_line_break_is_sent_as_one_line():
    from server.jobs.mail import message
    from server.settings import Settings

    msg = message(Settings(mail_from="org@x.org"), "a@x.org", "[A\nB] C\r\nBcc: e@x.org", "body")
    assert msg["Subject"] == "[A B] C Bcc: e@x.org"
    assert "\nBcc" not in msg.as_string().split("\n\n", 1)[0].replace("\nSubject", "")
    assert msg["Bcc"] is None


def test_a_form_part_without_a_name_is_a_400(api_env):  # noqa: F811
    app, tokens, home = api_env
    c = app.test_client()
    body = (
        b"--XX\r\nContent-Disposition: form-data; name=\r\n\r\nvalue\r\n"
        b'--XX\r\nContent-Disposition: form-data; name=""\r\n\r\nv\r\n--XX--\r\n'
    )
    for path in ("/api/v1/team", "/auth/login", "/api/v1/tasks/tric-binary/submissions"):
        for headers in ({}, _h(tokens["alpha"])):
            r = c.post(
                path,
                data=io.BytesIO(body),
                headers=headers,
                content_type="multipart/form-data; boundary=XX",
            )
            assert r.status_code == 400, (path, r.status_code, r.get_data(as_text=True)[:200])
