"""What a few pages say, as a newcomer reads them: the team page shows each scored run's primary
score as "My submissions" does; a deleted run's page says it is on no board; the organizer's
dashboard writes a phase's window to the minute."""

from __future__ import annotations

import re
from datetime import datetime

from sqlmodel import Session
from webkit import Browser, engine_of, make_phase, make_submission, make_user, team_of

from server.models import Submission, utcnow


def test_the_team_page_shows_the_primary_score_my_submissions_shows(app):
    make_user(app, "ann@x.org", team="Lexica")
    dev = make_phase(app, "tric-binary", "dev")
    sub = make_submission(app, team=team_of(app, "Lexica"), phase=dev, scores={"all": 0.6123})
    b = Browser(app.test_client())
    b.login("ann@x.org")
    mine = b.get("/submissions").get_data(as_text=True)
    team = b.get("/team/").get_data(as_text=True)
    assert "0.6123" in mine and "0.6123" in team, team[:3000]
    # the team deletes it: its page says it is on no board
    with Session(engine_of(app)) as s:
        row = s.get(Submission, sub.id)
        row.removed_at, row.removed_by_team = utcnow(), True
        s.add(row)
        s.commit()
    page = b.get(f"/submissions/{sub.id}").get_data(as_text=True)
    board = re.search(r"<dt>Public leaderboard</dt><dd>(.*?)</dd>", page, re.S).group(1)
    assert board.strip().startswith("not shown: deleted (on no board)"), board


def test_the_dashboard_writes_a_window_to_the_minute(app):
    make_user(app, "org@x.org", organizer=True)
    make_phase(
        app,
        "tric-binary",
        "dev",
        opens_at=datetime(2026, 1, 2, 3, 4, 5, 678901),
        closes_at=datetime(2026, 2, 3, 4, 5, 6, 789012),
    )
    b = Browser(app.test_client())
    b.login("org@x.org")
    page = b.get("/organizer/").get_data(as_text=True)
    assert "2026-01-02 03:04 → 2026-02-03 04:05" in page
    assert "678901" not in page and "789012" not in page
