"""The browser tests' Chromium (selenium), a served app for it, and the steps every page test
takes (go, fill, sign in, look)."""

from __future__ import annotations

import json
import os
import shutil
import threading
import urllib.error
from pathlib import Path

import pytest
from webkit import PASSWORD

from tests.conftest import REPO

SHOTS = Path(os.environ.get("PALIMPSEST_SCREENSHOTS", REPO / "screenshots"))


def _binaries() -> tuple[str, str]:
    chrome = (
        shutil.which("chromium")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )
    driver = shutil.which("chromedriver") or (
        "/usr/lib/chromium/chromedriver"
        if os.path.exists("/usr/lib/chromium/chromedriver")
        else None
    )
    try:
        import selenium  # noqa: F401
    except ImportError:
        chrome = None
    if not chrome or not driver:
        why = (
            "selenium, chromium and chromedriver are needed (apt-get install chromium "
            "chromium-driver; pip install -e '.[test]')"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(f"browser tests must run under CI: {why}")
        pytest.skip(why)
    return chrome, driver


@pytest.fixture()
def live(app):
    """The app on a local port (a thread), as a browser reaches it."""
    from werkzeug.serving import make_server

    app.config["WTF_CSRF_ENABLED"] = True
    srv = make_server("127.0.0.1", 0, app, threaded=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


@pytest.fixture()
def chrome(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver = _binaries()
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for a in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1100",
        "--lang=en-GB",
    ):
        opts.add_argument(a)
    opts.add_experimental_option(
        "prefs",
        {
            "download.default_directory": str(downloads),
            "download.prompt_for_download": False,
            "safebrowsing.enabled": False,
        },
    )
    d = webdriver.Chrome(service=Service(executable_path=driver), options=opts)
    d.set_page_load_timeout(30)
    d.downloads = downloads
    yield d
    d.quit()


def _fill(d, name: str, value: str, clear: bool = True):
    from selenium.webdriver.common.by import By

    el = d.find_element(By.NAME, name)
    if clear:
        el.clear()
    el.send_keys(value)
    return el


def _go(d, el) -> None:
    """Click something that loads a page, and wait until the new one is there."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    def gone(_):
        # the old page's root is stale once the new page is there; chromedriver sometimes says so
        # with an inspector error ("Node ... does not belong to the document") instead
        try:
            return EC.staleness_of(old)(_)
        except WebDriverException:
            return True

    old = d.find_element(By.TAG_NAME, "html")
    el.click()
    WebDriverWait(d, 20).until(gone)
    WebDriverWait(d, 20).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )


def _body(d) -> str:
    from selenium.webdriver.common.by import By

    return d.find_element(By.TAG_NAME, "body").text


def _tric_predictions(home: Path, path: Path, flip_every: int = 5) -> Path:
    gold = [
        json.loads(x)
        for x in (home / "tasks/tric-binary/gold/test/gold.jsonl").read_text().splitlines()
    ]
    path.write_text(
        "".join(
            json.dumps(
                {
                    "instanceID": g["instanceID"],
                    "label": (1 - g["label"]) if i % flip_every == 0 else g["label"],
                }
            )
            + "\n"
            for i, g in enumerate(gold)
        )
    )
    return path


WIDTHS = {"wide": (1366, 900), "phone": (390, 844)}


@pytest.fixture()
def driver(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, chromedriver = _binaries()
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(a)
    opts.add_argument("--window-size=1366,900")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    opts.add_experimental_option(
        "prefs",
        {"download.default_directory": str(tmp_path), "download.prompt_for_download": False},
    )
    d = webdriver.Chrome(service=Service(executable_path=chromedriver), options=opts)
    d.set_page_load_timeout(30)
    yield d
    d.quit()


def _width(d, name: str) -> None:
    """The viewport of a laptop or of a phone (a mobile viewport, as a phone's browser lays out)."""
    w, h = WIDTHS[name]
    if name == "phone":
        d.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False},
        )
    else:
        d.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        d.set_window_size(w, h)


def _errors(d) -> list[str]:
    """The console's errors since the last call (reading the log empties it)."""
    return [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE"]


def _sign_in(d, url, email):
    from selenium.webdriver.common.by import By

    d.delete_all_cookies()
    d.get(url + "/auth/login")
    _fill(d, "email", email)
    _fill(d, "password", PASSWORD)
    _go(d, d.find_element(By.CSS_SELECTOR, "main form button[type=submit]"))


def _look(d, url: str, seen: list[str]) -> None:
    """Open `url` at 390 px and at 1366 px (the width the flow goes on at): the console must stay
    clean and nothing may be wider than the window."""
    for name in ("phone", "wide"):
        _width(d, name)
        d.get(url)
        assert _errors(d) == [], (url, name)
        overflow = d.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 1, f"{url} is {overflow}px wider than the {name} window"
    seen.append(url)


def _status_of(d, url: str) -> tuple[int, bytes]:
    """GET `url` with the browser's session cookie (a zip download is not a page)."""
    cookie = "; ".join(f"{c['name']}={c['value']}" for c in d.get_cookies())
    req = urllib.request.Request(url, headers={"Cookie": cookie})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
