"""Users, tokens and teams."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import (
    Field,
    field_validator,
)

from server.api_models.base import Model, Out, Stamp
from server.domain.bounds import one_line_problem

# ----------------------------------------------------------------------------- users and teams


class TeamRef(Out):
    id: int
    name: str


class Me(Out):
    id: int
    email: str
    is_admin: bool = Field(description="A site administrator: creates competitions.")
    is_organizer: bool = Field(description="An organizer of at least one competition.")
    team: Optional[TeamRef] = Field(description="Your team of every competition, if any.")


class Member(Out):
    id: int
    email: str
    role: str = Field("member", description="captain or member")
    status: str = Field("active", description="active, or pending: waits for the captain")


class TeamOut(Out):
    id: int
    name: str
    competition: Optional[str] = Field(
        None, description="The competition it is a team of; none: every competition."
    )
    invite_code: str = Field(
        description="Share it with teammates; `POST /team/invite` replaces it."
    )
    members: list[Member]
    created: Stamp


_COMPETITION = Field(
    None,
    pattern=r"^[a-z0-9][a-z0-9-]{0,63}$",
    description="The competition (its short id); none: your team of every competition.",
)


class TeamQuery(Model):
    competition: Optional[str] = _COMPETITION


class MemberDecision(Model):
    competition: Optional[str] = _COMPETITION
    approve: Literal["0", "1"] = "1"


class TeamCreate(Model):
    name: str = Field(
        min_length=1, max_length=120, json_schema_extra={"examples": ["Team Lexical"]}
    )
    competition: Optional[str] = _COMPETITION

    @field_validator("name")
    @classmethod
    def _one_line(cls, v: str) -> str:
        if one_line_problem(v):
            raise ValueError(one_line_problem(v))
        return v


class TeamJoin(Model):
    invite_code: str = Field(
        min_length=1, max_length=64, json_schema_extra={"examples": ["code-alpha"]}
    )
    competition: Optional[str] = _COMPETITION


class Left(Out):
    left_team: int


# ----------------------------------------------------------------------------- signing up


class SignupIn(Model):
    email: str = Field(
        min_length=3, max_length=320, json_schema_extra={"examples": ["new@example.org"]}
    )
    competition: Optional[str] = Field(
        None,
        pattern=r"^[a-z0-9][a-z0-9-]{0,63}$",
        description="The competition you come for: its allowed domains are checked now, and the "
        "site's first page after signing up leads to it.",
    )


class SignupStarted(Out):
    email: str
    message: str = Field(description="The same whether or not the address has an account.")


class SignupFinishIn(Model):
    token: str = Field(
        min_length=1, max_length=2000, description="The token mailed to the address."
    )
    password: str = Field(min_length=1, max_length=1024, description="At least 8 characters.")


class SignupDone(Out):
    email: str
    token: str = Field(description="An API token for the new account (shown once).")
    competition: Optional[str] = Field(
        None, description="The competition you came for: `palimpsest register` it next."
    )
