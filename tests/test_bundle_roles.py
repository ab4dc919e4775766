"""A bundle's `roles` on the server: on create, each address a pending invitation (this server
sends no mail, so an account with the address gets nothing until the link it is handed is
accepted), the creator staying owner; an export writes the competition's roles back into the
bundle; a clone carries none."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest
import yaml
from sqlmodel import Session, select
from webkit import engine_of, make_user

from server.actions import roles
from server.models import Competition, CompetitionInvite, CompetitionRole, User
from tests.conftest import REPO

EXAMPLE = REPO / "examples" / "bundle-sts-latin"


@pytest.fixture
def web_home(tmp_path, home) -> Path:
    """A data directory of its own: the bundle installs its task here, never among the session's
    imported tasks (which other tests' data directories link to)."""
    d = tmp_path / "data"
    (d / "tasks").mkdir(parents=True)
    return d


@pytest.fixture(autouse=True)
def _forget():
    yield
    from tasks import unregister_declared

    unregister_declared("sts-latin")


def _with_roles(tmp_path: Path, roles: list[dict]) -> Path:
    root = tmp_path / "b"
    shutil.copytree(EXAMPLE, root)
    y = root / "competition.yaml"
    spec = yaml.safe_load(y.read_text(encoding="utf-8"))
    spec["roles"] = roles
    y.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return root


def test_roles_are_invited_on_create_and_written_on_export(app, tmp_path):
    from server.actions.bundles import create_from_bundle, export_competition

    settings = app.extensions["palimpsest.settings"]
    assert not settings.mail_configured()
    admin = make_user(app, "admin@x.org", organizer=True)
    org = make_user(app, "org@x.org")
    root = _with_roles(
        tmp_path,
        [
            {"email": "admin@x.org", "role": "owner"},  # the creator: owner already
            {"email": "Org@x.org", "role": "organizer"},  # an account: invited all the same
            {"email": "new@x.org", "role": "assessor"},  # no account: invited
        ],
    )
    with Session(engine_of(app), expire_on_commit=False) as s:
        actor = s.get(User, admin.id)
        create_from_bundle(s=s, actor=actor, source=root, via="test", settings=settings)
        c = s.exec(select(Competition).where(Competition.slug == "sts-latin-2027")).one()
        got = {
            u.email: r.role
            for r, u in s.exec(
                select(CompetitionRole, User).where(
                    CompetitionRole.competition_id == c.id, CompetitionRole.user_id == User.id
                )
            )
        }
        # no mail: an account's address is not proved, so its holder gets no role at once
        assert got == {"admin@x.org": "owner"}
        pending = s.exec(
            select(CompetitionInvite)
            .where(
                CompetitionInvite.competition_id == c.id, CompetitionInvite.accepted_at.is_(None)
            )
            .order_by(CompetitionInvite.id)
        ).all()
        assert [(i.email, i.role) for i in pending] == [
            ("org@x.org", "organizer"),
            ("new@x.org", "assessor"),
        ]
        # the link the owner hands over grants it
        roles.accept(
            s=s,
            user=s.get(User, org.id),
            token=roles.invite_token(settings.secret_key, pending[0].id),
            settings=settings,
        )
        out = tmp_path / "export.zip"
        export_competition(
            s=s, actor=actor, competition=c.slug, out=out, include_gold=False, settings=settings
        )
        clone = tmp_path / "clone.zip"
        export_competition(
            s=s,
            actor=actor,
            competition=c.slug,
            out=clone,
            include_gold=False,
            settings=settings,
            new_id="sts-latin-2028",
        )
    with zipfile.ZipFile(out) as z:
        spec = yaml.safe_load(z.read("competition.yaml"))
    assert spec["roles"] == [
        {"email": "admin@x.org", "role": "owner"},
        {"email": "org@x.org", "role": "organizer"},
    ]
    with zipfile.ZipFile(clone) as z:
        assert not yaml.safe_load(z.read("competition.yaml")).get("roles")
