"""The organizer's forms, through WTForms: each field parses and checks what was typed, keeps it
when something is wrong and says what (per field); the lifecycle's own refusals (a window that
closes before it opens, a fixed partition) are shown on the form too.

CSRF is checked for every form by the app-wide CSRFProtect (server/web/setup.py), so the
forms themselves do not check it a second time.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

import yaml
from flask_wtf import FlaskForm
from flask_wtf.file import FileField, FileRequired
from wtforms import (
    BooleanField,
    Field,
    FloatField,
    HiddenField,
    IntegerField,
    SelectField,
    SelectMultipleField,
    StringField,
    TextAreaField,
)
from wtforms.validators import InputRequired, Length, NumberRange, Optional, ValidationError
from wtforms.widgets import TextInput

from server import api_models as m
from server.domain.bounds import INT_MAX
from server.domain.sanitize import MAX_MARKDOWN, nesting_problem

TZ = "UTC"
FORMATS = ("%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d")


def parse_utc(text: str) -> datetime | None:
    """A time as an organizer types it: `2026-01-31 23:59`, `2026-01-31T23:59Z`, `2026-01-31`
    (midnight) or with an offset (`+02:00`, converted); UTC when none is given. Naive UTC back; None
    when empty."""
    text = " ".join((text or "").split())
    if not text:
        return None
    t = text.replace("T", " ")
    if t.endswith(("Z", "z")):
        t = t[:-1].rstrip()
    if t.upper().endswith(" UTC"):
        t = t[:-4]
    try:
        dt = datetime.fromisoformat(t)
    except ValueError:
        dt = None
        for fmt in FORMATS:
            try:
                dt = datetime.strptime(t, fmt)
                break
            except ValueError:
                continue
        if dt is None:
            raise ValueError(
                f"{text!r} is not a date and time: write it as YYYY-MM-DD HH:MM ({TZ}), e.g. "
                f"{datetime.now(timezone.utc):%Y-%m-%d} 23:59"
            ) from None
    if dt.tzinfo is not None:
        dt = dt.astimezone(timezone.utc).replace(tzinfo=None)
    return dt


class UtcDateTimeField(Field):
    """A date and time in UTC, typed as text (what was typed stays in the field when it is
    wrong)."""

    widget = TextInput()

    def __init__(self, label=None, validators=None, **kw):
        render_kw = {
            "placeholder": "YYYY-MM-DD HH:MM",
            "autocomplete": "off",
            "inputmode": "numeric",
            "aria-describedby": "tz-note",
            **kw.pop("render_kw", {}),
        }
        super().__init__(label, validators, render_kw=render_kw, **kw)

    def _value(self):
        if self.raw_data:
            return " ".join(self.raw_data)
        return self.data.strftime("%Y-%m-%d %H:%M") if self.data else ""

    def process_formdata(self, valuelist):
        if valuelist:
            try:
                self.data = parse_utc(valuelist[0])
            except ValueError as e:
                self.data = None
                raise ValueError(str(e)) from None


def _limit(label: str):
    return IntegerField(
        label,
        validators=[
            Optional(),
            NumberRange(min=0, message="a limit is 0 or more (empty: no limit)"),
            NumberRange(max=INT_MAX, message=f"a limit is at most {INT_MAX}"),
        ],
        render_kw={"min": 0, "max": INT_MAX, "inputmode": "numeric"},
    )


class BoardsField(TextAreaField):
    """A phase's declared boards as the YAML of a bundle's `boards:` list (empty: the default
    board only); the lifecycle checks them against the task and the fact sheet."""

    def process_data(self, value):
        if isinstance(value, list):
            value = yaml.safe_dump(value, sort_keys=False, allow_unicode=True) if value else ""
        self.data = value or ""

    def boards(self) -> list:
        text = (self.data or "").strip()
        if not text:
            return []
        if len(text) > 50_000:
            raise ValidationError("at most 50,000 characters")
        try:
            got = yaml.safe_load(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise ValidationError(f"not YAML{where}") from None
        if not isinstance(got, list):
            raise ValidationError("a YAML list of boards (- name: ..., title: ..., ranking: ...)")
        return got

    def pre_validate(self, form):
        self.boards()


class PhaseForm(FlaskForm):
    class Meta:
        csrf = False  # checked app-wide

    opens_at = UtcDateTimeField(f"Opens ({TZ}; empty: open now)")
    closes_at = UtcDateTimeField(f"Closes ({TZ}; empty: no end)")
    inputs_at = UtcDateTimeField(f"Inputs released ({TZ}; empty: when it opens)")
    daily_limit = _limit("Daily limit per team (empty: none)")
    total_limit = _limit("Total limit per team (empty: none)")
    concurrent_limit = _limit("Submissions running at once per team (empty: no limit)")
    public_fraction = FloatField(
        "Public fraction of the gold (fixed once scored)",
        validators=[
            InputRequired("give a number in (0, 1]"),
            NumberRange(min=0.0001, max=1, message="a number in (0, 1]"),
        ],
        render_kw={"step": "0.01", "min": "0.01", "max": "1", "inputmode": "decimal"},
    )
    release_rule = SelectField(
        "Public scores shown on the live board (exact; ladder: a new best only when it beats the "
        "team's best by η; ladder-paired: a new best only when a paired bootstrap says it beats "
        "the team's best; rounded: to the resolution of the interval)",
        choices=["exact", "ladder", "ladder-paired", "rounded"],
        default="exact",
    )
    release_eta = FloatField(
        "η of the ladder",
        validators=[Optional(), NumberRange(min=0.0001, max=0.9999, message="a number in (0, 1)")],
        render_kw={"step": "0.001", "min": "0.001", "max": "0.999", "inputmode": "decimal"},
    )
    boards = BoardsField(
        "Boards beside the default one (YAML, as a bundle's phase declares them; empty: the "
        "default board only)",
        render_kw={"rows": 8, "spellcheck": "false"},
    )

    def validate_closes_at(self, field):
        if field.data and self.opens_at.data and field.data <= self.opens_at.data:
            raise ValidationError("a phase closes after it opens")

    def with_release_rule(self, phase):
        """The phase's release rule shown in its two fields."""
        rule = phase.release_rule or "exact"
        self.release_rule.data = rule["rule"] if isinstance(rule, dict) else rule
        self.release_eta.data = rule.get("eta") if isinstance(rule, dict) else None
        return self

    def changes(self, phase) -> dict:
        out = {
            k: getattr(self, k).data
            for k in (
                "opens_at",
                "closes_at",
                "inputs_at",
                "daily_limit",
                "total_limit",
                "concurrent_limit",
            )
        }
        if float(self.public_fraction.data) != float(phase.public_fraction):
            out["public_fraction"] = float(self.public_fraction.data)
        boards = self.boards.boards()
        if boards != list(phase.boards or ()):
            out["boards"] = boards
        rule = self.release_rule.data or "exact"
        if rule == "ladder" and self.release_eta.data:
            rule = {"rule": "ladder", "eta": float(self.release_eta.data)}
        if rule != (phase.release_rule or "exact"):
            out["release_rule"] = rule
        return out


class NewPhaseForm(FlaskForm):
    class Meta:
        csrf = False

    name = StringField("Name", validators=[InputRequired("give the phase a name"), Length(max=32)])
    split = StringField("Split", validators=[InputRequired()])


class ConfirmForm(FlaskForm):
    """The second step of an action that is hard to take back: the page says what it will do."""

    class Meta:
        csrf = False

    confirm = BooleanField(
        "I have read what this does; do it.", false_values=("", "false", "no", "0")
    )
    next = HiddenField()


class HideForm(ConfirmForm):
    action = HiddenField(default="hide")
    reason = StringField(
        "Reason (shown to the team)", validators=[Length(max=500)], render_kw={"maxlength": 500}
    )


class TrackForm(FlaskForm):
    """An organizer moves a run to another track (server.actions.submissions.move_track)."""

    class Meta:
        csrf = False  # the app-wide CSRFProtect checks it

    track = StringField("Move to track", validators=[Length(max=200)])
    reason = StringField(
        "Reason (recorded in the audit log)",
        validators=[Length(max=500)],
        render_kw={"maxlength": 500},
    )
    field = HiddenField()


class RescoreAllForm(ConfirmForm):
    phase = HiddenField()
    include_invalid = BooleanField("Also files that failed validation (they would fail again)")


def _declared(name: str):
    """The form field of upload field `name`, from its one declaration (m.UploadFields: its title
    the label, its bound the input's maxlength, a long text a text area, a yes/no a checkbox)."""
    f = m.UploadFields.model_fields[name]
    if f.annotation is bool:
        return BooleanField(f.title, default=f.default)
    size = next((c.max_length for c in f.metadata if hasattr(c, "max_length")), None)
    extra = f.json_schema_extra or {}
    shown = {"maxlength": size, **({"type": extra["input"]} if "input" in extra else {})}
    if size is not None and size > 1000:
        return TextAreaField(f.title, render_kw={**shown, "rows": 4})
    return StringField(f.title, render_kw=shown)


class UploadForm(FlaskForm):
    """What every upload carries, a file's or a system's: what was typed stays when something is
    wrong (the file must be chosen again: browsers never refill a file input). Its fields are
    those of the one declaration (m.UploadFields, `DECLARED`), checked there, the API's too: the
    page only shows what it says."""

    class Meta:
        csrf = False

    DECLARED = (*m.UploadFields.carried(), "primary")  # the partial shows them in this order
    phase = SelectField("Phase", validate_choice=True)


for _name in UploadForm.DECLARED:  # WTForms' forms take fields set on the class
    setattr(UploadForm, _name, _declared(_name))


class SubmitForm(UploadForm):
    """A participant's prediction file."""

    file = FileField("Prediction file", validators=[FileRequired("choose a prediction file")])


class SystemForm(UploadForm):
    """A team's system: a zip with system.yaml (docs/blind-runs.md)."""

    code = FileField("System (a zip with system.yaml)", validators=[FileRequired("choose a zip")])


class CompetitionPageForm(FlaskForm):
    """A competition's page: its id in the address, its title and its Markdown (sanitized when
    shown)."""

    class Meta:
        csrf = False  # checked app-wide

    page = StringField(
        "Page id (in the address: lowercase letters, digits, '-')",
        validators=[InputRequired("give the page an id, e.g. overview"), Length(max=64)],
        render_kw={"maxlength": 64},
    )
    title = StringField(
        "Title",
        validators=[InputRequired("give the page a title"), Length(max=200)],
        render_kw={"maxlength": 200},
    )
    body_markdown = TextAreaField(
        "Text (Markdown; scripts, images and non-http(s) links are removed)",
        validators=[Length(max=MAX_MARKDOWN)],
        render_kw={"rows": 16},
    )
    position = IntegerField(
        "Position among the pages (empty: keep, or last for a new page)",
        validators=[Optional(), NumberRange(min=0, max=10_000)],
    )


class CompetitionForm(FlaskForm):
    """A competition's title and state (draft: administrators only; archived: still readable)."""

    class Meta:
        csrf = False  # checked app-wide

    title = StringField(
        "Title",
        validators=[InputRequired("give the competition a title"), Length(max=200)],
        render_kw={"maxlength": 200},
    )
    state = SelectField(
        "State (draft: site administrators only; visible: on the home page; archived: readable, "
        "no longer listed)",
        choices=["draft", "visible", "archived"],
        validate_choice=True,
    )


class NewCompetitionForm(FlaskForm):
    """A site administrator's new competition: its short id, title and tasks (they become its
    owner)."""

    class Meta:
        csrf = False  # checked app-wide

    competition = StringField(
        "Short id (lowercase letters, digits and '-'; in every address)",
        validators=[InputRequired("give the competition a short id"), Length(max=64)],
        render_kw={"maxlength": 64, "autocapitalize": "none", "spellcheck": "false"},
    )
    title = StringField(
        "Title",
        validators=[InputRequired("give the competition a title"), Length(max=200)],
        render_kw={"maxlength": 200},
    )
    tasks = SelectMultipleField(
        "Tasks (its subtasks; a task made a competition of its own is taken over)",
        choices=[],
        validate_choice=True,
    )


# ----------------------------------------------------------------------------- registrations


class CompetitionSettingsForm(FlaskForm):
    """How a competition takes participants and teams (server.actions.competitions.SETTINGS, less
    the fact sheet, which the API edits)."""

    class Meta:
        csrf = False  # checked app-wide

    approval = SelectField(
        "Registration (auto: approved at once; manual: an organizer approves each one)",
        choices=["auto", "manual"],
        validate_choice=True,
    )
    allowed_domains = TextAreaField(
        "Email domains that may register, one per line (empty: any)",
        validators=[Length(max=10_000)],
        render_kw={"rows": 4},
    )
    data_public = BooleanField("Data public (downloads without an approved registration)")
    team_size_cap = IntegerField(
        "Team size cap (empty or 0: no cap)",
        validators=[Optional(), NumberRange(min=0, max=1000)],
    )
    join_needs_captain = BooleanField("Joining a team needs its captain's approval")
    anonymous_board = BooleanField("Anonymous board (names hidden until the ranking is published)")
    fact_fields = TextAreaField(
        "Fact sheet: the fields a submission carries, in YAML (a list of key, label, kind (text, "
        "long_text, choice, yes_no, url), choices, required, phases, help)",
        validators=[Length(max=50_000)],
        render_kw={"rows": 12, "spellcheck": "false"},
    )

    def domains(self) -> list[str]:
        return [d.strip() for d in (self.allowed_domains.data or "").splitlines() if d.strip()]


# ---------------------------------------------------------------------------- roles and invitations


class InviteForm(FlaskForm):
    """An owner's invitation of a person by email to a role in the competition."""

    class Meta:
        csrf = False  # checked app-wide

    email = StringField(
        "Email address",
        validators=[InputRequired("give the address to invite"), Length(max=320)],
        render_kw={"maxlength": 320, "type": "email"},
    )
    role = SelectField(
        "Role (owner: also invites and removes people; organizer: runs the competition; "
        "assessor: assesses submissions)",
        choices=["organizer", "assessor", "owner"],
        validate_choice=True,
    )


# ----------------------------------------------------------------------------- announcements, mail


class AnnouncementForm(FlaskForm):
    """An organizer's announcement: shown on the competition page, mailed to its participants."""

    class Meta:
        csrf = False  # checked app-wide

    title = StringField(
        "Title",
        validators=[InputRequired("give the announcement a title"), Length(max=200)],
        render_kw={"maxlength": 200},
    )
    body_markdown = TextAreaField(
        "Text (Markdown; scripts, images and non-http(s) links are removed)",
        validators=[InputRequired("write the announcement"), Length(max=MAX_MARKDOWN)],
        render_kw={"rows": 12},
    )


class MailPreferencesForm(FlaskForm):
    """What a registered person is mailed in a competition."""

    class Meta:
        csrf = False  # checked app-wide

    announcements = BooleanField("Mail me the organizers' announcements")
    runs = BooleanField("Mail me when one of my runs is scored or fails")


# ----------------------------------------------------------------------------- assessment campaigns


class CampaignForm(FlaskForm):
    """An organizer's new assessment campaign on a phase (server.actions.campaigns.open_campaign
    checks the rest: the assessors' roles, the labels, the pool)."""

    class Meta:
        csrf = False  # checked app-wide

    depth = IntegerField(
        "Depth (links: the top K links per query of each ranked run; pair tasks: items per "
        "stratum)",
        validators=[
            InputRequired("give the depth, e.g. 10"),
            NumberRange(min=1, max=INT_MAX, message="a whole number, at least 1"),
        ],
        render_kw={"min": 1, "inputmode": "numeric"},
    )
    per_item = IntegerField(
        "Assessors per item",
        default=3,
        validators=[
            InputRequired("give the number of assessors per item"),
            NumberRange(min=1, max=1000, message="a whole number, at least 1"),
        ],
        render_kw={"min": 1, "inputmode": "numeric"},
    )
    assessors = TextAreaField(
        "Assessors' email addresses (one a line or comma-separated; each has the assessor role)",
        validators=[InputRequired("name at least one assessor"), Length(max=20_000)],
        render_kw={"rows": 4, "autocapitalize": "none", "spellcheck": "false"},
    )
    labels = TextAreaField(
        "Labels, one a line; the first nine get the keys 1 to 9 (empty: reference, no reference)",
        validators=[Length(max=5_000)],
        render_kw={"rows": 3},
    )
    guideline = TextAreaField(
        "Guideline for the assessors (Markdown; scripts, images and non-http(s) links are removed)",
        validators=[Length(max=MAX_MARKDOWN)],
        render_kw={"rows": 8},
    )
    seed = IntegerField(
        "Seed (empty: drawn and recorded)",
        validators=[Optional(), NumberRange(min=0, max=INT_MAX, message="0 or more")],
        render_kw={"min": 0, "inputmode": "numeric"},
    )
    allow_participants = BooleanField(
        "Open it although an assessor takes part in the competition (a team or runs of their own: "
        "they know what the pool holds of their runs)"
    )

    def emails(self) -> list[str]:
        return [x for x in re.split(r"[\s,;]+", self.assessors.data or "") if x]

    def label_list(self) -> list[str] | None:
        got = [x.strip() for x in (self.labels.data or "").splitlines() if x.strip()]
        return got or None

    def validate_guideline(self, field):
        problem = nesting_problem(field.data or "")
        if problem:
            raise ValidationError(problem)
