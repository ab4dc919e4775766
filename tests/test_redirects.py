"""`next=` leads only to same-site relative paths; anything else goes to `/`,
never to another site and never a 500 (the login page and the organizer's `_back`)."""

from __future__ import annotations

import pytest
from webkit import PASSWORD, make_user

from server.models import Phase
from server.web.auth import safe_next

HOSTILE = [
    "//evil.example/x",
    "/%09/evil.example",
    "/\t/evil.example",
    "/%0A/x",
    "/\n/x",
    "/%0D%0A/x",
    "/\\evil.example",
    "/%5Cevil.example",
    "\\\\evil.example",
    "https://evil.example/",
    "javascript:alert(1)",
    "http:/evil.example",
    "/%2F/evil.example",
    "/%252F/evil.example",
    "/%2509/evil.example",
    "/\x00/x",
    "/%00/x",
    "/\x7f/x",
    "/\u0085/x",
    " /x",
    "evil.example",
    "",
    "/%E2%80%A8/x",
]


@pytest.mark.parametrize("target", HOSTILE)
def test_safe_next_refuses(target):
    assert safe_next(target) == "/"


@pytest.mark.parametrize(
    "target", ["/", "/submissions", "/tasks/trac?phase=dev&x=%2Fa", "/team/#m", "/tasks/caf%C3%A9"]
)
def test_safe_next_keeps_local_paths(target):
    assert safe_next(target) == target


@pytest.mark.parametrize(
    "query",
    [
        "/%09/evil.example",
        "/%0A/x",
        "//evil.example",
        "/%5C%5Cevil.example",
        "https://evil.example",
        "/%0D%0ASet-Cookie:%20x=1",
    ],
)
def test_login_next_goes_home_never_elsewhere_nor_500(app, browser, query):
    make_user(app, "a@b.org")
    r = browser.c.post(
        f"/auth/login?next={query}",
        data={"email": "a@b.org", "password": PASSWORD, "csrf_token": browser.token()},
    )
    assert r.status_code == 302, r.status_code
    assert r.headers["Location"] == "/", r.headers["Location"]
    assert "Set-Cookie: x" not in str(r.headers)


def test_organizer_back_refuses_hostile_next(app, browser):
    make_user(app, "org@x.org", organizer=True)
    from sqlmodel import Session
    from webkit import engine_of

    with Session(engine_of(app)) as s:
        p = Phase(task_id="tric-binary", name="dev", split="dev")
        s.add(p)
        s.commit()
        pid = p.id
    browser.login("org@x.org")
    for target, where in (
        ("/%09/evil.example", "/organizer/"),
        ("/\n/x", "/organizer/"),
        ("//evil.example", "/organizer/"),
        ("/organizer/queue", "/organizer/queue"),
    ):
        r = browser.post(f"/organizer/phases/{pid}/actions/hide-board", {"next": target})
        assert r.status_code == 302 and r.headers["Location"] == where, (
            target,
            r.headers.get("Location"),
        )
