"""One upload, three surfaces, the same stored run: the same files, with every combination of the
yes/no fields (shown publicly, primary), sent through the web form in Chromium, the CLI and the API
by three teams; the stored runs agree field by field, right after each upload and at the end. The
form takes the phase the API takes when none is named (the open test phase, not the first listed)
and shows its deadline and the team's quota. On SQLite and PostgreSQL.

Skipped where chromium is missing (failing under CI=true, as the other browser tests)."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from apikit import cli, site, upload  # noqa: F401  (site: the served app)
from browserkit import _body, _errors, _fill, _go, _tric_predictions, chrome  # noqa: F401
from sqlmodel import Session, select
from webkit import PASSWORD, engine_of, make_phase, make_token, make_user

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# every field of a stored run that the upload decides (ids, times and the team aside)
FIELDS = (
    "task_id",
    "phase_id",
    "status",
    "file_sha256",
    "file_name",
    "size",
    "method_name",
    "description",
    "url",
    "facts",
    "show_publicly",
    "is_primary",
    "is_baseline",
    "hidden",
    "hidden_reason",
    "removed_at",
    "removed_by_team",
    "failure_kind",
)
COMBOS = list(itertools.product((True, False), repeat=2))  # (show_publicly, primary)


def stored(app, sid: int) -> dict:
    from server.models import Submission

    with Session(engine_of(app)) as s:
        sub = s.get(Submission, sid)
        return {f: getattr(sub, f) for f in FIELDS}


def test_the_same_upload_through_web_cli_and_api_is_stored_alike(site, chrome, tmp_path, web_home):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from server.models import Submission, utcnow

    app, url = site
    d = chrome
    make_phase(app, "tric-binary", "dev")
    closes = (utcnow() + timedelta(days=30)).replace(second=0, microsecond=0)
    make_phase(
        app,
        "tric-binary",
        "test",
        public_fraction=1.0,
        closes_at=closes,
        daily_limit=9,
        total_limit=20,
        concurrent_limit=50,  # nothing is scored here: the runs stay queued
    )
    users = {k: make_user(app, f"{k}@x.org", team=f"team-{k}") for k in ("web", "cli", "api")}
    tokens = {k: make_token(app, u) for k, u in users.items()}
    files = [
        _tric_predictions(web_home, tmp_path / f"run{i}.jsonl", flip_every=3 + i)
        for i in range(len(COMBOS))
    ]

    d.get(url + "/auth/login")
    _fill(d, "email", "web@x.org")
    _fill(d, "password", PASSWORD)
    _go(d, d.find_element(By.CSS_SELECTOR, "main form button[type=submit]"))

    def by_web(path, public, primary) -> int:
        d.get(url + "/tasks/tric-binary/submit")
        # the API's default phase, its deadline and the team's quota, before anything is chosen
        assert (
            Select(d.find_element(By.NAME, "phase")).first_selected_option.get_attribute("value")
            == "test"
        )
        text = _body(d)
        assert f"closes {closes:%Y-%m-%d %H:%M} UTC" in text, text
        assert "left today" in text and "of 20 left in all" in text
        d.find_element(By.NAME, "file").send_keys(str(path))
        _fill(d, "method_name", "same method")
        _fill(d, "description", "the same words")
        _fill(d, "url", "https://example.org/paper")
        box = d.find_element(By.NAME, "show_publicly")
        assert box.is_selected()  # shown publicly unless unticked
        if not public:
            box.click()
        if primary:
            d.find_element(By.NAME, "primary").click()
        _go(d, d.find_element(By.XPATH, "//main//button[normalize-space()='Submit']"))
        assert "queued for scoring" in _body(d), _body(d)[:500]
        assert _errors(d) == []
        return int(d.current_url.rstrip("/").rsplit("/", 1)[1])

    def by_cli(path, public, primary) -> int:
        args = [
            "submit",
            "tric-binary",
            str(path),
            "--method-name",
            "same method",
            "--description",
            "the same words",
            "--url",
            "https://example.org/paper",
        ]
        args += [] if public else ["--private"]
        args += ["--primary"] if primary else []
        return cli(url, tokens["cli"], *args)["id"]

    def by_api(path, public, primary) -> int:
        status, got = upload(
            url,
            tokens["api"],
            path.read_bytes(),
            filename=path.name,  # as the browser and the CLI name it
            method_name="same method",
            description="the same words",
            url="https://example.org/paper",
            show_publicly="true" if public else "false",
            primary="true" if primary else "false",
        )
        assert status == 201, got
        return got["id"]

    runs: dict[str, list[int]] = {"web": [], "cli": [], "api": []}
    for path, (public, primary) in zip(files, COMBOS, strict=True):
        for name, send in (("web", by_web), ("cli", by_cli), ("api", by_api)):
            sid = send(path, public, primary)
            runs[name].append(sid)
            got = stored(app, sid)
            assert (got["show_publicly"], got["is_primary"]) == (public, primary), (name, got)
        first = [stored(app, runs[k][-1]) for k in ("web", "cli", "api")]
        assert first[0] == first[1] == first[2], first
    # at the end too (a later primary run made the earlier ones contrastive, alike)
    final = {k: [stored(app, sid) for sid in v] for k, v in runs.items()}
    assert final["web"] == final["cli"] == final["api"]
    last = max(i for i, (_, primary) in enumerate(COMBOS) if primary)
    assert [r["is_primary"] for r in final["web"]] == [i == last for i in range(len(COMBOS))]
    with Session(engine_of(app)) as s:
        assert len(s.exec(select(Submission)).all()) == 3 * len(COMBOS)
