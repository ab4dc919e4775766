"""The organizer pages' world: an organizer and a phase with runs, in a browser."""

from __future__ import annotations

import pytest
from webkit import Browser, make_phase, make_submission, make_user, team_of


@pytest.fixture
def org(app):
    make_user(app, "org@x.org", organizer=True)
    b = Browser(app.test_client())
    b.login("org@x.org")
    return b


@pytest.fixture
def world(app):
    make_user(app, "a@x.org", team="alpha")
    make_user(app, "b@x.org", team="beta")
    dev = make_phase(app, "tric-binary", "dev")
    test = make_phase(app, "tric-binary", "test", public_fraction=0.5)
    a, b = team_of(app, "alpha"), team_of(app, "beta")
    subs = {
        "a_dev": make_submission(app, team=a, phase=dev, scores={"all": 0.7}),
        "b_dev": make_submission(app, team=b, phase=dev, scores={"all": 0.6}),
        "a_test": make_submission(
            app, team=a, phase=test, scores={"public": 0.9, "private": 0.3456}, method="A"
        ),
        "b_test": make_submission(
            app, team=b, phase=test, scores={"public": 0.5, "private": 0.8765}, method="B"
        ),
    }
    return {"dev": dev, "test": test, **subs}
