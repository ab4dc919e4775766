"""Teams per competition, over the CLI and the API of a served app: a person is in different teams
in different competitions, a team of one competition is not joined from another, a competition's
size cap and captain's approval hold, and a run counts for the team of its task's competition."""

from __future__ import annotations

from apikit import _cli, _h, _one_json, _submit, _tric_file


def _team(app, token, competition=None):
    q = f"?competition={competition}" if competition else ""
    return app.test_client().get(f"/api/v1/team{q}", headers=_h(token))


def test_one_person_two_teams_in_two_competitions(served):  # noqa: F811
    url, tokens, home, app = served
    loner = tokens["loner"]
    owls = _one_json(
        _cli(url, loner, "teams", "create", "Owls", "--competition", "tric-binary", "--json")
    )
    assert owls["competition"] == "tric-binary"
    assert owls["members"] == [
        {
            "id": owls["members"][0]["id"],
            "email": "loner@example.org",
            "role": "captain",
            "status": "active",
        }
    ]
    larks = app.test_client().post(
        "/api/v1/team", json={"name": "Larks", "competition": "loci-similes"}, headers=_h(loner)
    )
    assert larks.status_code == 201, larks.json
    assert _team(app, loner, "tric-binary").json["name"] == "Owls"
    assert _team(app, loner, "loci-similes").json["name"] == "Larks"
    # no account-wide team: outside those two competitions they are in none
    assert _team(app, loner).status_code == 404
    shown = _cli(url, loner, "teams", "show", "--competition", "loci-similes").stdout
    assert "team Larks in loci-similes" in shown and "(captain)" in shown
    # a second team in the same competition is refused, naming it
    r = _cli(url, loner, "teams", "create", "Again", "--competition", "tric-binary", ok=False)
    assert r.exit_code == 1 and "in a team in tric-binary already" in r.stderr

    # the run counts for the team of the task's competition
    r = _submit(app.test_client(), loner, "tric-binary", _tric_file(home), phase="test")
    assert r.status_code == 201, r.json
    assert r.json["team"] == "Owls"

    # a team of one competition is not joined from another (nor account-wide)
    c = app.test_client()
    r = c.post(
        "/api/v1/team/join",
        json={"invite_code": owls["invite_code"], "competition": "loci-similes"},
        headers=_h(tokens["alpha"]),
    )
    assert r.status_code == 404 and r.json["error"]["code"] == "bad_invite_code"
    r = c.post(
        "/api/v1/team/join", json={"invite_code": owls["invite_code"]}, headers=_h(tokens["org"])
    )
    assert r.status_code == 404 and r.json["error"]["code"] == "bad_invite_code"


def test_size_cap_and_the_captains_approval(served):  # noqa: F811
    url, tokens, home, app = served
    c = app.test_client()
    r = c.patch(
        "/api/v1/competitions/tric-binary",
        json={"team_size_cap": 2, "join_needs_captain": True},
        headers=_h(tokens["org"]),
    )
    assert r.status_code == 200, r.json
    assert r.json["settings"]["team_size_cap"] == 2 and r.json["settings"]["join_needs_captain"]
    owls = _one_json(
        _cli(
            url,
            tokens["loner"],
            "teams",
            "create",
            "Owls",
            "--competition",
            "tric-binary",
            "--json",
        )
    )
    joined = _one_json(
        _cli(
            url,
            tokens["alpha"],
            "teams",
            "join",
            owls["invite_code"],
            "--competition",
            "tric-binary",
            "--json",
        )
    )
    alpha = next(m for m in joined["members"] if m["email"] == "alpha@example.org")
    assert alpha["status"] == "pending"
    # waiting: alpha acts for no team in tric-binary (not for their account-wide team either)
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home), phase="test")
    assert r.status_code == 403 and r.json["error"]["code"] == "no_team"
    # only the captain approves
    r = _cli(
        url,
        tokens["alpha"],
        "teams",
        "approve",
        str(alpha["id"]),
        "--competition",
        "tric-binary",
        ok=False,
    )
    assert r.exit_code == 1 and "captain" in r.stderr
    r = _cli(
        url, tokens["loner"], "teams", "approve", str(alpha["id"]), "--competition", "tric-binary"
    )
    assert r.stdout.strip() == f"approved user {alpha['id']}"
    assert _team(app, tokens["alpha"], "tric-binary").json["name"] == "Owls"
    r = _submit(c, tokens["alpha"], "tric-binary", _tric_file(home, 3), phase="test")
    assert r.status_code == 201 and r.json["team"] == "Owls"
    # the cap: a third member is refused, naming the cap
    r = c.post(
        "/api/v1/team/join",
        json={"invite_code": owls["invite_code"], "competition": "tric-binary"},
        headers=_h(tokens["beta"]),
    )
    assert r.status_code == 409 and r.json["error"]["code"] == "team_full"
    assert "2 members" in r.json["error"]["message"]
    # alpha's account-wide team still acts for them in the other competition
    assert _team(app, tokens["alpha"], "loci-similes").json["name"] == "alpha"
