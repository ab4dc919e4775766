"""Who may see which score: the one answer to "may this viewer see this part of this run's score?"

A run's scores come in parts: "all" (a split without a private part), or "public" and "private"
(a split whose gold is hidden), and "whole" beside them (the whole split) when the phase publishes
on it; "whole" is hidden exactly as "private" is. The rule, for every page, API route, export and
command:

| viewer          | public / all | private, before publication | private, after publication |
|-----------------|--------------|-----------------------------|----------------------------|
| organizer       | yes          | yes                         | yes                        |
| the run's team  | yes          | no                          | runs made before it        |
| anyone else     | yes          | no                          | runs made before it        |

A run made after publication (a reopened phase) never shows its private part to anyone but
organizers: the published ranking already named the private scores of the runs before it, and a
new run's private score would reveal the hidden gold. Whether a viewer may see the run at all (its
team, a public board row) is decided before this, by who owns the run and the board's rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from server import models  # other subjects' tables: models.X, loaded when first used
from server.domain import people

ANONYMOUS, TEAM, ORGANIZER = "anonymous", "team", "organizer"
# the part a score is shown on, best first: the private part (or the whole split, for a phase that
# publishes on it) ranks once it may be shown
PREFERENCE = ("whole", "private", "all", "public")
# the parts hidden until publication: the private part, and the whole split of a phase that
# publishes on it (`Phase.published_on`; its score would reveal the private part's)
HIDDEN = ("private", "whole")


@dataclass(frozen=True)
class Viewer:
    """Who is looking: an organizer, a member of a team (its id), or anyone."""

    kind: str = ANONYMOUS
    team_id: int | None = None

    @property
    def is_organizer(self) -> bool:
        return self.kind == ORGANIZER

    @property
    def audience(self) -> str:
        """Whose view of a board this is, as the render cache keys it: "organizer", "team:<id>"
        (its own runs not shown publicly too) or "public"."""
        if self.kind == ORGANIZER:
            return "organizer"
        return f"team:{self.team_id}" if self.team_id is not None else "public"


def viewer_of(user, s=None, task_id: str | None = None) -> Viewer:
    """The viewer a signed-in user (or None) is for a task: an organizer of its competition, a
    member of a team there, or anyone. Without a task (or a session): a site administrator is an
    organizer, anyone else is seen through their account-wide team."""
    if user is None:
        return Viewer()
    if s is None or task_id is None:
        if people.is_admin(user):
            return Viewer(ORGANIZER)
        team = people.team_of(s, user, None) if s is not None else None
        return Viewer(TEAM, team.id) if team is not None else Viewer()
    team_id = people.team_id_for_task(s, user, task_id)
    if people.organizes_task(s, user, task_id):
        return Viewer(ORGANIZER, team_id)
    return Viewer(TEAM, team_id) if team_id is not None else Viewer()


def private_released(phase: models.Phase | None, created_at: datetime | None) -> bool:
    """Whether the private part of a run made at `created_at` is public: its phase's ranking is
    published and the run was made before publication."""
    return (
        phase is not None
        and phase.published_at is not None
        and created_at is not None
        and created_at <= phase.published_at
    )


def may_see(
    viewer: Viewer, phase: models.Phase | None, created_at: datetime | None, part: str
) -> bool:
    """Whether `viewer` may see the `part` score of a run of `phase` made at `created_at`."""
    if part not in HIDDEN:
        return True
    return viewer.is_organizer or private_released(phase, created_at)


def shown_part(
    viewer: Viewer, phase: models.Phase | None, created_at: datetime | None, parts
) -> str | None:
    """The part a run's headline score is shown on for this viewer, among the `parts` it has:
    the private part once it may be seen and the phase is published (or for an organizer's
    preview), else the whole gold, else the public part; None when it has none."""
    for part in PREFERENCE:
        if part not in parts:
            continue
        if part in HIDDEN and not (
            private_released(phase, created_at)
            or (viewer.is_organizer and phase is not None and phase.published_at is not None)
        ):
            continue
        return part
    return None
