"""Competitions: create one, change its title, state or settings, write its pages, and list or show
what a viewer may see. Site administrators create competitions (and become their owner); the
owners and organizers of a competition change it; everyone sees the visible and archived ones, a
draft is seen by its own people (and administrators) only."""

from __future__ import annotations

import re
from collections.abc import Iterable

from sqlalchemy import func
from sqlmodel import Session, select

from server import models  # other subjects' tables: models.X, loaded when first used
from server.actions import common
from server.actions.common import action
from server.api_models import competitions as m
from server.domain import audit, lifecycle, people
from server.domain.bounds import CONTROL, one_line_problem
from server.domain.sanitize import MAX_MARKDOWN, MarkdownTooDeep, check_markdown, render_markdown
from server.exceptions import Forbidden, LifecycleRefused, NotFound, UploadFieldsInvalid
from server.models import (
    Competition,
    CompetitionPage,
    CompetitionTask,
    User,
    utcnow,
)
from server.settings import get_settings
from tasks import all_tasks

SLUG = re.compile(m.SLUG)
STATES = ("draft", "visible", "archived")
# the pages a new competition is offered, in this order; organizers add any others
STANDARD_PAGES = ("overview", "data", "evaluation", "terms", "timeline")
# competition ids that would shadow a route (/competitions/new, /api/v1/competitions/bundle)
RESERVED_IDS = frozenset({"new", "bundle"})
# page slugs that would shadow a route of the competition's web pages
RESERVED_PAGES = frozenset(
    {
        "edit",
        "edit-page",
        "pages",
        "settings",
        "participants",
        "register",
        "people",
        "announce",
        "mail",
    }
)


def is_admin(viewer: User | None, *, operator: bool = False) -> bool:
    """Whether `viewer` is a site administrator (the operator at the server's shell always is)."""
    return operator or people.is_admin(viewer)


def require_admin(actor: User | None) -> None:
    if actor is not None and not people.is_admin(actor):
        raise Forbidden("this needs a site administrator", "not_admin")


def may_see_draft(s: Session, viewer: User | None, c: Competition, operator: bool = False) -> bool:
    return is_admin(viewer, operator=operator) or people.role_of(s, viewer, c.id) is not None


def invalid(field: str, message: str) -> UploadFieldsInvalid:
    return UploadFieldsInvalid({field: message})


def _slug(value: str, field: str) -> str:
    if not SLUG.match(value or ""):
        raise invalid(
            field,
            f"{value!r}: lowercase letters, digits and '-', at most 64, starting with a letter "
            "or digit",
        )
    return value


def checked_text(value: str, what: str, limit: int) -> str:
    value = (value or "").strip()
    problem = one_line_problem(value)
    if problem:
        raise invalid(what, f"one line: {problem}")
    if not value or len(value) > limit:
        raise invalid(what, f"1 to {limit} characters, no control character")
    return value


def find(s: Session, slug: str) -> Competition:
    """The competition with this short id, or NotFound."""
    c = s.exec(select(Competition).where(Competition.slug == slug)).first()
    if c is None:
        raise NotFound(f"no competition {slug!r}", "unknown_competition")
    return c


def visible(s: Session, slug: str, viewer: User | None, operator: bool = False) -> Competition:
    """The competition with this short id if the viewer may see it, else NotFound."""
    c = find(s, slug)
    if c.state == "draft" and not may_see_draft(s, viewer, c, operator):
        # the same answer as for a competition that does not exist: a draft is not disclosed
        raise NotFound(f"no competition {slug!r}", "unknown_competition")
    return c


def _tasks(s: Session, c: Competition) -> list[str]:
    q = select(CompetitionTask.task_id).where(CompetitionTask.competition_id == c.id)
    return list(s.exec(q.order_by(CompetitionTask.position, CompetitionTask.id)))


def _pages(s: Session, c: Competition) -> list[CompetitionPage]:
    q = select(CompetitionPage).where(CompetitionPage.competition_id == c.id)
    return list(s.exec(q.order_by(CompetitionPage.position, CompetitionPage.id)))


def page_out(p: CompetitionPage) -> m.CompetitionPageOut:
    """A page with its sanitized HTML (rendered when it was saved)."""
    return m.CompetitionPageOut(
        slug=p.slug,
        title=p.title,
        position=p.position,
        updated_at=p.updated_at,
        body_markdown=p.body_markdown,
        html=p.body_html,
    )


def _summary(s: Session, c: Competition) -> m.CompetitionSummary:
    return m.CompetitionSummary(
        id=c.slug, title=c.title, state=c.state, created_at=c.created_at, tasks=_tasks(s, c)
    )


def settings_out(c: Competition) -> m.CompetitionSettingsOut:
    return m.CompetitionSettingsOut(
        approval=c.approval,
        allowed_domains=list(c.allowed_domains or []),
        data_public=c.data_public,
        team_size_cap=c.team_size_cap,
        join_needs_captain=c.join_needs_captain,
        anonymous_board=c.anonymous_board,
        terms_version=c.terms_version,
        fact_fields=[m.FactField.model_validate(f) for f in (c.fact_fields or [])],
    )


def _out(s: Session, c: Competition, viewer: User | None = None) -> m.CompetitionOut:
    role = "admin" if people.is_admin(viewer) else people.role_of(s, viewer, c.id)
    reg = people.registration(s, viewer, c.id)
    return m.CompetitionOut(
        **_summary(s, c).model_dump(),
        pages=[page_out(p) for p in _pages(s, c)],
        settings=settings_out(c),
        role=role,
        registration=None if reg is None else reg.status,
    )


@action
def tasks_offered(*, s: Session) -> list[tuple[str, str]]:
    """The declared tasks a new competition may take: those in no competition or in the
    placeholder their phases made, as (id, label) choices."""
    q = select(CompetitionTask.task_id, Competition.slug, Competition.placeholder).join(
        Competition, Competition.id == CompetitionTask.competition_id
    )
    taken = {tid: (slug, placeholder) for tid, slug, placeholder in s.exec(q)}
    out = []
    for t in all_tasks():
        slug, placeholder = taken.get(t.id, (None, True))
        if placeholder:
            out.append((t.id, f"{t.id}: {t.title}"))
    return out


@action
def list_competitions(
    *, s: Session, viewer: User | None, operator: bool = False
) -> list[m.CompetitionSummary]:
    """The competitions `viewer` may see (None: an anonymous visitor), newest first; a
    placeholder whose task another competition took over is an empty shell and is not listed."""
    holding = select(CompetitionTask.competition_id)
    q = select(Competition).where(~Competition.placeholder | Competition.id.in_(holding))
    if not is_admin(viewer, operator=operator):
        mine = select(models.CompetitionRole.competition_id).where(
            models.CompetitionRole.user_id == (viewer.id if viewer is not None else -1)
        )
        q = q.where((Competition.state != "draft") | Competition.id.in_(mine))
    return [_summary(s, c) for c in s.exec(q.order_by(Competition.id.desc()))]


@action
def get_competition(
    *, s: Session, viewer: User | None, competition: str, operator: bool = False
) -> m.CompetitionOut:
    """A competition, its pages and settings, and the viewer's role and registration in it;
    NotFound for a draft to anyone but its people and administrators."""
    return _out(s, visible(s, competition, viewer, operator), viewer)


@action
def get_page(
    *, s: Session, viewer: User | None, competition: str, page: str, operator: bool = False
) -> m.CompetitionPageOut:
    """One page of a competition the viewer may see, or NotFound naming the pages it has."""
    c = visible(s, competition, viewer, operator)
    pages = _pages(s, c)
    for p in pages:
        if p.slug == page:
            return page_out(p)
    names = ", ".join(p.slug for p in pages) or "none yet"
    raise NotFound(f"{competition} has no page {page!r} (it has: {names})", "unknown_page")


@action
def create_competition(
    *,
    s: Session,
    actor: User | None,
    via: str,
    competition: str,
    title: str,
    state: str = "draft",
    tasks: Iterable[str] = (),
) -> m.CompetitionOut:
    """Create a competition (a site administrator, who becomes its owner), optionally with declared
    tasks as its subtasks; a task already in another competition is refused, naming it."""
    require_admin(actor)
    _slug(competition, "id")
    if competition in RESERVED_IDS:
        raise invalid("id", f"{competition!r} is reserved")
    title = checked_text(title, "title", 200)
    if state not in STATES:
        raise invalid("state", f"{state!r}: one of {', '.join(STATES)}")
    if s.exec(select(Competition).where(Competition.slug == competition)).first() is not None:
        raise LifecycleRefused(f"a competition {competition!r} exists already", "exists")
    task_ids = list(dict.fromkeys(tasks))
    for tid in task_ids:
        common.task(tid)  # NotFound naming the closest declared id
        taken = s.exec(select(CompetitionTask).where(CompetitionTask.task_id == tid)).first()
        if taken is not None:
            other = s.get(Competition, taken.competition_id)
            if not other.placeholder:
                raise LifecycleRefused(
                    f"task {tid!r} is in competition {other.slug!r} already", "task_taken"
                )
    c = Competition(slug=competition, title=title, state=state)
    s.add(c)
    s.flush()
    for i, tid in enumerate(task_ids):
        link = s.exec(select(CompetitionTask).where(CompetitionTask.task_id == tid)).first()
        if link is not None:  # taken over from the placeholder made for it, which is archived
            old = s.get(Competition, link.competition_id)
            old.state = "archived"
            s.add(old)
            link.competition_id, link.position = c.id, i
            s.add(link)
            audit.record(
                s, actor, "competition_take_over", tid, competition_id=c.id, placeholder=old.slug
            )
        else:
            s.add(CompetitionTask(competition_id=c.id, task_id=tid, position=i))
    if actor is not None:
        people.grant(s, c.id, actor, people.OWNER, by=actor)
    audit.record(
        s,
        actor,
        "competition_create",
        competition,
        competition_id=c.id,
        via=via,
        state=state,
        tasks=task_ids,
    )
    return _out(s, c, actor)


@action
def set_owner(*, s: Session, competition: str, user: User, via: str) -> None:
    """Make an account an owner of a competition (the server's shell, which has no account of
    its own to make one); audited; commits."""
    c = find(s, competition)
    people.grant(s, c.id, user, people.OWNER)
    audit.record(
        s,
        None,
        "competition_role_grant",
        c.slug,
        competition_id=c.id,
        via=via,
        user=user.email,
        role=people.OWNER,
    )


SETTINGS = (
    "approval",
    "allowed_domains",
    "data_public",
    "team_size_cap",
    "join_needs_captain",
    "anonymous_board",
    "fact_fields",
)


@action
def edit_competition(
    *,
    s: Session,
    actor: User | None,
    via: str,
    competition: str,
    title: str | None = None,
    state: str | None = None,
    settings: m.CompetitionSettings | None = None,
) -> m.CompetitionOut:
    """Change a competition's title, state (draft, visible, archived) or settings (an owner or
    organizer of it); only what is given changes, and every change is audited."""
    c = find(s, competition)
    common.require_organizer(actor, s, competition_id=c.id)
    changes: dict = {}
    if title is not None:
        title = checked_text(title, "title", 200)
        if title != c.title:
            changes["title"] = [c.title, title]
            c.title = title
    if state is not None:
        if state not in STATES:
            raise invalid("state", f"{state!r}: one of {', '.join(STATES)}")
        if state != c.state:
            changes["state"] = [c.state, state]
            c.state = state
    if settings is not None:
        for key in SETTINGS:
            value = getattr(settings, key)
            if value is None:
                continue
            if key == "fact_fields":
                value = [f.model_dump() for f in value]
            if key == "team_size_cap" and value == 0:
                value = None
                if c.team_size_cap is None:
                    continue
            if value != getattr(c, key):
                changes[key] = [getattr(c, key), value]
                setattr(c, key, value)
    if changes:
        s.add(c)
        audit.record(s, actor, "competition_edit", c.slug, competition_id=c.id, via=via, **changes)
    if "anonymous_board" in changes:  # anonymous boards: every cached board of its phases is stale
        tasks = people.task_ids(s, c.id)
        for p in (
            s.exec(select(models.Phase).where(models.Phase.task_id.in_(tasks))).all()
            if tasks
            else []
        ):
            lifecycle.bump(
                s, p, actor=actor, action="leaderboard.anonymity", anonymous=c.anonymous_board
            )
    return _out(s, c, actor)


@action
def set_page(
    *,
    s: Session,
    actor: User | None,
    via: str,
    competition: str,
    page: str,
    title: str,
    body_markdown: str,
    position: int | None = None,
) -> m.CompetitionPageOut:
    """Create or change a page of a competition (an owner or organizer of it); a new page goes
    last unless `position` says. A change of the terms page's text raises the terms' version, so
    that every participant is asked to accept them again."""
    c = find(s, competition)
    common.require_organizer(actor, s, competition_id=c.id)
    _slug(page, "page")
    if page in RESERVED_PAGES:
        raise invalid("page", f"{page!r} is reserved ({', '.join(sorted(RESERVED_PAGES))})")
    title = checked_text(title, "title", 200)
    body_markdown = body_markdown or ""
    if len(body_markdown) > MAX_MARKDOWN or CONTROL.search(body_markdown):
        raise invalid("body_markdown", f"at most {MAX_MARKDOWN} characters, no control character")
    try:
        check_markdown(body_markdown)
    except MarkdownTooDeep as e:
        raise invalid("body_markdown", str(e)) from None
    if position is not None and not 0 <= position <= 10_000:
        raise invalid("position", "0 to 10000")
    p = s.exec(
        select(CompetitionPage).where(
            CompetitionPage.competition_id == c.id, CompetitionPage.slug == page
        )
    ).first()
    created = p is None
    terms_changed = page == "terms" and (created or p.body_markdown != (body_markdown or ""))
    if p is None:
        if position is None:
            last = s.exec(
                select(func.max(CompetitionPage.position)).where(
                    CompetitionPage.competition_id == c.id
                )
            ).first()
            position = 0 if last is None else last + 1
        p = CompetitionPage(competition_id=c.id, slug=page, title=title, position=position)
    p.title = title
    p.body_markdown = body_markdown
    p.body_html = render_markdown(body_markdown)
    if position is not None:
        p.position = position
    p.updated_at = utcnow()
    s.add(p)
    details: dict = {"chars": len(body_markdown)}
    if terms_changed:
        c.terms_version += 1
        s.add(c)
        details["terms_version"] = c.terms_version
        s.flush()
        # every registered participant is told, in this transaction (server.jobs.reminders)
        from server.jobs import (
            reminders,  # here: the mail queue (RQ) loads when the terms change
        )

        details["notified"] = reminders.terms_changed(s, get_settings(), c)
    audit.record(
        s,
        actor,
        "competition_page_create" if created else "competition_page_edit",
        f"{c.slug}/{page}",
        competition_id=c.id,
        via=via,
        **details,
    )
    return page_out(p)
