"""server/settings.py: one declaration read from the environment, the generated settings page, one
upload limit, and the secrets of an installation (a random key per data directory, mail links
that never come from the request's Host header), through real `palimpsest serve` processes."""

from __future__ import annotations

import multiprocessing
import os
import re
import stat
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
import requests
from mailkit import LINK, _app, smtp  # noqa: F401  (smtp: the aiosmtpd fixture)
from webkit import Browser, make_user

from scorer import validate_file
from scorer.errors import SubmissionInvalid
from server.settings import (
    SECRET_FILE,
    Settings,
    SettingsError,
    ensure_secret,
    settings_markdown,
)

REPO = Path(__file__).resolve().parent.parent
OLD_PUBLIC_SECRET = "palimpsest-development-only"  # the constant earlier releases fell back on


# ----------------------------------------------------------------------------- the declaration


def test_docs_settings_page_is_generated_from_the_declaration():
    page = (REPO / "docs" / "settings.md").read_text()
    assert page == settings_markdown(), (
        "docs/settings.md is out of date: run `palimpsest settings --markdown > docs/settings.md`"
    )
    for name, field in Settings.model_fields.items():
        assert field.description, f"setting {name} has no description"
        var = {"database_url": "DATABASE_URL", "redis_url": "REDIS_URL"}.get(
            name, f"PALIMPSEST_{name.upper()}"
        )
        assert f"| `{var}` |" in page


def test_every_setting_is_read_from_its_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("PALIMPSEST_HOME", str(tmp_path))
    monkeypatch.setenv("DATABASE_URL", "postgres://u@db/p")
    monkeypatch.setenv("REDIS_URL", "redis://r:6379/0")
    monkeypatch.setenv("PALIMPSEST_MAX_UPLOAD_BYTES", "12345")
    monkeypatch.setenv("PALIMPSEST_RECONCILE_EVERY", "0.5")
    monkeypatch.setenv("PALIMPSEST_INVALID_DAILY_LIMIT", "none")
    monkeypatch.setenv("PALIMPSEST_BASE_URL", "https://site.example/")
    monkeypatch.setenv("PALIMPSEST_SMTP_SECURITY", "SSL")
    monkeypatch.setenv("PALIMPSEST_SMTP_USER", "")
    s = Settings.from_env()
    assert s.home == tmp_path
    assert s.sqlalchemy_url() == "postgresql://u@db/p"
    assert s.redis_url == "redis://r:6379/0" and not s.embedded_redis()
    assert s.max_upload_bytes == 12345 and s.limits().max_bytes == 12345
    assert s.reconcile_every == 0.5 and s.invalid_daily_limit is None
    assert s.base_url == "https://site.example" and s.smtp_security == "ssl"
    assert s.smtp_user is None
    assert Settings.from_env(max_attempts=7).max_attempts == 7  # keyword overrides win


def test_the_variables_are_read_as_pydantic_settings_read_them(monkeypatch, tmp_path):
    """Names in any case; an aliased setting from its aliases only (not PALIMPSEST_DATABASE_URL);
    keyword overrides win over the environment; unknown variables are ignored."""
    monkeypatch.setenv("palimpsest_home", str(tmp_path))
    monkeypatch.setenv("Palimpsest_Job_Timeout", "7")
    monkeypatch.setenv("PALIMPSEST_DATABASE_URL", "sqlite:///ignored.db")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("PALIMPSEST_NO_SUCH_SETTING", "x")
    monkeypatch.setenv("PALIMPSEST_RUN_IMAGES", "true")
    s = Settings.from_env()
    assert s.home == tmp_path and s.job_timeout == 7 and s.database_url is None
    assert s.run_images is True
    assert Settings.from_env(job_timeout=9, database_url="sqlite:///x.db").job_timeout == 9
    monkeypatch.setenv("database_url", "sqlite:///lower.db")
    assert Settings.from_env().database_url == "sqlite:///lower.db"


def test_a_wrong_value_is_refused_naming_the_variable(monkeypatch):
    from pydantic import ValidationError

    monkeypatch.setenv("PALIMPSEST_SMTP_SECURITY", "tls1.0")
    with pytest.raises(ValidationError, match="smtp_security"):
        Settings.from_env()


def test_one_upload_limit_reaches_the_scorer(monkeypatch, demo_home, tmp_path):
    """PALIMPSEST_MAX_UPLOAD_BYTES is the limit the worker reads a file under; the old second
    variable (read by the scorer at import) has no effect any more."""
    monkeypatch.setenv("PALIMPSEST_MAX_SUBMISSION_BYTES", "10")
    monkeypatch.setenv("PALIMPSEST_MAX_UPLOAD_BYTES", "200")
    f = tmp_path / "p.jsonl"
    f.write_text("".join(f'{{"target": "t{i}", "score": 0.5}}\n' for i in range(20)))
    limits = Settings.from_env(home=demo_home).limits()
    with pytest.raises(SubmissionInvalid, match="over the limit"):
        validate_file("trac", f, "test", demo_home, limits)
    # the scorer's own default (the offline CLI's) is not read from the environment
    with pytest.raises(SubmissionInvalid) as e:
        validate_file("trac", f, "test", demo_home)
    assert "over the limit" not in str(e.value)


# ----------------------------------------------------------------------------- secrets


def test_ensure_secret_writes_a_random_key_with_mode_600_once(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    key_a = ensure_secret(a)
    assert ensure_secret(a) == key_a  # kept: used ever after
    assert ensure_secret(b) != key_a
    assert len(key_a) >= 40 and key_a != OLD_PUBLIC_SECRET
    assert stat.S_IMODE((a / SECRET_FILE).stat().st_mode) == 0o600


def test_processes_starting_at_once_agree_on_one_key(tmp_path):
    # spawned, not forked: this test process may hold jax's threads (a fork could deadlock)
    with ProcessPoolExecutor(4, mp_context=multiprocessing.get_context("spawn")) as pool:
        keys = set(pool.map(ensure_secret, [tmp_path] * 16))
    assert len(keys) == 1 and [p.name for p in tmp_path.iterdir()] == [SECRET_FILE]


def test_production_without_a_secret_key_refuses_to_start(tmp_path, monkeypatch):
    from server import create_app

    monkeypatch.delenv("PALIMPSEST_SECRET_KEY", raising=False)
    with pytest.raises(SettingsError, match="PALIMPSEST_SECRET_KEY"):
        create_app({"home": tmp_path, "env": "production", "database_url": None})
    assert not (tmp_path / SECRET_FILE).exists()  # never made up in production


def test_a_token_signed_with_the_old_public_constant_is_refused(web_home, monkeypatch):
    from flask.sessions import SecureCookieSessionInterface

    from server.domain.accounts import reset_token

    monkeypatch.delenv("PALIMPSEST_SECRET_KEY", raising=False)
    app = _app(web_home, monkeypatch)
    assert app.secret_key == (web_home / SECRET_FILE).read_text().strip()
    user = make_user(app, "ann@x.org")
    b = Browser(app.test_client())
    forged = reset_token(OLD_PUBLIC_SECRET, user)
    r = b.get(f"/auth/reset/{forged}")
    assert r.status_code == 400 and "invalid" in r.get_data(as_text=True)
    assert b.get(f"/auth/reset/{reset_token(app.secret_key, user)}").status_code == 200
    # a session cookie signed with the constant signs nobody in
    signer = SecureCookieSessionInterface().get_signing_serializer(
        type("A", (), {"secret_key": OLD_PUBLIC_SECRET, "config": app.config})()
    )
    c = app.test_client()
    c.set_cookie(
        app.config["SESSION_COOKIE_NAME"], signer.dumps({"uid": user.id, "pw": "", "ep": 0})
    )
    assert c.get("/team/").status_code == 302  # sent to sign in


# ----------------------------------------------------------------------------- real serve


def _serve(home: Path, tmp_path: Path, **env_extra) -> tuple[subprocess.Popen, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "PALIMPSEST_SECRET_KEY", "PALIMPSEST_BASE_URL")
    }
    env.update(PALIMPSEST_HOME=str(home), PYTHONPATH=str(REPO), **env_extra)
    log = tmp_path / f"serve-{home.name}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--port", "0"],
        env=env,
        cwd=REPO,
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        m = re.search(r"Palimpsest on (http://\S+?)/ ", log.read_text())
        if m:
            return proc, m.group(1)
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    raise AssertionError(log.read_text()[-3000:])


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.slow
def test_serve_keys_its_data_directory_and_mails_links_to_its_own_address(
    tmp_path,
    smtp,  # noqa: F811
):
    homes = [tmp_path / "one", tmp_path / "two"]
    env = dict(
        PALIMPSEST_SMTP_HOST="127.0.0.1",
        PALIMPSEST_SMTP_PORT=str(smtp.port),
        PALIMPSEST_SMTP_SECURITY="none",
    )
    subprocess.run(
        [sys.executable, "-m", "cli.main", "users", "create", "--email", "ann@x.org"]
        + ["--password-stdin"],
        input="a long enough password\n",
        text=True,
        env={**os.environ, "PALIMPSEST_HOME": str(homes[0]), "PYTHONPATH": str(REPO)},
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    proc, url = _serve(homes[0], tmp_path, **env)
    try:
        web = requests.Session()
        form = web.get(f"{url}/auth/reset", timeout=10).text
        token = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
        # the cookie by hand: requests would match its jar against the forged Host
        cookie = "; ".join(f"{k}={v}" for k, v in web.cookies.items())
        r = requests.post(
            f"{url}/auth/reset",
            data={"email": "ann@x.org", "csrf_token": token},
            headers={"Host": "evil.example", "X-Forwarded-Host": "evil.example", "Cookie": cookie},
            timeout=10,
            allow_redirects=False,
        )
        assert r.status_code in (200, 302), r.text[:500]
        msgs = smtp.wait(1)
        assert msgs, "no reset mail arrived"
        body = msgs[0]["body"]
        assert "evil.example" not in body
        assert LINK.search(body) and f"{url}/auth/reset/" in body
    finally:
        _stop(proc)
    key_one = (homes[0] / SECRET_FILE).read_text()
    proc, _ = _serve(homes[1], tmp_path)
    _stop(proc)
    key_two = (homes[1] / SECRET_FILE).read_text()
    assert key_one.strip() and key_two.strip() and key_one != key_two
    for h in homes:
        assert stat.S_IMODE((h / SECRET_FILE).stat().st_mode) == 0o600
    proc, _ = _serve(homes[0], tmp_path)  # a second start keeps the key
    _stop(proc)
    assert (homes[0] / SECRET_FILE).read_text() == key_one
