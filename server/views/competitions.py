"""A competition's public pages (its Markdown pages, sanitized) and the administrator's page
form; everything goes through server.actions.competitions."""

from __future__ import annotations

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from markupsafe import Markup

from server import outbox
from server.actions import announcements as ann_actions
from server.actions import competitions as comp_actions
from server.auth import current_user, login_required, organizer_required
from server.db import db
from server.exceptions import LifecycleRefused, NotFound, UploadFieldsInvalid
from server.forms import (
    AnnouncementForm,
    CompetitionForm,
    CompetitionPageForm,
    MailPreferencesForm,
)
from server.settings import get_settings

bp = Blueprint("competitions", __name__)


def _render(competition: str, page: str | None):
    viewer = current_user()
    c = comp_actions.get_competition(s=db(), viewer=viewer, competition=competition)
    shown = None
    if page is not None:
        shown = comp_actions.get_page(s=db(), viewer=viewer, competition=competition, page=page)
    elif c.pages:
        shown = c.pages[0]
    return render_template(
        "competitions/show.html",
        c=c,
        page=shown,
        # sanitized by server.sanitize (markdown, then nh3): safe to insert as HTML
        html=Markup(shown.html) if shown else None,
        admin=c.role in ("admin", "owner", "organizer"),
        **_announcement_context(competition, viewer),
    )


@bp.route("/competitions/<competition>")
def show(competition: str):
    return _render(competition, None)


@bp.route("/competitions/<competition>/<page>")
def show_page(competition: str, page: str):
    return _render(competition, page)


@bp.route("/competitions/<competition>/edit", methods=["GET", "POST"])
@organizer_required
def edit(competition: str):
    """The competition's title and state."""
    s = db()
    c = comp_actions.get_competition(s=s, viewer=current_user(), competition=competition)
    if request.method != "POST":
        return _settings_page(c, CompetitionForm(formdata=None, data=c.model_dump()))
    form = CompetitionForm()
    if not form.validate():
        return _settings_page(c, form, 400)
    try:
        comp_actions.edit_competition(
            s=s,
            actor=current_user(),
            via="web",
            competition=competition,
            title=form.title.data,
            state=form.state.data,
        )
    except UploadFieldsInvalid as e:
        s.rollback()
        form.form_errors.append(f"{e.message[:1].upper()}{e.message[1:]}.")
        return _settings_page(c, form, 400)
    flash("Competition saved.", "ok")
    return redirect(url_for("competitions.show", competition=competition))


def _settings_page(c, form, code: int = 200):
    return render_template(
        "competitions/edit.html", c=c, form=form, field_errors=any(f.errors for f in form)
    ), code


@bp.route("/competitions/<competition>/edit-page", methods=["GET", "POST"])
@organizer_required
def edit_page(competition: str):
    """The page form: `?page=ID` edits that page, without it a new page is written."""
    s = db()
    c = comp_actions.get_competition(s=s, viewer=current_user(), competition=competition)
    if request.method != "POST":
        form = CompetitionPageForm(formdata=None)
        slug = request.args.get("page", "")
        existing = next((p for p in c.pages if p.slug == slug), None)
        if existing is not None:
            form.page.data, form.title.data = existing.slug, existing.title
            form.body_markdown.data, form.position.data = existing.body_markdown, existing.position
        elif slug:
            form.page.data = slug
        return _form_page(c, form)
    form = CompetitionPageForm()
    if not form.validate():
        return _form_page(c, form, 400)
    try:
        saved = comp_actions.set_page(
            s=s,
            actor=current_user(),
            via="web",
            competition=competition,
            page=form.page.data.strip(),
            title=form.title.data,
            body_markdown=form.body_markdown.data or "",
            position=form.position.data,
        )
    except (UploadFieldsInvalid, LifecycleRefused, NotFound) as e:
        s.rollback()
        form.form_errors.append(f"{e.message[:1].upper()}{e.message[1:]}.")
        return _form_page(c, form, 400)
    return redirect(url_for("competitions.show_page", competition=c.id, page=saved.slug))


def _form_page(c, form, code: int = 200):
    return render_template(
        "competitions/edit_page.html",
        c=c,
        form=form,
        field_errors=any(f.errors for f in form),
        standard=comp_actions.STANDARD_PAGES,
    ), code


# ----------------------------------------------------------------------------- announcements, mail


def _announcement_context(competition: str, viewer) -> dict:
    """What the competition page shows of announcements (newest first, sanitized HTML) and, to a
    registered person, their mail preferences."""
    s = db()
    items = ann_actions.list_announcements(s=s, viewer=viewer, competition=competition)
    prefs = None
    if viewer is not None:
        try:
            prefs = ann_actions.get_mail_preferences(s=s, user=viewer, competition=competition)
        except NotFound:
            s.rollback()
    return {
        # sanitized by server.sanitize when the announcement was saved: safe to insert as HTML
        "announcements": [(a, Markup(a.html)) for a in items],
        "mail_prefs": prefs,
    }


def _deliver_mail() -> None:
    if current_app.config.get("PALIMPSEST_ENQUEUE", True):
        outbox.enqueue_delivery(get_settings(), current_app.extensions.get("palimpsest.redis"))


@bp.route("/competitions/<competition>/announce", methods=["GET", "POST"])
@organizer_required
def announce(competition: str):
    """The organizers' announcement form."""
    s = db()
    c = comp_actions.get_competition(s=s, viewer=current_user(), competition=competition)
    form = AnnouncementForm() if request.method == "POST" else AnnouncementForm(formdata=None)
    if request.method != "POST":
        return _announce_page(c, form)
    if not form.validate():
        return _announce_page(c, form, 400)
    try:
        a = ann_actions.announce(
            s=s,
            actor=current_user(),
            competition=competition,
            title=form.title.data,
            body_markdown=form.body_markdown.data or "",
            via="web",
            enqueue=_deliver_mail,
        )
    except UploadFieldsInvalid as e:
        s.rollback()
        form.form_errors.append(f"{e.message[:1].upper()}{e.message[1:]}.")
        return _announce_page(c, form, 400)
    flash(f"Announcement posted; mailed to {a.recipients} participant(s).", "ok")
    return redirect(url_for("competitions.show", competition=competition))


def _announce_page(c, form, code: int = 200):
    return render_template(
        "competitions/announce.html", c=c, form=form, field_errors=any(f.errors for f in form)
    ), code


@bp.route("/competitions/<competition>/mail", methods=["POST"])
@login_required
def mail_preferences(competition: str):
    """A registered person's mail preferences (the block on the competition page)."""
    s = db()
    form = MailPreferencesForm()
    try:
        ann_actions.set_mail_preferences(
            s=s,
            user=current_user(),
            competition=competition,
            announcements=bool(form.announcements.data),
            runs=bool(form.runs.data),
            via="web",
        )
    except NotFound as e:
        s.rollback()
        flash(f"{e.message[:1].upper()}{e.message[1:]}.", "error")
        return redirect(url_for("competitions.show", competition=competition))
    flash("Mail preferences saved.", "ok")
    return redirect(url_for("competitions.show", competition=competition))
