"""Competitions at the server's shell: list, create (or --update from an edited bundle), export,
clone."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from server.cli.common import (
    Refused,
    done_quickly,
    home_option,
    local_session,
    local_settings,
)

if TYPE_CHECKING:
    from server.exceptions import BundleRefused


def register(main: click.Group) -> None:
    """Add these commands to the `palimpsest` group."""

    @main.group("competitions")
    def competitions():
        """Competitions: their state, tasks and pages."""

    @competitions.command("list")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @home_option
    @done_quickly
    def competitions_list(as_json):
        """List every competition, drafts included (the server's shell sees what a site
        administrator sees), newest first."""
        from server.actions import competitions as comp_actions

        with local_session(local_settings()) as s:
            rows = comp_actions.list_competitions(s=s, viewer=None, operator=True)
        if as_json:
            click.echo(json.dumps([c.model_dump(mode="json") for c in rows]))
            return
        for c in rows:
            click.echo(f"{c.id:<24} {c.state:<8} {c.title}  [{', '.join(c.tasks) or 'no task'}]")

    @competitions.command("create")
    @click.argument("source", metavar="BUNDLE|ID")
    @click.option("--title", default=None, help="The title of an empty competition (ID).")
    @click.option(
        "--task", "tasks", multiple=True, metavar="TASK", help="A task it takes (repeatable)."
    )
    @click.option(
        "--state",
        type=click.Choice(["draft", "visible", "archived"]),
        default="draft",
        show_default=True,
    )
    @click.option("--owner", "owner_email", default=None, help="The account made its owner.")
    @click.option(
        "--update",
        is_flag=True,
        help="Apply an edited bundle to its existing competition: a task whose metrics, primary, "
        "files or gold changed gets a new version (its runs rescored), its texts change in place.",
    )
    @click.option("--reason", default="", help="With --update: why (kept with each new version).")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @home_option
    def competitions_create(source, title, tasks, state, owner_email, update, reason, as_json):
        """Create a competition from a bundle (a directory or a .zip holding competition.yaml),
        or an empty one (ID --title T), as the server's shell (a site administrator). A bundle is
        checked in full first: every problem is printed and nothing is created. With --update,
        an edited bundle of an existing competition changes its tasks (docs/bundles.md)."""
        if update:
            return _update_from_bundle(Path(source), reason, as_json)
        from sqlalchemy import select

        from server.actions import bundles as bundle_actions
        from server.actions import competitions as comp_actions
        from server.domain.emails import lookup_form
        from server.exceptions import (
            BundleRefused,
            LifecycleRefused,
            NotFound,
            StoreUnreachable,
            UploadFieldsInvalid,
        )
        from server.models import User

        settings = local_settings()
        bundle = Path(source).exists() and title is None
        with local_session(settings) as s:
            owner = None
            if owner_email:
                owner = s.execute(
                    select(User).where(User.email == lookup_form(owner_email))
                ).scalar_one_or_none()
                if owner is None:
                    raise Refused(f"no user with email {owner_email!r}")
            try:
                if bundle:
                    made = bundle_actions.create_from_bundle(
                        s=s, actor=None, source=Path(source), via="cli", settings=settings
                    )
                else:
                    if title is None:
                        raise Refused(
                            f"{source!r} is not a bundle (no such directory or file); an empty "
                            "competition needs --title"
                        )
                    made = comp_actions.create_competition(
                        s=s,
                        actor=None,
                        via="cli",
                        competition=source,
                        title=title,
                        state=state,
                        tasks=tasks,
                    )
                if owner is not None:
                    comp_actions.set_owner(s=s, competition=made.id, user=owner, via="cli")
            except BundleRefused as e:
                _bundle_problems(e, as_json)
            except (UploadFieldsInvalid, LifecycleRefused, NotFound, StoreUnreachable) as e:
                raise Refused(e.message) from None
        if as_json:
            click.echo(json.dumps(made.model_dump(mode="json")))
            return
        click.echo(f"created {made.id} ({made.state}): {', '.join(made.tasks) or 'no task'}")

    def _update_from_bundle(source: Path, reason: str, as_json: bool):
        from server.actions import tasks as task_actions

        settings = local_settings()
        with local_session(settings) as s:
            try:
                got = task_actions.update_from_bundle(
                    s=s,
                    actor=None,
                    source=source,
                    via="cli",
                    settings=settings,
                    reason=reason,
                )
            except task_actions.BundleRefused as e:
                _bundle_problems(e, as_json)
            except (task_actions.LifecycleRefused, task_actions.NotFound) as e:
                raise Refused(e.message) from None
        if as_json:
            click.echo(json.dumps(got.model_dump(mode="json")))
            return
        for t in got.tasks:
            click.echo(task_actions.tm.change_line(t.model_dump(mode="json")))
        for n in got.notes:
            click.echo(f"note: {n}")

    def _bundle_problems(e: BundleRefused, as_json: bool):
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "error": {
                            "code": "invalid_bundle",
                            "message": e.message,
                            "problems": e.problems,
                            "total": len(e.problems),
                        }
                    }
                )
            )
        else:
            click.echo(f"error: {e.message}", err=True)
            for p in e.problems:
                where = p["id"] + (f" (line {p['line']})" if p.get("line") else "")
                click.echo(f"  {where}: {p['message']}", err=True)
        sys.exit(1)

    @competitions.command("export")
    @click.argument("competition", metavar="ID")
    @click.option("-o", "--output", required=True, type=click.Path(dir_okay=False))
    @click.option(
        "--with-gold", is_flag=True, help="Include the hidden gold (a clone on another server)."
    )
    @home_option
    def competitions_export(competition, output, with_gold):
        """Write a competition as a bundle zip that re-creates it: pages, terms, settings, fact
        sheet, tasks, their files and phases (the hidden gold with --with-gold)."""
        from server.actions import bundles as bundle_actions
        from server.exceptions import NotFound

        settings = local_settings()
        with local_session(settings) as s:
            try:
                bundle_actions.export_competition(
                    s=s,
                    actor=None,
                    competition=competition,
                    out=Path(output),
                    include_gold=with_gold,
                    settings=settings,
                )
            except NotFound as e:
                raise Refused(e.message) from None
        click.echo(f"wrote {output}", err=True)

    @competitions.command("clone")
    @click.argument("competition", metavar="ID")
    @click.argument("new_id", metavar="NEW_ID")
    @click.option("--json", "as_json", is_flag=True, help="Print JSON.")
    @home_option
    def competitions_clone(competition, new_id, as_json):
        """A new draft competition NEW_ID made from ID (next year's edition): its pages, settings,
        tasks (their ids suffixed with NEW_ID), data and phases; no participant, run or role."""
        from server.actions import bundles as bundle_actions
        from server.exceptions import BundleRefused, NotFound

        settings = local_settings()
        with local_session(settings) as s:
            try:
                made = bundle_actions.clone_competition(
                    s=s,
                    actor=None,
                    competition=competition,
                    new_id=new_id,
                    via="cli",
                    settings=settings,
                )
            except BundleRefused as e:
                _bundle_problems(e, as_json)
            except NotFound as e:
                raise Refused(e.message) from None
        if as_json:
            click.echo(json.dumps(made.model_dump(mode="json")))
            return
        click.echo(f"created {made.id} ({made.state}): {', '.join(made.tasks)}")
