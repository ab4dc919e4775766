"""Every page as a person meets it: `palimpsest serve --demo` on a fresh data directory, crawled in
headless Chromium as an anonymous visitor, a participant who registers through the forms, and the
demo organizer, each page at 1366 px and at 390 px (a phone). Before the organizer's turn the
demo competition gets 50 more participants (half waiting for a decision) and 120 more runs (200
in the full crawl: more than the organizer's submissions page shows at once either way), so
that its participants page and the organizer's submissions page are crawled as a busy task has
them.

A page fails the crawl when the browser's console holds an error (a Content-Security-Policy
violation, a failed request such as a missing favicon, a script error) or when the page is wider
than the window. The participant's own upload must turn from queued to scored on its submission
page and on "My submissions" without a reload. A screenshot of every page at both widths is kept
under $PALIMPSEST_SCREENSHOTS (default: screenshots/ in the clone), named role-width-page.png;
under CI=true only where PALIMPSEST_SCREENSHOTS is set (the checks are the same either way).

The suite crawls a seeded sample of each role's pages: the pages the test names, then SAMPLE more
drawn from the links found so far ($PALIMPSEST_CRAWL_SEED, default 0, draws another sample; a
failure names its seed). The full crawl, every page up to 45 a role in the order found, is
`PALIMPSEST_CRAWL=full python -m pytest -q -n 0 tests/test_crawl.py` (benchmarks/crawl.py times
it).
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import browserkit
import pytest
from browserkit import WIDTHS, _errors, _go, _width

from tests.conftest import REPO

# the fixtures the tests below request, from the helper module that holds them
driver = browserkit.driver

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SHOTS = Path(os.environ.get("PALIMPSEST_SCREENSHOTS", REPO / "screenshots")) / "crawl"
# the screenshots are for a person to look at: taken where one is asked for
# (PALIMPSEST_SCREENSHOTS) and outside CI, whose clone nobody opens; a failure's always
SHOOT = "PALIMPSEST_SCREENSHOTS" in os.environ or os.environ.get("CI") != "true"
# links that are files, not pages, or that would change what the crawl sees
SKIP = re.compile(
    r"\.(zip|csv|json|tex|pdf|svg|gz)(\?|$)|/export|/api/|/plot\.|/auth/reset/|/auth/register/"
)
FULL = os.environ.get("PALIMPSEST_CRAWL") == "full"
SEED = int(os.environ.get("PALIMPSEST_CRAWL_SEED", "0"))
SAMPLE = 8  # pages a role beyond those the test names, drawn with SEED
PAGES_PER_ROLE = 45  # the full crawl's bound
# the busy demo competition: participants added, and runs (more than the organizer's submissions
# page shows at once, so it has its next page)
CROWD = {"participants": 50, "runs": 200 if FULL else 120}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def demo_server(tmp_path_factory):
    """`palimpsest serve --demo` (web app, embedded Redis, a worker) on a fresh data directory."""
    import psutil

    tmp = tmp_path_factory.mktemp("crawl")
    home, port = tmp / "h", _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(PALIMPSEST_HOME=str(home), PYTHONPATH=str(REPO))
    log = open(tmp / "serve.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--demo", "--port", str(port)],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url + "/", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        else:
            raise AssertionError((tmp / "serve.log").read_text()[-3000:])
        yield url, home
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        for p in psutil.process_iter(["cmdline"]):  # only what this test started, by its home
            if str(home) in " ".join(p.info["cmdline"] or []):
                try:
                    p.kill()
                except psutil.Error:
                    pass


def _settle(d) -> None:
    end = time.time() + 10
    while time.time() < end and d.execute_script("return document.readyState") != "complete":
        time.sleep(0.1)


def _shot_name(role: str, width: str, url: str) -> str:
    parts = urlsplit(url)
    slug = re.sub(r"[^A-Za-z0-9]+", "-", (parts.path + "-" + parts.query)).strip("-") or "home"
    return f"{role}-{width}-{slug[:80]}.png"


def _pattern(url: str) -> str:
    """Pages that differ only by a number are one page to the crawl (one submission of many)."""
    parts = urlsplit(url)
    path = re.sub(r"/\d+", "/N", parts.path)
    query = re.sub(r"=\d+", "=N", parts.query)
    return path + ("?" + query if query else "")


def _links(d, base: str) -> list[str]:
    hrefs = d.execute_script(
        "return Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"
    )
    out = []
    for h in hrefs:
        h = urljoin(base, h).split("#")[0]
        if h.startswith(base) and not SKIP.search(h):
            out.append(h)
    return out


def _look(d, url: str, role: str, problems: list[str]) -> None:
    """One page, loaded once at 1366 px and then laid out at 390 px (the window narrowed as a phone
    has it, which fires the page's resize and loads what a narrower media query asks for): its
    console, its width and a screenshot at each."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        _width(d, width)
        if width == "wide":
            d.get(url)
            _settle(d)
            time.sleep(0.2)  # a script's first request, a late stylesheet
        else:
            time.sleep(0.1)  # the new layout, and what it loads
        for e in _errors(d):
            problems.append(f"{role} {width} {url}: console: {e}")
        wide, inner = d.execute_script(
            "return [document.documentElement.scrollWidth, window.innerWidth]"
        )
        if wide > inner:
            problems.append(f"{role} {width} {url}: {wide} px wide in a {inner} px window")
        if SHOOT:
            d.save_screenshot(str(SHOTS / _shot_name(role, width, url)))
    _width(d, "wide")


def _crawl(d, base: str, role: str, problems: list[str], start=("/",)) -> set[str]:
    """The pages `start` names, then the links they lead to: in the full crawl every one in the
    order found, up to PAGES_PER_ROLE; in the suite's SAMPLE more, drawn with SEED among the
    links found so far."""
    seen, todo, visited = set(), [base + s for s in start], set()
    rng = random.Random(f"{SEED}-{role}")
    must, drawn = len(start), 0
    while todo and len(visited) < PAGES_PER_ROLE and (FULL or drawn < SAMPLE):
        url = todo.pop(0 if FULL or must else rng.randrange(len(todo)))
        key = _pattern(url)
        if key in seen:
            continue
        seen.add(key)
        if must:
            must -= 1
        else:
            drawn += 1
        _look(d, url, role, problems)
        visited.add(urlsplit(d.current_url).path)
        todo.extend(_links(d, base))
    return visited


def _sign_in(d, base: str, email: str, password: str) -> None:
    from selenium.webdriver.common.by import By

    d.get(base + "/auth/login?email=" + email)
    assert d.find_element(By.NAME, "email").get_attribute("value") == email
    d.find_element(By.NAME, "password").send_keys(password)
    _go(d, d.find_element(By.CSS_SELECTOR, "main form button[type=submit]"))


def _wait_status(d, sid: int, want: str, timeout: float) -> str:
    """The status the page shows for `sid`, waited for without reloading it."""
    marker = d.execute_script("return window.__sameDocument = 'yes'")
    assert marker == "yes"
    end, now = time.time() + timeout, None
    while time.time() < end:
        now = d.execute_script(
            "var e = document.querySelector('[data-submission=\"%d\"][data-status]');"
            "return e && e.getAttribute('data-status')" % sid
        )
        if now == want:
            break
        time.sleep(0.5)
    # the same document all along: the status moved without a reload
    assert d.execute_script("return window.__sameDocument") == "yes", "the page was reloaded"
    return now


def test_every_page_at_both_widths_as_everyone(demo_server, driver, tmp_path):
    try:
        _every_page(demo_server, driver, tmp_path)
    except BaseException:
        SHOTS.mkdir(parents=True, exist_ok=True)  # where it stopped, to look at
        driver.save_screenshot(str(SHOTS / "failed.png"))
        (SHOTS / "failed.html").write_text(driver.page_source, encoding="utf-8")
        raise


def _every_page(demo_server, driver, tmp_path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from server.demo import ORGANIZER_EMAIL, ORGANIZER_PASSWORD, predictions

    base, home = demo_server
    d, problems = driver, []
    t0 = time.monotonic()

    # the favicon a browser asks for whatever the page says
    with urllib.request.urlopen(base + "/favicon.ico", timeout=10) as r:
        assert r.status == 200 and r.headers["Content-Type"].startswith("image/")

    # the crawl's own eyes: a page that fails to load is an error the console log shows
    d.get(base + "/no-such-page")
    assert any("404" in e for e in _errors(d)), "the browser's console log is not being read"

    # on a phone the navigation folds behind its Menu button and opens on a tap
    _width(d, "phone")
    d.get(base + "/")
    sign_in = d.find_element(By.CSS_SELECTOR, "header nav a[href='/auth/login']")
    assert not sign_in.is_displayed()
    d.find_element(By.CSS_SELECTOR, "label.navtoggle").click()
    assert sign_in.is_displayed()
    SHOTS.mkdir(parents=True, exist_ok=True)
    if SHOOT:
        d.save_screenshot(str(SHOTS / "anonymous-phone-menu-open.png"))
    _width(d, "wide")
    assert sign_in.is_displayed()

    # anonymous: every public page
    public = _crawl(
        d,
        base,
        "anonymous",
        problems,
        start=("/", "/auth/register", "/auth/login", "/tasks/tric-binary/leaderboard"),
    )
    assert "/tasks/tric-binary/leaderboard" in public and "/auth/login" in public, public

    # a participant: registers through the form, carried to the sign-in form, makes a team
    d.get(base + "/auth/register")
    email = "crawler@example.org"
    d.find_element(By.NAME, "email").send_keys(email)
    d.find_element(By.NAME, "password").send_keys("correct horse battery")
    _go(d, d.find_element(By.CSS_SELECTOR, "main form button[type=submit]"))
    assert "Registered crawler@example.org: now sign in" in d.find_element(By.TAG_NAME, "main").text
    assert d.find_element(By.NAME, "email").get_attribute("value") == email
    d.find_element(By.NAME, "password").send_keys("correct horse battery")
    _go(d, d.find_element(By.CSS_SELECTOR, "main form button[type=submit]"))
    # registers for the demo competition by accepting its terms (approved at once)
    d.get(base + "/competitions/palimpsest-demo")
    d.find_element(By.NAME, "accept_terms").click()
    _go(d, d.find_element(By.XPATH, "//main//button[normalize-space()='Register']"))
    assert "Your registration: approved" in d.find_element(By.TAG_NAME, "main").text
    d.get(base + "/team/")
    d.find_element(By.NAME, "name").send_keys("Crawlers")
    _go(d, d.find_element(By.XPATH, "//button[normalize-space()='Create']"))

    def submit(method: str, noise: float, seed: int) -> int:
        data, name = predictions("tric-binary", "dev", home, noise, seed)
        path = tmp_path / f"{method}-{name}"
        path.write_bytes(data)
        d.get(base + "/tasks/tric-binary/submit")
        Select(d.find_element(By.NAME, "phase")).select_by_value("dev")
        d.find_element(By.NAME, "file").send_keys(str(path))
        d.find_element(By.NAME, "method_name").send_keys(method)
        _go(d, d.find_element(By.XPATH, "//main//button[normalize-space()='Submit']"))
        return int(d.current_url.rstrip("/").rsplit("/", 1)[1])

    # the submission page turns from queued to scored by itself
    first = submit("crawl-a", 0.2, 1)
    assert _errors(d) == []
    got = _wait_status(d, first, "scored", 150)
    assert got == "scored", f"submission {first} still reads {got!r} on its page"
    assert "Scores" in d.find_element(By.TAG_NAME, "main").text  # the swapped-in page's scores
    # and so does its row on "My submissions"
    second = submit("crawl-b", 0.3, 2)
    d.get(base + "/submissions")
    _settle(d)
    got = _wait_status(d, second, "scored", 150)
    assert got == "scored", f"submission {second} still reads {got!r} on My submissions"
    for e in _errors(d):
        problems.append(f"participant live status: console: {e}")

    mine = _crawl(d, base, "participant", problems, start=("/", "/submissions"))
    assert f"/submissions/{first}" in mine or "/submissions" in mine, mine

    # the organizer, of a busy competition: 50 more participants and 120 more runs (200 in full)
    _crowd(home, **CROWD)
    d.delete_all_cookies()
    _sign_in(d, base, ORGANIZER_EMAIL, ORGANIZER_PASSWORD)
    people = "/competitions/palimpsest-demo/participants"
    start = ("/", "/organizer/", people, "/organizer/submissions", "/organizer/queue")
    org = _crawl(d, base, "organizer", problems, start=start)
    assert {"/organizer/", "/organizer/submissions", "/organizer/queue", people} <= org, org
    # on a phone every row's decision controls are on the screen, not scrolled off beside it
    _width(d, "phone")
    d.get(base + people + "?status=pending")
    _settle(d)
    right, inner = d.execute_script(
        "var b = document.querySelector('main table button[type=submit]');"
        "return [b.getBoundingClientRect().right, window.innerWidth]"
    )
    if right > inner:
        problems.append(f"organizer phone {people}: Apply ends at {right:.0f} px of {inner}")
    _width(d, "wide")

    took = time.monotonic() - t0
    print(f"crawled {len(public)} + {len(mine)} + {len(org)} pages in {took:.0f} s")
    how = "the full crawl" if FULL else f"PALIMPSEST_CRAWL_SEED={SEED}"
    assert not problems, how + ":\n" + "\n".join(problems)


def _crowd(home: Path, *, participants: int, runs: int) -> None:
    """Participants registered for the demo competition (every other one waiting for a decision,
    so the page shows its controls), each in a team of their own, and their runs on tric-binary's
    dev phase (left queued: the server's reconciler and worker take them in their own time)."""
    from sqlmodel import Session, create_engine, select

    from server.demo import predictions
    from server.domain.submissions import take_file
    from server.domain.teams import create_team
    from server.models import Competition, Phase, Registration, User
    from server.settings import Settings

    settings = Settings(home=home)
    eng = create_engine(settings.sqlalchemy_url())
    with Session(eng) as s:
        c = s.exec(select(Competition).where(Competition.slug == "palimpsest-demo")).one()
        dev = s.exec(
            select(Phase).where(Phase.task_id == "tric-binary", Phase.split == "dev")
        ).first()
        teams = []
        for i in range(participants):
            u = User(email=f"crowd{i:02d}@example.org", password_hash="x")
            s.add(u)
            s.flush()
            s.add(
                Registration(
                    competition_id=c.id,
                    user_id=u.id,
                    status="approved",
                    terms_version=c.terms_version,
                    reason="a long reason for the record, " * (i % 3),
                )
            )
            s.flush()
            teams.append((u, create_team(s, u, f"Crowd team {i:02d} with a longish name", c)))
        s.commit()
        for k in range(runs):
            u, team = teams[k % len(teams)]
            data, name = predictions("tric-binary", "dev", home, 0.1 + (k % 7) / 10, k)
            take_file(
                s,
                user=u,
                team=team,
                task_id="tric-binary",
                phase=dev,
                stream=data,
                filename=name,
                method_name=f"crowd method {k}",
                settings=settings,
                exempt=True,
                dedupe=False,
            )  # flushed; committed below, never enqueued here
        # every other one waits for a decision again (a team is made by an approved person)
        regs = s.exec(select(Registration).where(Registration.competition_id == c.id)).all()
        mine = {u.id for u, _ in teams[1::2]}
        for r in regs:
            if r.user_id in mine:
                r.status = "pending"
                s.add(r)
        s.commit()
    eng.dispose()
