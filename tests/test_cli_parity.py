"""The CLI's team, primary-run and organizer commands over real HTTP (the app served on a local
port in a thread): each with `--json` printing exactly one JSON document, each failure one line."""

from __future__ import annotations

from apikit import _cli, _one_json, _run_job, _tric_file


def test_teams_commands(served):
    url, tokens, home, app = served
    loner = tokens["loner"]
    r = _cli(url, loner, "teams", "show", ok=False)
    assert r.exit_code == 1 and r.stderr.strip().count("\n") == 0 and "no team" in r.stderr
    r = _cli(url, loner, "teams", "show", "--json", ok=False)
    assert r.exit_code == 1 and _one_json(r)["error"]["code"] == "no_team"
    team = _one_json(_cli(url, loner, "teams", "create", "Night Owls", "--json"))
    assert team["name"] == "Night Owls"
    assert "invite code: " + team["invite_code"] in _cli(url, loner, "teams", "show").stdout
    _cli(url, tokens["beta"], "teams", "leave")
    r = _cli(url, tokens["beta"], "teams", "join", "nope", ok=False)
    assert r.exit_code == 1 and r.stderr == "error: No team has that invite code.\n"
    joined = _one_json(_cli(url, tokens["beta"], "teams", "join", team["invite_code"], "--json"))
    assert {m["email"] for m in joined["members"]} == {"loner@example.org", "beta@example.org"}
    rotated = _one_json(_cli(url, loner, "teams", "rotate", "--json"))
    assert rotated["invite_code"] != team["invite_code"]
    assert (
        _one_json(_cli(url, tokens["beta"], "teams", "leave", "--json"))["left_team"] == team["id"]
    )


def test_submit_primary_and_primary_command(served, tmp_path):
    url, tokens, home, app = served
    a = tmp_path / "a.jsonl"
    a.write_bytes(_tric_file(home, 3))
    b = tmp_path / "b.jsonl"
    b.write_bytes(_tric_file(home, 4))
    first = _one_json(
        _cli(
            url,
            tokens["alpha"],
            "submit",
            "tric-binary",
            str(a),
            "--phase",
            "test",
            "--primary",
            "--json",
        )
    )
    assert first["is_primary"] is True
    second = _one_json(
        _cli(url, tokens["alpha"], "submit", "tric-binary", str(b), "--phase", "test", "--json")
    )
    assert second["is_primary"] is False
    out = _cli(url, tokens["alpha"], "primary", str(second["id"])).stdout
    assert f"submission {second['id']} is now your team's primary run of the test phase" in out
    listed = _one_json(_cli(url, tokens["alpha"], "submissions", "--json"))
    assert {x["id"]: x["is_primary"] for x in listed} == {first["id"]: False, second["id"]: True}
    r = _cli(url, tokens["beta"], "primary", str(first["id"]), "--json", ok=False)
    assert r.exit_code == 1 and _one_json(r)["error"]["status"] == 404


def test_organizer_commands(served, tmp_path):
    url, tokens, home, app = served
    org = tokens["org"]
    r = _cli(url, tokens["alpha"], "organizer", "phases", "list", "tric-binary", ok=False)
    # the one organizer check's words (server.actions.common.require_organizer), naming the
    # competition the task is in
    assert r.exit_code == 1 and r.stderr == "error: this needs an organizer of 'tric-binary'\n"
    made = _one_json(
        _cli(
            url,
            org,
            "organizer",
            "phases",
            "create",
            "tric-binary",
            "final",
            "--split",
            "test",
            "--daily-limit",
            "3",
            "--json",
        )
    )
    assert made["limits"]["daily"] == 3
    r = _cli(
        url,
        org,
        "organizer",
        "phases",
        "edit",
        "tric-binary",
        "final",
        "--closes",
        "nextTfriday",
        ok=False,
    )
    assert r.exit_code == 1 and "closes_at" in r.stderr and r.stderr.count("\n") == 1
    edited = _one_json(
        _cli(
            url,
            org,
            "organizer",
            "phases",
            "edit",
            "tric-binary",
            "final",
            "--total-limit",
            "none",
            "--json",
        )
    )
    assert edited["limits"]["total"] is None
    assert "final" in _cli(url, org, "organizer", "phases", "list", "tric-binary").stdout

    pred = tmp_path / "p.jsonl"
    pred.write_bytes(_tric_file(home))
    sub = _one_json(
        _cli(url, tokens["alpha"], "submit", "tric-binary", str(pred), "--phase", "final", "--json")
    )
    _run_job(sub["id"])
    assert _one_json(_cli(url, org, "organizer", "rescore", str(sub["id"]), "--json"))[
        "queued"
    ] == [sub["id"]]
    _run_job(sub["id"])
    assert _one_json(
        _cli(
            url,
            org,
            "organizer",
            "rescore-all",
            "tric-binary",
            "--phase",
            "final",
            "--yes",
            "--json",
        )
    )["queued"] == [sub["id"]]
    _run_job(sub["id"])
    r = _cli(url, org, "organizer", "hide", str(sub["id"]), ok=False)
    assert r.exit_code == 2  # --reason is required: click says so
    assert _one_json(
        _cli(url, org, "organizer", "hide", str(sub["id"]), "--reason", "dup", "--json")
    )["hidden"]
    _cli(url, org, "organizer", "unhide", str(sub["id"]))
    rows = _one_json(_cli(url, org, "organizer", "submissions", "--task", "tric-binary", "--json"))
    assert rows[0]["id"] == sub["id"] and rows[0]["team"] == "alpha"

    r = _cli(url, org, "organizer", "publish", "tric-binary", "final", "--yes", ok=False)
    assert r.exit_code == 1 and "only a closed phase can be published" in r.stderr
    _cli(url, org, "organizer", "close", "tric-binary", "final")
    pub = _one_json(
        _cli(url, org, "organizer", "publish", "tric-binary", "final", "--yes", "--json")
    )
    assert pub["ranking"]["version"] == 1
    versions = _one_json(_cli(url, org, "organizer", "rankings", "tric-binary", "final", "--json"))
    assert [v["version"] for v in versions] == [1]
    snap = _cli(
        url, org, "organizer", "rankings", "tric-binary", "final", "--version", "1", "--json"
    ).stdout
    out = tmp_path / "ranking.json"
    _cli(
        url, org, "organizer", "export", "tric-binary", "final", "--format", "json", "-o", str(out)
    )
    assert out.read_text() == snap.rstrip("\n")
    csv = _cli(url, org, "organizer", "export", "tric-binary", "final").stdout
    assert csv.startswith("rank,row_type,team")
    log = _one_json(_cli(url, org, "organizer", "audit", "--action", "ranking.publish", "--json"))
    assert len(log) == 1 and log[0]["actor"] == "org@example.org"
    r = _cli(
        url, org, "organizer", "baselines", "queue", "tric-binary", "nonesuch", "--json", ok=False
    )
    assert r.exit_code == 1 and _one_json(r)["error"]["code"] == "unknown_system"
    assert (
        _one_json(_cli(url, org, "organizer", "baselines", "list", "tric-binary", "--json")) == []
    )


def test_an_identical_resubmission_says_what_it_is(served, tmp_path):
    url, tokens, home, app = served
    f = tmp_path / "same.jsonl"
    f.write_bytes(_tric_file(home, 5))
    args = ("submit", "tric-binary", str(f), "--phase", "test")
    first = _one_json(_cli(url, tokens["alpha"], *args, "--method-name", "one", "--json"))
    _run_job(first["id"])
    # the phase is open: the earlier submission, named, and the dropped method name said
    r = _cli(url, tokens["alpha"], *args, "--method-name", "two")
    assert f"already submitted by your team: submission {first['id']} (tric-binary, test)" in (
        r.stdout
    )
    assert "scored; it was not submitted again" in r.stdout
    assert f"--method-name 'two' was not applied: submission {first['id']} keeps 'one'" in r.stdout
    again = _one_json(_cli(url, tokens["alpha"], *args, "--json"))
    assert again["id"] == first["id"] and again["duplicate"] is True
    assert again["phase_closed"] is False
    # the phase closed: the same file is refused with a non-zero exit, in words and in JSON
    _cli(url, tokens["org"], "organizer", "close", "tric-binary", "test")
    r = _cli(url, tokens["alpha"], *args, "--method-name", "three", ok=False)
    assert r.exit_code == 1
    assert "the test phase is closed: it accepts no submission" in r.stderr
    assert f"submission {first['id']}" in r.stderr and "'three' was not applied" in r.stderr
    r = _cli(url, tokens["alpha"], *args, "--json", ok=False)
    out = _one_json(r)
    assert r.exit_code == 1 and out["phase_closed"] is True and out["id"] == first["id"]


def test_leaderboard_opens_the_main_phase_not_the_cross_validated_one(served):
    from webkit import make_phase

    url, tokens, home, app = served
    make_phase(app, "tric-binary", "cv")  # a cross-validated phase beside dev and test
    out = _cli(url, tokens["alpha"], "leaderboard", "tric-binary").stdout
    assert out.startswith("tric-binary leaderboard (test phase"), out
    board = _one_json(_cli(url, tokens["alpha"], "leaderboard", "tric-binary", "--json"))
    assert board["phase"] == "test"
    cv = _one_json(
        _cli(url, tokens["alpha"], "leaderboard", "tric-binary", "--phase", "cv", "--json")
    )
    assert cv["phase"] == "cv"
