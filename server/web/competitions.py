"""A competition's public pages (its Markdown pages, sanitized) and the administrator's page
form; everything goes through server.actions.competitions."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml
from flask import (
    Blueprint,
    Response,
    abort,
    flash,
    redirect,
    render_template,
    request,
    url_for,
)
from markupsafe import Markup
from pydantic import ValidationError

from server import api_models as m
from server.actions import announcements as ann_actions
from server.actions import bundles as bundle_actions
from server.actions import competitions as comp_actions
from server.actions import registrations as reg_actions
from server.db import db
from server.domain import people
from server.exceptions import (
    BundleRefused,
    Forbidden,
    LifecycleRefused,
    NotFound,
    UploadFieldsInvalid,
)
from server.settings import get_settings
from server.web.auth import admin_required, current_user, login_required, organizer_required
from server.web.forms import (
    AnnouncementForm,
    CompetitionForm,
    CompetitionPageForm,
    CompetitionSettingsForm,
    MailPreferencesForm,
    NewCompetitionForm,
)
from tasks.bundle import load_yaml

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
        # sanitized by server.domain.sanitize (markdown, then nh3): safe to insert as HTML
        html=Markup(shown.html) if shown else None,
        admin=c.role in ("admin", "owner", "organizer"),
        exportable=c.role in ("admin", "owner", "organizer")
        and bundle_actions.exportable(s=db(), competition=c.id, home=get_settings().home),
        registration=_registration_of(competition, viewer),
        **_announcement_context(competition, viewer),
    )


@bp.route("/competitions/new", methods=["GET", "POST"])
@admin_required
def new():
    """A site administrator creates a competition (and becomes its owner)."""
    s = db()
    form = NewCompetitionForm() if request.method == "POST" else NewCompetitionForm(formdata=None)
    form.tasks.choices = comp_actions.tasks_offered(s=s)
    if request.method != "POST":
        return _new_page(form)
    if not form.validate():
        return _new_page(form, 400)
    try:
        made = comp_actions.create_competition(
            s=s,
            actor=current_user(),
            via="web",
            competition=(form.competition.data or "").strip(),
            title=form.title.data,
            tasks=form.tasks.data or [],
        )
    except (UploadFieldsInvalid, LifecycleRefused, NotFound) as e:
        form.form_errors.append(f"{e.message[:1].upper()}{e.message[1:]}.")
        return _new_page(form, 400)
    flash(f"Competition {made.id} created as a draft: write its pages, then make it visible.", "ok")
    return redirect(url_for("competitions.show", competition=made.id))


def _new_page(form, code: int = 200, problems=None, bundle_message=None):
    return render_template(
        "competitions/new.html",
        form=form,
        field_errors=any(f.errors for f in form),
        problems=problems or [],
        bundle_message=bundle_message,
    ), code


@bp.route("/competitions/new/bundle", methods=["POST"])
@admin_required
def new_from_bundle():
    """A site administrator uploads a bundle (a zip); every problem is listed, or it is made."""
    s = db()
    form = NewCompetitionForm(formdata=None)
    form.tasks.choices = comp_actions.tasks_offered(s=s)
    upload = request.files.get("bundle")
    if upload is None or not upload.filename:
        return _new_page(form, 400, bundle_message="Choose a bundle (a .zip) to upload.")
    with tempfile.TemporaryDirectory(prefix="palimpsest-upload-") as d:
        path = Path(d) / "bundle.zip"
        upload.save(path)  # bounded by MAX_CONTENT_LENGTH
        try:
            made = bundle_actions.create_from_bundle(
                s=s, actor=current_user(), source=path, via="web", settings=get_settings()
            )
        except BundleRefused as e:
            return _new_page(form, 422, problems=e.problems, bundle_message=e.message)
    flash(f"Competition {made.id} created from the bundle: {', '.join(made.tasks)}.", "ok")
    return redirect(url_for("competitions.show", competition=made.id))


@bp.route("/competitions/<competition>/bundle.zip")
@organizer_required
def bundle_zip(competition: str):
    """The competition as a bundle (`?gold=1`: with the hidden gold), for its organizers."""
    with tempfile.TemporaryDirectory(prefix="palimpsest-export-") as d:
        path = bundle_actions.export_competition(
            s=db(),
            actor=current_user(),
            competition=competition,
            out=Path(d) / "bundle.zip",
            include_gold=request.args.get("gold") == "1",
            settings=get_settings(),
        )
        data = path.read_bytes()
    return Response(
        data,
        mimetype="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{competition}.zip"'},
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


# ----------------------------------------------------------------------------- registrations
# the registration box of the competition page, the organizers' participants page and settings


def _registration_of(competition: str, viewer):
    """The signed-in viewer's registration box (None for an anonymous visitor)."""
    if viewer is None:
        return None
    return reg_actions.my_registration(s=db(), user=viewer, competition=competition)


def _form_int(value: str | None, default: int) -> int:
    try:
        return int(value or "")
    except ValueError:
        return default


@bp.route("/competitions/<competition>/register", methods=["POST"])
@login_required
def register(competition: str):
    s = db()
    try:
        got = reg_actions.register(
            s=s,
            user=current_user(),
            competition=competition,
            accept_terms=request.form.get("accept_terms") in ("1", "y", "on", "true"),
            # the version the page showed: a page loaded before the terms changed accepts nothing
            terms_version=_form_int(request.form.get("terms_version"), -1),
            via="web",
        )
    except (UploadFieldsInvalid, Forbidden, LifecycleRefused) as e:
        flash(f"Not registered: {e.message}.", "error")
        return redirect(url_for("competitions.show", competition=competition))
    if got.participating:
        flash(f"You are registered for {competition}.", "ok")
    else:
        flash(f"Registered: {got.message}.", "ok")
    return redirect(url_for("competitions.show", competition=competition))


@bp.route("/competitions/<competition>/participants")
@organizer_required
def participants(competition: str):
    s = db()
    c = comp_actions.get_competition(s=s, viewer=current_user(), competition=competition)
    status = request.args.get("status") or None
    after = request.args.get("after", type=int)
    try:
        got = reg_actions.list_participants(
            s=s, actor=current_user(), competition=competition, status=status, after=after
        )
    except UploadFieldsInvalid as e:
        abort(400, e.message)
    return render_template(
        "competitions/participants.html",
        c=c,
        got=got,
        status=status,
        statuses=people.STATUSES,
        actions=list(reg_actions.DECISIONS),
    )


@bp.route("/competitions/<competition>/participants/<int:user_id>", methods=["POST"])
@organizer_required
def decide(competition: str, user_id: int):
    s = db()
    action = request.form.get("action", "")
    try:
        got = reg_actions.decide(
            s=s,
            actor=current_user(),
            competition=competition,
            user=user_id,
            action=action,
            reason=request.form.get("reason", ""),
            via="web",
        )
        flash(f"{got.email}: {got.status}.", "ok")
    except (UploadFieldsInvalid, LifecycleRefused, NotFound) as e:
        flash(f"Not changed: {e.message}.", "error")
    back = request.form.get("status") or None
    return redirect(url_for("competitions.participants", competition=competition, status=back))


@bp.route("/competitions/<competition>/settings", methods=["GET", "POST"])
@organizer_required
def settings(competition: str):
    """Registration, data and team settings (`edit_competition` with `CompetitionSettings`)."""
    s = db()
    c = comp_actions.get_competition(s=s, viewer=current_user(), competition=competition)
    if request.method != "POST":
        data = c.settings.model_dump()
        data["allowed_domains"] = "\n".join(c.settings.allowed_domains)
        data["fact_fields"] = _facts_yaml(data["fact_fields"])
        return _competition_settings_page(c, CompetitionSettingsForm(formdata=None, data=data))
    form = CompetitionSettingsForm()
    if not form.validate():
        return _competition_settings_page(c, form, 400)
    facts = _facts_of(form)
    if form.fact_fields.errors:
        return _competition_settings_page(c, form, 400)
    try:
        wanted = m.CompetitionSettings(
            approval=form.approval.data,
            allowed_domains=form.domains(),
            data_public=form.data_public.data,
            team_size_cap=form.team_size_cap.data or 0,
            join_needs_captain=form.join_needs_captain.data,
            anonymous_board=form.anonymous_board.data,
            fact_fields=facts,
        )
    except ValidationError as e:
        for err in e.errors():
            where = ".".join(str(x) for x in err["loc"])
            target = form.fact_fields if where.startswith("fact_fields") else form.allowed_domains
            target.errors = [*target.errors, f"{where}: {err['msg']}"]
        return _competition_settings_page(c, form, 400)
    comp_actions.edit_competition(
        s=s, actor=current_user(), via="web", competition=competition, settings=wanted
    )
    flash("Settings saved.", "ok")
    return redirect(url_for("competitions.show", competition=competition))


def _facts_yaml(fields: list[dict]) -> str:
    """The fact sheet's fields as the settings form shows them (YAML, without empty keys)."""
    if not fields:
        return ""
    slim = [{k: v for k, v in f.items() if v not in ("", [], None, False)} for f in fields]
    return yaml.safe_dump(slim, sort_keys=False, allow_unicode=True)


def _facts_of(form) -> list | None:
    """The fact sheet's fields the form's YAML declares (a list; empty text: none); a YAML
    problem is put on the field, naming its line."""
    text = form.fact_fields.data or ""
    if not text.strip():
        return []
    try:
        got = load_yaml(text)  # no aliases, bounded nesting: bounded work
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        form.fact_fields.errors = [
            *form.fact_fields.errors,
            f"{where}not YAML ({getattr(e, 'problem', None) or e})",
        ]
        return None
    if not isinstance(got, list):
        form.fact_fields.errors = [*form.fact_fields.errors, "a YAML list of fields (- key: ...)"]
        return None
    return got


def _competition_settings_page(c, form, code: int = 200):
    return render_template(
        "competitions/settings.html", c=c, form=form, field_errors=any(f.errors for f in form)
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
        except NotFound:  # not registered: no preferences to show
            pass
    return {
        # sanitized by server.domain.sanitize when the announcement was saved: safe to insert as
        # HTML
        "announcements": [(a, Markup(a.html)) for a in items],
        "mail_prefs": prefs,
    }


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
        )
    except UploadFieldsInvalid as e:
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
        flash(f"{e.message[:1].upper()}{e.message[1:]}.", "error")
        return redirect(url_for("competitions.show", competition=competition))
    flash("Mail preferences saved.", "ok")
    return redirect(url_for("competitions.show", competition=competition))
