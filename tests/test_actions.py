"""The action layer (server/actions): each organizer action is written once and every surface
calls it. Checked two ways: the surfaces' code calls no state-changing lifecycle function itself
(an AST walk that fails if one does), and the same action run from the web, the API and the
local CLI leaves the same state and the same audit record."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from backbone import burst, get, make_team, submit
from click.testing import CliRunner
from conftest import _make_backend
from sqlalchemy import select

from server.exceptions import Forbidden, NotFound
from server.models import AuditLog

REPO = Path(__file__).resolve().parent.parent
SERVICES = pytest.param("services", marks=[pytest.mark.postgres, pytest.mark.redis])

# The lifecycle's state-changing functions that organizer actions wrap.
WRAPPED = {"close", "set_frozen", "set_board_open", "publish", "rescore", "set_visibility"}
SURFACES = [
    "server/web/organizer.py",
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "server/api").glob("*.py")),
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "server/cli").glob("*.py")),
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "cli/organizer").glob("*.py")),
]


@pytest.mark.parametrize("path", SURFACES)
def test_no_surface_calls_the_lifecycle_itself(path):
    """A surface that called lifecycle.publish (say) itself would be a second implementation."""
    tree = ast.parse((REPO / path).read_text())
    offenders = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if (
                isinstance(owner, ast.Name)
                and owner.id in ("lifecycle", "publication")
                and node.func.attr in WRAPPED
            ):
                offenders.append(f"{path}:{node.lineno} lifecycle.{node.func.attr}")
        if isinstance(node, ast.ImportFrom) and node.module in (
            "server.domain.lifecycle",
            "server.domain.publication",
        ):
            offenders += [
                f"{path}:{node.lineno} imports {a.name}" for a in node.names if a.name in WRAPPED
            ]
    assert not offenders, offenders


@pytest.fixture(params=["embedded", SERVICES])
def b(request, tmp_path, demo_home, monkeypatch):
    return _make_backend(request.param, request, tmp_path, demo_home, monkeypatch)


def _audits(b, action):
    with b.session() as s:
        return [
            (a.target, (a.details or {}).get("via"))
            for a in s.execute(select(AuditLog).where(AuditLog.action == action)).scalars()
        ]


def test_actions_refuse_a_participant_and_name_what_is_missing(b):
    from server.actions.phases import PHASE_ACTIONS
    from server.actions.submissions import set_visibility

    _, user = make_team(b)
    with b.session() as s:
        with pytest.raises(Forbidden):
            PHASE_ACTIONS["close"](s=s, task_id="tric-binary", phase="dev", actor=user, via="web")
        with pytest.raises(NotFound, match="has no phase 'nope'"):
            PHASE_ACTIONS["close"](s=s, task_id="tric-binary", phase="nope", actor=None, via="web")
        with pytest.raises(NotFound, match="no submission 999999"):
            set_visibility(s=s, submission_id=999999, action="hide", actor=None, reason="x")


def test_hide_and_rescore_from_the_local_cli_are_the_same_actions(b):
    from cli.main import main

    team, user = make_team(b)
    sid = submit(b, team, user, "tric-binary", "dev").id
    burst(b)
    assert get(b, sid).status == "scored"
    runner = CliRunner()
    env = {"PALIMPSEST_DEBUG": ""}
    r = runner.invoke(main, ["runs", "hide", str(sid), "--json"], env=env)
    assert r.exit_code != 0 and "reason" in r.output  # hide needs a reason the team is shown
    r = runner.invoke(main, ["runs", "hide", str(sid), "--reason", "a leak", "--json"], env=env)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"id": sid, "hidden": True, "removed": False, "reason": "a leak"}
    assert get(b, sid).hidden
    r = runner.invoke(main, ["runs", "rescore", str(sid), "--json"], env=env)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == {"queued": [sid], "skipped": 0}
    assert get(b, sid).status == "queued"
    burst(b)
    assert get(b, sid).status == "scored"
    r = runner.invoke(main, ["runs", "rescore", "999999"], env=env)
    assert r.exit_code != 0 and "no submission 999999" in r.output
    assert any(t == f"submission:{sid}" for t, _ in _audits(b, "submission.hide"))


def test_close_from_the_api_and_the_local_cli_audits_alike(b):
    from sqlmodel import Session

    from cli.main import main
    from server import create_app
    from server.domain.accounts import create_token

    app = create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})
    _, org = make_team(b, organizer=True)
    with Session(b.engine) as s:
        _, token = create_token(s, user=s.get(type(org), org.id))
        s.commit()
    r = app.test_client().post(
        "/api/v1/tasks/tric-binary/phases/dev/close",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert r.status_code == 200, r.json
    assert r.json["phase"]["state"][0] == "closed" and "ranking" not in r.json
    r = CliRunner().invoke(main, ["phases", "close", "tric-binary", "test", "--json"], env={})
    assert r.exit_code == 0, r.output
    vias = sorted(v for _, v in _audits(b, "phase.close"))
    assert vias == ["api", "cli"]


def test_a_phase_action_answers_the_same_model_from_the_api_and_the_local_cli(b):
    """The local command prints the action's declared model as the API answers it: a freeze
    from the CLI, undone, then done again over the API gives the same document, field for field;
    `phases set --json` likewise prints the phase as the API's edit answers it."""
    from sqlmodel import Session

    from cli.main import main
    from server import create_app
    from server.domain.accounts import create_token

    app = create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})
    _, org = make_team(b, organizer=True)
    with Session(b.engine) as s:
        _, token = create_token(s, user=s.get(type(org), org.id))
        s.commit()
    api = app.test_client()
    auth = {"Authorization": f"Bearer {token}"}
    r = CliRunner().invoke(main, ["phases", "freeze", "tric-binary", "test", "--json"], env={})
    assert r.exit_code == 0, r.output
    from_cli = json.loads(r.output)
    assert "frozen" in from_cli["phase"]["state"] and from_cli["phase"]["frozen"] is True
    assert (
        api.post("/api/v1/tasks/tric-binary/phases/test/unfreeze", headers=auth).status_code == 200
    )
    r = api.post("/api/v1/tasks/tric-binary/phases/test/freeze", headers=auth)
    assert r.status_code == 200, r.json
    assert from_cli == r.json
    r = CliRunner().invoke(
        main, ["phases", "set", "tric-binary", "test", "--daily-limit", "7", "--json"], env={}
    )
    assert r.exit_code == 0, r.output
    from_cli = json.loads(r.output)
    assert from_cli["limits"]["daily"] == 7
    r = api.patch("/api/v1/tasks/tric-binary/phases/test", json={"daily_limit": 7}, headers=auth)
    assert r.status_code == 200, r.json
    assert from_cli == r.json
