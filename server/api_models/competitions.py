"""Competitions, registrations, roles and invitations, announcements and mail, bundles."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal, Optional

from pydantic import (
    Field,
    field_validator,
)

from server.api_models.base import Model, Out, PageQuery, Stamp
from server.domain.bounds import CONTROL, one_line_problem
from server.domain.emails import normalize_domain
from server.domain.sanitize import MAX_MARKDOWN
from tasks.bundle_models import FactField, fact_rule_problems

# ----------------------------------------------------------------------------- competitions

SLUG = r"^[a-z0-9][a-z0-9-]{0,63}$"
CompetitionState = Literal["draft", "visible", "archived"]


def _no_control(v: str | None) -> str | None:
    if v is not None and CONTROL.search(v):
        raise ValueError("control characters are not allowed")
    return v


def _one_line(v: str | None) -> str | None:
    """A title: one line (it becomes a mail subject and a heading)."""
    if v is not None and one_line_problem(v):
        raise ValueError(one_line_problem(v))
    return v


class CompetitionPageOut(Out):
    """A page of a competition: its Markdown and the sanitized HTML it renders to."""

    slug: str
    title: str
    position: int
    updated_at: datetime
    body_markdown: str
    html: str = Field(description="The Markdown rendered and sanitized (no script, http(s) links).")


class CompetitionSummary(Out):
    """A competition as a list shows it."""

    id: str = Field(description="The short id, as in /competitions/<id>.")
    title: str
    state: CompetitionState
    created_at: datetime
    tasks: list[str] = Field(description="The ids of its tasks (subtasks).")


DOMAIN = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+")


class CompetitionSettings(Model):
    """How a competition takes participants and teams, and what its boards and submissions show.
    In an edit, only the fields sent change."""

    approval: Optional[Literal["auto", "manual"]] = Field(
        None, description="auto: a registration is approved at once; manual: an organizer decides."
    )
    allowed_domains: Optional[list[str]] = Field(
        None, max_length=100, description="Email domains that may register (empty: any)."
    )
    data_public: Optional[bool] = Field(
        None, description="Downloads without an approved registration."
    )
    team_size_cap: Optional[int] = Field(None, ge=0, le=1000, description="0: no cap.")
    join_needs_captain: Optional[bool] = None
    anonymous_board: Optional[bool] = Field(
        None, description="Team and method names hidden on public boards until publication."
    )
    fact_fields: Optional[list[FactField]] = Field(None, max_length=50)

    @field_validator("allowed_domains")
    @classmethod
    def _domains(cls, v):
        if v is None:
            return v
        out = []
        for d in v:
            d = normalize_domain(d)  # BadEmail, a ValueError, says why
            if not DOMAIN.fullmatch(d):
                raise ValueError(f"{d!r} is not an email domain")
            out.append(d)
        return out

    @field_validator("fact_fields")
    @classmethod
    def _keys(cls, v):
        if v is None:
            return v
        seen = set()
        for f in v:
            if f.key in seen:
                raise ValueError(f"fact field {f.key!r} is declared twice")
            seen.add(f.key)
        problems = fact_rule_problems(v)
        if problems:
            raise ValueError("; ".join(f"{'.'.join(map(str, at))}: {m}" for at, m in problems))
        return v


class CompetitionSettingsOut(Out):
    approval: Literal["auto", "manual"]
    allowed_domains: list[str]
    data_public: bool
    team_size_cap: Optional[int]
    join_needs_captain: bool
    anonymous_board: bool
    terms_version: int = Field(description="Raised whenever the terms page changes.")
    fact_fields: list[FactField]


class CompetitionOut(CompetitionSummary):
    """A competition with its pages, in their order, and its settings."""

    pages: list[CompetitionPageOut]
    settings: CompetitionSettingsOut
    role: Optional[str] = Field(
        None, description="Your role in it (owner, organizer, assessor, admin), if any."
    )
    registration: Optional[str] = Field(
        None, description="Your registration's status (pending, approved, ...), if any."
    )


class CompetitionCreate(Model):
    id: str = Field(pattern=SLUG, json_schema_extra={"examples": ["text-reuse-2027"]})
    title: str = Field(min_length=1, max_length=200, json_schema_extra={"examples": ["Reuse"]})
    state: CompetitionState = "draft"
    tasks: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="Declared tasks that become its subtasks (each in one competition at most).",
    )

    _title = field_validator("title")(_one_line)


class CompetitionEdit(CompetitionSettings):
    """Only the fields sent change."""

    title: Optional[str] = Field(None, min_length=1, max_length=200)
    state: Optional[CompetitionState] = Field(None, json_schema_extra={"examples": ["visible"]})

    _title = field_validator("title")(_one_line)


class CompetitionPageSet(Model):
    """A page's new title and Markdown; `position` orders the pages (kept when left out)."""

    title: str = Field(min_length=1, max_length=200, json_schema_extra={"examples": ["Overview"]})
    body_markdown: str = Field(
        "", max_length=MAX_MARKDOWN, json_schema_extra={"examples": ["# The task\n\nFind reuse."]}
    )
    position: Optional[int] = Field(None, ge=0, le=10_000)

    _title = field_validator("title")(_one_line)


# ----------------------------------------------------------------------------- registrations

RegistrationStatus = Literal["pending", "approved", "rejected", "suspended", "banned"]
DecisionAction = Literal["approve", "reject", "suspend", "ban", "reinstate"]


class RegistrationIn(Model):
    """Register for a competition; a competition with terms needs `accept_terms: true` (of their
    current version)."""

    accept_terms: bool = Field(
        False, strict=True, json_schema_extra={"examples": [True]}, description="JSON true only."
    )
    terms_version: Optional[int] = Field(
        None,
        ge=0,
        le=2**31 - 1,
        description="The version of the terms you read (`current_terms_version`): accepting is "
        "refused (409 `terms_changed`) if they changed since.",
    )


class RegistrationOut(Out):
    """Your registration for a competition, and whether you may download and submit in it."""

    competition: str = Field(description="The competition's short id.")
    registered: bool = Field(description="Whether you have a registration at all.")
    status: Optional[RegistrationStatus] = Field(
        None, description="pending, approved, rejected, suspended or banned; null: none."
    )
    terms_version: int = Field(0, description="The version of the terms you accepted (0: none).")
    current_terms_version: int = Field(description="The terms' current version (0: no terms).")
    terms_url: Optional[str] = Field(None, description="The terms page's path, if there is one.")
    terms_accepted_at: Stamp = None
    registered_at: Stamp = None
    decided_at: Stamp = None
    reason: str = Field("", description="The organizers' reason for their decision.")
    mail_announcements: bool = True
    mail_runs: bool = False
    participating: bool = Field(description="Whether you may download and submit now.")
    code: str = Field("", description="Why not, as a stable name (e.g. terms_changed).")
    message: str = Field("", description="Why not, and what to do, in one line.")


class ParticipantOut(Out):
    """A person registered for a competition, as its organizers see them."""

    user_id: int
    email: str
    status: RegistrationStatus
    terms_version: int
    terms_accepted_at: Stamp
    team: Optional[str] = Field(description="Their team in this competition, if any.")
    registered_at: datetime
    decided_at: Stamp
    reason: str


class ParticipantList(Out):
    """A page of participants, newest registration first; `next_after` continues it."""

    items: list[ParticipantOut]
    next_after: Optional[int] = None


class ParticipantsQuery(PageQuery):
    status: Optional[RegistrationStatus] = None


class ParticipantDecision(Model):
    """An organizer's decision; reject, suspend and ban need a reason (the participant sees it)."""

    reason: str = Field("", max_length=500, json_schema_extra={"examples": ["shared the gold"]})

    _reason = field_validator("reason")(_no_control)


# ---------------------------------------------------------------------------- roles and invitations

RoleName = Literal["owner", "organizer", "assessor"]


class InviteCreate(Model):
    """Invite a person by email to a role in the competition."""

    email: str = Field(
        min_length=3, max_length=320, json_schema_extra={"examples": ["ada@example.org"]}
    )
    role: RoleName = Field(json_schema_extra={"examples": ["organizer"]})

    _email = field_validator("email")(_no_control)


class InviteOut(Out):
    """An invitation made: what happened to it (`status`) and, where it is not mailed, its signed
    link."""

    id: int
    competition: str
    email: str
    role: RoleName
    status: Literal["mailed", "link"] = Field(
        description="mailed: the link was queued by mail; link: this server sends no mail, hand "
        "the link over yourself (whoever accepts it signed in gets the role)."
    )
    link: Optional[str] = Field(
        None,
        description="The signed link that accepts the invitation: only where you hand it over "
        "yourself (`link`); a mailed link goes to the address alone.",
    )
    expires_at: datetime
    message: str


class InviteAccept(Model):
    token: str = Field(min_length=1, max_length=2000, description="The token of the link.")


class InviteShown(Out):
    """What an invitation link offers."""

    competition: str
    title: str
    email: str
    role: RoleName
    expires_at: datetime
    yours: bool = Field(description="Whether it is for the signed-in account's address.")


class InviteAccepted(Out):
    competition: str
    title: str
    role: RoleName
    email: str


class RoleOut(Out):
    user_id: int
    email: str
    role: RoleName
    since: datetime


class PendingInvite(Out):
    id: int
    email: str
    role: RoleName
    created_at: datetime
    expires_at: datetime


class RolesOut(Out):
    """Who has which role in a competition, and its pending invitations."""

    competition: str
    people: list[RoleOut]
    invites: list[PendingInvite]
    may_change: bool = Field(description="Whether you may invite and revoke (an owner).")


class RoleRevoked(Out):
    competition: str
    email: str
    role: Optional[RoleName] = Field(None, description="The role taken away, if there was one.")
    invites_cancelled: int


# ----------------------------------------------------------------------------- announcements, mail


class AnnouncementCreate(Model):
    """An announcement: shown on the competition page and mailed to its approved participants
    (those who did not opt out)."""

    title: str = Field(
        min_length=1, max_length=200, json_schema_extra={"examples": ["Test data released"]}
    )
    body_markdown: str = Field(
        min_length=1,
        max_length=MAX_MARKDOWN,
        json_schema_extra={"examples": ["The test phase is open until **31 May**."]},
    )

    _title = field_validator("title")(_one_line)


class AnnouncementOut(Out):
    """An announcement, its Markdown and the sanitized HTML it renders to."""

    id: int
    competition: str
    title: str
    body_markdown: str
    html: str
    created_at: datetime
    recipients: int = Field(description="The participants it was mailed to.")


class MailPreferences(Model):
    """What a registered person is mailed in a competition; a field left out stays as it is."""

    announcements: Optional[bool] = Field(
        None, description="The organizers' announcements (on unless turned off)."
    )
    runs: Optional[bool] = Field(
        None, description="A notice when one of your runs is scored or fails (off unless on)."
    )
    pending_registrations: Optional[bool] = Field(
        None,
        description="Owners and organizers: an hourly digest of registrations waiting for a "
        "decision (on unless turned off).",
    )


class MailPreferencesOut(Out):
    competition: str
    announcements: bool
    runs: bool
    pending_registrations: Optional[bool] = Field(
        None, description="Owners and organizers only (left out for others)."
    )


# ----------------------------------------------------------------------------- bundles


class BundleForm(Model):
    """A competition bundle: a zip of `competition.yaml`, its pages and its tasks' files
    (`curl -F bundle=@bundle.zip`)."""

    bundle: bytes = Field(description="The bundle, a .zip (see the documentation's Bundles page).")
    update: Literal["0", "1"] = Field(
        "0",
        description="1: an edited bundle of an existing competition (its owners and organizers): "
        "each changed task gets a new version or its texts changed (docs/bundles.md).",
    )
    reason: str = Field("", max_length=2000, description="With update: why.")


class BundleQuery(Model):
    gold: Literal["0", "1"] = Field(
        "0", description="1: include the hidden gold (organizers; a clone needs it)."
    )


class CloneIn(Model):
    """A clone's short id; its tasks' ids get it as a suffix."""

    id: str = Field(pattern=SLUG, json_schema_extra={"examples": ["reuse-2028"]})
