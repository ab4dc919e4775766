"""Competitions as data: create one from a bundle (a directory or a zip: `competition.yaml`, its
pages and its tasks' files), export one as a bundle, and clone one under a new id.

A bundle is checked in full before anything is made (`tasks.bundle.read_bundle` names every
problem of the bundle itself; this module adds what only the database knows: a competition id or a
task id that is taken). Then its tasks' files are installed and the competition, its pages,
settings and phases are written in one transaction; if that fails, the installed files are removed
again, so that a refused bundle leaves nothing behind. Nothing of a bundle is code: metrics come
from the scorer's registry by name.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError
from sqlmodel import Session, select

from server import api_models as m
from server import objectstore
from server.actions import common
from server.actions import competitions as comp_actions
from server.actions.common import action
from server.db import on_rollback
from server.domain import audit, lifecycle, people
from server.domain.sanitize import MarkdownTooDeep, check_markdown, render_markdown
from server.exceptions import BundleRefused, LifecycleRefused
from server.models import (
    Competition,
    CompetitionPage,
    CompetitionRole,
    CompetitionTask,
    GoldVersion,
    Phase,
    User,
)
from server.settings import get_settings
from tasks import bundle as bundles
from tasks import get_task
from tasks.declared import declaration_path
from tasks.errors import PalimpsestError, TaskNotFound
from tasks.store import TaskStore, tree_sha256


def bundle_problem(path: str, message: str, line: int | None = None) -> dict:
    return {"line": line, "id": path, "message": message}


def bundle_refusal(e: bundles.BundleInvalid) -> BundleRefused:
    return BundleRefused([bundle_problem(p.path, p.message, p.line) for p in e.problems])


def _taken(s: Session, spec) -> list[dict]:
    """What the database refuses of a valid bundle: a competition id or task ids in use."""
    problems = []
    if spec.id in comp_actions.RESERVED_IDS:
        problems.append(bundle_problem("id", f"{spec.id!r} is reserved"))
    if s.exec(select(Competition).where(Competition.slug == spec.id)).first() is not None:
        problems.append(bundle_problem("id", f"a competition {spec.id!r} exists already"))
    for i, t in enumerate(spec.tasks):
        try:
            get_task(t.id)
        except TaskNotFound:
            continue
        problems.append(bundle_problem(f"tasks[{i}].id", f"a task {t.id!r} exists already"))
    for i, f in enumerate(spec.fact_fields):
        try:
            m.FactField.model_validate(f if isinstance(f, dict) else f.model_dump())
        except ValidationError as e:
            for err in e.errors():
                where = ".".join(str(x) for x in err["loc"])
                problems.append(bundle_problem(f"fact_fields[{i}].{where}", err["msg"]))
    return problems


def _pages(bundle) -> list[tuple[str, str, str]]:
    """(slug, title, markdown) of the bundle's pages, each checked as a page saved on the site."""
    out, problems = [], []
    for i, (slug, (title, text)) in enumerate(bundle.pages.items()):
        if slug in comp_actions.RESERVED_PAGES:
            problems.append(bundle_problem(f"pages[{i}].slug", f"{slug!r} is reserved"))
            continue
        try:
            check_markdown(text)
        except MarkdownTooDeep as e:
            problems.append(bundle_problem(f"pages[{i}].file", str(e)))
            continue
        out.append((slug, title, text))
    if problems:
        raise BundleRefused(problems)
    return out


def _when(v) -> datetime | None:
    if v is None:
        return None
    if isinstance(v, str):
        v = datetime.fromisoformat(v.replace("Z", "+00:00"))
    if v.tzinfo is not None:
        v = v.astimezone(timezone.utc).replace(tzinfo=None)
    return v


@action
def create_from_bundle(
    *, s: Session, actor: User | None, source: Path, via: str, settings
) -> m.CompetitionOut:
    """Create the competition a bundle declares (a site administrator, who becomes its owner):
    every problem is named at once and nothing is created unless all of it is."""
    comp_actions.require_admin(actor)
    home = Path(settings.home)
    with tempfile.TemporaryDirectory(prefix="palimpsest-bundle-") as work:
        try:
            b = bundles.read_bundle(Path(source), work_dir=Path(work), home=home)
        except bundles.BundleInvalid as e:
            raise bundle_refusal(e) from None
        spec = b.spec
        problems = _taken(s, spec)
        if problems:
            raise BundleRefused(problems)
        pages = _pages(b)
        installed = bundles.install_tasks(b, home)
        # the tasks' files go with a rollback, whatever fails (the rows, the commit)
        on_rollback(s, lambda: bundles.uninstall_tasks(installed, home))
        for task_id in installed:  # into the object store (when the site has one) first
            objectstore.push_tree(settings, f"tasks/{task_id}")
        return _write(s, actor, b, pages, via=via, home=home, settings=settings)


def _write(
    s: Session, actor: User | None, b, pages, *, via: str, home: Path, settings=None
) -> m.CompetitionOut:
    spec = b.spec
    reg, teams = spec.registration, spec.teams
    c = Competition(
        slug=spec.id,
        title=spec.title,
        state=spec.state,
        approval=reg.approval,
        allowed_domains=list(reg.allowed_domains),
        data_public=reg.data_public,
        team_size_cap=teams.size_cap or None,
        join_needs_captain=teams.join_needs_captain,
        anonymous_board=spec.anonymous_board,
        fact_fields=[
            m.FactField.model_validate(f if isinstance(f, dict) else f.model_dump()).model_dump()
            for f in spec.fact_fields
        ],
    )
    s.add(c)
    s.flush()
    for i, t in enumerate(spec.tasks):
        s.add(CompetitionTask(competition_id=c.id, task_id=t.id, position=i))
    for i, (slug, title, text) in enumerate(pages):
        s.add(
            CompetitionPage(
                competition_id=c.id,
                slug=slug,
                title=title,
                body_markdown=text,
                body_html=render_markdown(text),
                position=i,
            )
        )
        if slug == "terms":
            c.terms_version = 1
    s.flush()
    for t in spec.tasks:
        task = get_task(t.id)
        for p in t.phases:
            try:
                lifecycle.create_phase(
                    s,
                    task=task,
                    name=p.name,
                    split=p.split,
                    actor=actor,
                    via=via,
                    home=home,
                    opens_at=_when(p.opens),
                    closes_at=_when(p.closes),
                    daily_limit=p.daily_limit,
                    total_limit=p.total_limit,
                    concurrent_limit=p.concurrent_limit,
                    public_fraction=p.public_fraction,
                    accepts=p.accepts,
                    blind=p.blind,
                    compute_budget_seconds=p.compute_budget_seconds,
                    boards=[b.model_dump(mode="json", exclude_none=True) for b in p.boards],
                    **({"release_rule": p.release_rule} if p.release_rule is not None else {}),
                    # what its published ranking is computed on: as declared, else the task's
                    **({"published_on": p.published_on} if p.published_on is not None else {}),
                )
            except LifecycleRefused as e:
                problem = bundle_problem(f"tasks[{t.id}].phases[{p.name}]", e.message)
                raise BundleRefused([problem]) from None
    if actor is not None:
        people.grant(s, c.id, actor, people.OWNER, by=actor)
    _roles(s, actor, c, spec, via=via, settings=settings)
    audit.record(
        s,
        actor,
        "competition_create",
        c.slug,
        competition_id=c.id,
        via=via,
        bundle=True,
        tasks=[t.id for t in spec.tasks],
    )
    return comp_actions.get_competition(s=s, viewer=actor, competition=c.slug, operator=True)


def _roles(
    s: Session, actor: User | None, c: Competition, spec, *, via: str, settings=None
) -> None:
    """The bundle's `roles`, as its owner would invite them (server.actions.roles): with mail, an
    invitation mailed; without, an existing account gets the role at once, anyone else a pending
    invitation whose link its owners read on the roles page. The creator, owner already, is
    skipped; an address listed twice keeps its last role."""
    from server.actions import roles  # the roles actions import the competitions', as this does

    settings = settings or get_settings()
    wanted = {r.email.strip().lower(): r.role for r in spec.roles}
    for email, role in wanted.items():
        if actor is not None and (actor.email or "").lower() == email:
            continue
        try:
            roles.invite_person(s, settings, c, actor, email, role, via=via)
        except LifecycleRefused as e:
            raise BundleRefused([bundle_problem("roles", f"{email}: {e.message}")]) from None


@action
def exportable(*, s: Session, competition: str, home: Path) -> bool:
    """Whether every task of the competition is installed as a bundle, its declaration beside its
    files (a bundle's task, or a built-in one imported since its importer writes a bundle)."""
    c = comp_actions.find(s, competition)
    return all(declaration_path(t, Path(home)).is_file() for t in people.task_ids(s, c.id))


@action
def export_competition(
    *,
    s: Session,
    actor: User | None,
    competition: str,
    out: Path,
    include_gold: bool,
    settings,
    new_id: str | None = None,
) -> Path:
    """Write the competition as a bundle zip to `out` (its owners and organizers): pages, terms,
    settings, fact-sheet fields, tasks, their splits' files and phases; the hidden gold only when
    asked. With `new_id`, the bundle declares a clone: that id, and each task's id suffixed with it
    (a task id is unique on a server)."""
    c = comp_actions.find(s, competition)
    common.require_organizer(actor, s, competition_id=c.id)
    home = Path(settings.home)
    spec = _spec_of(s, c)
    with tempfile.TemporaryDirectory(prefix="palimpsest-export-") as work:
        root = Path(work)
        for p in spec["pages"]:
            f = root / "pages" / f"{p['slug']}.md"
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(p.pop("markdown"), encoding="utf-8")
            p["file"] = f"pages/{p['slug']}.md"
        for task_id in people.task_ids(s, c.id):
            try:
                t = bundles.export_task(task_id, home, root, include_gold=include_gold)
            except PalimpsestError as e:  # installed without a declaration: imported before
                # the built-in importers wrote bundles; importing the task again writes one
                raise LifecycleRefused(
                    f"{c.slug} cannot be exported as a bundle: {e}; import {task_id} again "
                    "to export it",
                    "not_exportable",
                ) from None
            t["phases"] = _phases_of(s, task_id)
            spec["tasks"].append(t)
        if new_id is not None:
            spec = _cloned(spec, new_id)
        audit.record(
            s,
            actor,
            "competition_export",
            c.slug,
            competition_id=c.id,
            gold=include_gold,
            clone=new_id,
        )
        bundles.write_bundle_zip(spec, root, Path(out))
    return Path(out)


def _spec_of(s: Session, c: Competition) -> dict:
    pages = s.exec(
        select(CompetitionPage)
        .where(CompetitionPage.competition_id == c.id)
        .order_by(CompetitionPage.position, CompetitionPage.id)
    ).all()
    return {
        "id": c.slug,
        "title": c.title,
        "state": "draft" if c.state == "draft" else "visible",
        "pages": [{"slug": p.slug, "title": p.title, "markdown": p.body_markdown} for p in pages],
        "registration": {
            "approval": c.approval,
            "allowed_domains": list(c.allowed_domains or []),
            "data_public": c.data_public,
        },
        "teams": {"size_cap": c.team_size_cap or 0, "join_needs_captain": c.join_needs_captain},
        "anonymous_board": c.anonymous_board,
        "fact_fields": list(c.fact_fields or []),
        "roles": [
            {"email": u.email, "role": r.role}
            for r, u in s.exec(
                select(CompetitionRole, User)
                .where(CompetitionRole.competition_id == c.id, CompetitionRole.user_id == User.id)
                .order_by(CompetitionRole.id)
            )
            if u.email
        ],
        "tasks": [],
    }


def _iso(v: datetime | None) -> str | None:
    return None if v is None else v.replace(tzinfo=timezone.utc).isoformat().replace("+00:00", "Z")


def _phases_of(s: Session, task_id: str) -> list[dict]:
    return [
        {
            "name": p.name,
            "split": p.split,
            "opens": _iso(p.opens_at),
            "closes": _iso(p.closes_at),
            "daily_limit": p.daily_limit,
            "total_limit": p.total_limit,
            "concurrent_limit": p.concurrent_limit,
            "public_fraction": p.public_fraction,
            **(
                {
                    "accepts": p.accepts,
                    "blind": bool(p.blind),
                    "compute_budget_seconds": p.compute_budget_seconds,
                }
                if p.accepts != "predictions" or p.blind
                else {}
            ),
            **({"boards": list(p.boards)} if p.boards else {}),
            **({"release_rule": p.release_rule} if p.release_rule else {}),
            "published_on": p.published_on,
        }
        for p in s.exec(select(Phase).where(Phase.task_id == task_id).order_by(Phase.id))
    ]


def _cloned(spec: dict, new_id: str) -> dict:
    """The spec of a clone: the new id, and each task id suffixed with it (cut to 64)."""
    spec = dict(spec, id=new_id, state="draft", roles=[])
    for t in spec["tasks"]:
        t["id"] = f"{t['id']}-{new_id}"[:64].rstrip("-")
    return spec


@action
def clone_competition(
    *, s: Session, actor: User | None, competition: str, new_id: str, via: str, settings
) -> m.CompetitionOut:
    """A new draft competition made from this one's bundle, gold included (next year's edition):
    its id `new_id`, its tasks' ids suffixed with it; no participant, run or role is copied. The
    gold is the source's as it stands, the pairs judged not to be links (`judged.csv`) and its
    history (earlier versions and their records) with it (`_carry_gold`)."""
    comp_actions.require_admin(actor)
    source_tasks = people.task_ids(s, comp_actions.find(s, competition).id)
    with tempfile.TemporaryDirectory(prefix="palimpsest-clone-") as work:
        out = Path(work) / "bundle.zip"
        export_competition(
            s=s,
            actor=actor,
            competition=competition,
            out=out,
            include_gold=True,
            settings=settings,
            new_id=new_id,
        )
        got = create_from_bundle(s=s, actor=actor, source=out, via=via, settings=settings)
    home = Path(settings.home)
    for task_id in source_tasks:
        _carry_gold(s, home, task_id, f"{task_id}-{new_id}"[:64].rstrip("-"))
    return got


def _carry_gold(s: Session, home: Path, source: str, clone: str) -> None:
    """The gold files a bundle does not carry (`judged.csv`), the kept earlier versions
    (`gold-history/`) and their `GoldVersion` rows, from a task to its clone; each split's
    checksum recorded again over its files."""
    src, dst = TaskStore(source, home), TaskStore(clone, home)
    if not (src.exists() and dst.exists()):
        return
    changed = False
    for gold in sorted((src.root / "gold").glob("*")) if (src.root / "gold").is_dir() else []:
        here = dst.root / "gold" / gold.name
        if not here.is_dir():
            continue
        for f in sorted(gold.rglob("*")):
            target = here / f.relative_to(gold)
            if f.is_file() and not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(f, target)
                changed = True
    history = src.root / "gold-history"
    if history.is_dir():
        shutil.copytree(history, dst.root / "gold-history", dirs_exist_ok=True)
    if changed:
        manifest = dst.manifest()
        for here in sorted((dst.root / "gold").glob("*")):
            if here.is_dir():
                manifest.setdefault("gold_sha256", {})[here.name] = tree_sha256(here)
        dst.manifest_path.write_text(
            json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n",
            encoding="utf-8",
        )
    rows = s.exec(
        select(GoldVersion).where(GoldVersion.task_id == source).order_by(GoldVersion.id)
    ).all()
    newest = {}
    for v in rows:
        newest[v.split] = max(newest.get(v.split, 0), v.version)
    for v in rows:
        sha = v.sha256
        if v.version == newest[v.split]:
            sha = dst.gold_checksum(v.split)  # the newest: the clone's files as they are
        s.add(
            GoldVersion(
                task_id=clone,
                split=v.split,
                version=v.version,
                sha256=sha,
                parent_sha256=v.parent_sha256,
                reason=f"{v.reason} (in {source})" if v.reason else f"in {source}",
                added=v.added,
                judged_negative=v.judged_negative,
                created_by=v.created_by,
                created_at=v.created_at,
            )
        )
