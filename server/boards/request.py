"""The board being built, as one small value: who asks, what of the phase it shows, which declared
board. A new kind of board is a new value (`BoardRequest.final`), not a new flag."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BoardRequest:
    """A board of a phase as `audience` ("public", "team:<id>" or "organizer") may see it.

    `board`: one of the phase's declared boards (tasks.bundle_models.BoardSpec; None: the default
    board, ranked by the task's primary value). `show_private` (organizers only: a preview of the
    final ranking) ranks on the private part before publication; otherwise private scores are read
    only once the phase is published. `include_closed` (organizers' exports) shows the public view
    of a closed board. Scores whose provenance differs from `provenance` (the current gold, task
    and scorer versions) are never ranked. `with_parts` keeps every part's result on each row.
    `team`: that team's rows only (its own row, which `overlay` puts onto the public board)."""

    audience: str = "public"
    show_private: bool = False
    include_closed: bool = False
    provenance: dict | None = None
    with_parts: bool = False
    board: Any = None
    team: int | None = None

    @classmethod
    def final(cls, provenance: dict | None, **more) -> BoardRequest:
        """The final ranking as it is (or will be) published: the public audience's board ranked
        on the private part, a closed board shown, scores of the current versions only."""
        return cls(
            audience="public",
            show_private=True,
            include_closed=True,
            provenance=provenance,
            **more,
        )

    @property
    def organizer(self) -> bool:
        return self.audience == "organizer"

    @property
    def own_team(self) -> int | None:
        """The team asking ("team:<id>"), else None."""
        return int(self.audience.split(":", 1)[1]) if self.audience.startswith("team:") else None

    @property
    def overall(self) -> bool:
        """Whether the board is an overall board (several boards' values combined)."""
        return self.board is not None and getattr(self.board, "overall", None) is not None
