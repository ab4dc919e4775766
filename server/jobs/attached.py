"""An attached run worker: `palimpsest worker --attach URL --token T`.

A machine an organizer brings (a GPU box, a cluster node) holds a run worker's token and the site's
address, nothing else: no database, no Redis, no object store credentials, and it imports none of
them. It loops: claims the next run of its token's competitions over HTTPS (`POST
/api/v1/worker/claim`), fetches the files the claim names through their signed links (the archive,
the inputs the download rule gives that run, the task's declaration; never gold, which the site
never links), runs the system with the site's own step (`server.jobs.execute.execute`: the same
sandbox, under the limits the claim states, which are the site's), renews its lease with a
heartbeat while it runs, and posts the result (the output file, the kernel's counters, the log)
to the run's signed result link. The site then records it as its own worker's result
(server/actions/run_workers.py `post_result`). A worker that dies loses its lease: the site's
reconciler puts the run back in its queue, and the result of an attempt it no longer holds is
refused (409), so nothing is charged twice.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from server.jobs.execute import execute
from server.jobs.sandbox import Limits

log = logging.getLogger(__name__)

TIMEOUT = 60.0  # seconds for one HTTP request to the site
FETCHERS = 4  # a claimed run's files fetched at once
FRESH = 120.0  # a result link younger than this is used as it is (the site's last five minutes)


class SiteRefused(Exception):
    """The site answered with an error (its status and its JSON's code)."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code = status, code


class Site:
    """The site's worker API, with the token."""

    def __init__(self, url: str, token: str):
        self.base = url.rstrip("/")
        self.token = token

    def _request(self, method: str, url: str, body: bytes | None = None, ctype: str = ""):
        if not url.startswith(("http://", "https://")):
            url = f"{self.base}{url}"
        req = urllib.request.Request(url, data=body, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if ctype:
            req.add_header("Content-Type", ctype)
        return urllib.request.urlopen(req, timeout=TIMEOUT)  # noqa: S310 - the site's own URL

    def call(self, method: str, url: str, body: bytes | None = None, ctype: str = "") -> dict:
        """One request; its JSON answer (SiteRefused for an error the site names)."""
        try:
            with self._request(method, url, body, ctype) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read()).get("error") or {}
            except ValueError:
                err = {}
            raise SiteRefused(e.code, err.get("code", "error"), err.get("message", "")) from None

    def claim(self) -> dict:
        return self.call("POST", "/api/v1/worker/claim")

    def heartbeat(self, run_id: int) -> dict:
        return self.call("POST", f"/api/v1/worker/runs/{run_id}/heartbeat")

    def fetch(self, url: str, dest: Path) -> None:
        """A file of a claimed run, by its signed link, into `dest`."""
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._request("GET", url) as r, dest.open("wb") as f:
                while chunk := r.read(1 << 20):
                    f.write(chunk)
        except urllib.error.HTTPError as e:
            raise SiteRefused(e.code, "fetch", f"fetching {dest.name}") from None

    def post_result(self, url: str, result: dict, output: Path | None) -> dict:
        """The run's result to its signed link: `result` (JSON) and the output file."""
        boundary = uuid.uuid4().hex
        parts = [
            f'--{boundary}\r\nContent-Disposition: form-data; name="result"\r\n'
            f"Content-Type: application/json\r\n\r\n".encode(),
            json.dumps(result).encode(),
            b"\r\n",
        ]
        if output is not None:
            parts += [
                f'--{boundary}\r\nContent-Disposition: form-data; name="output"; '
                f'filename="output"\r\nContent-Type: application/octet-stream\r\n\r\n'.encode(),
                output.read_bytes(),
                b"\r\n",
            ]
        parts.append(f"--{boundary}--\r\n".encode())
        ctype = f"multipart/form-data; boundary={boundary}"
        return self.call("POST", url, b"".join(parts), ctype)


def _place(work: Path, path: str) -> Path:
    """Where a claimed file goes in the run's folder: a relative path under it, never outside."""
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise SiteRefused(0, "bad_path", f"a claimed file's path is not a plain one: {path!r}")
    return work.joinpath(*p.parts)


@contextlib.contextmanager
def _beating(site: Site, run_id: int, every: float, links: dict):
    """Renew the lease every `every` seconds while the block runs; each answer's result link is
    kept in `links` (the freshest). Stops at the site's 409: the run is no longer this worker's."""
    stop = threading.Event()

    def beat():
        while not stop.wait(max(0.2, float(every))):
            try:
                links["result_url"] = site.heartbeat(run_id).get("result_url")
                links["at"] = time.monotonic()
            except SiteRefused as e:
                if e.status in (401, 409):
                    log.warning("run %s: no longer held (%s): its result is refused", run_id, e)
                    links["lost"] = True
                    return
                log.warning("run %s: heartbeat refused (%s)", run_id, e)
            except OSError as e:  # the site away a moment: again next beat
                log.warning("run %s: heartbeat failed (%s)", run_id, e)

    t = threading.Thread(target=beat, name=f"lease-{run_id}", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join(timeout=TIMEOUT)


def run_claimed(site: Site, claim: dict, *, models=()) -> dict:
    """Run one claimed run and post its result; what the site answered (or why not)."""
    run_id, attempt = int(claim["run"]), int(claim["attempt"])
    limits = Limits(**claim.get("limits") or {})
    links = {"result_url": claim.get("result_url"), "at": time.monotonic()}  # the claim's
    with tempfile.TemporaryDirectory(prefix=f"attached-{run_id}-") as work:
        work = Path(work)
        os.chmod(work, 0o755)
        files = [(f["url"], _place(work, f["path"])) for f in claim.get("files") or []]
        with ThreadPoolExecutor(max_workers=FETCHERS) as pool:  # a few at once: latency, not CPU
            list(pool.map(lambda f: site.fetch(*f), files))
        inputs = work / "input"
        inputs.mkdir(exist_ok=True)
        for d, _dirs, files in os.walk(inputs):  # readable by the sandbox's user
            os.chmod(d, 0o755)
            for name in files:
                os.chmod(os.path.join(d, name), 0o644)
        with _beating(site, run_id, float(claim.get("heartbeat_every") or 10), links):
            ran = execute(
                work / "code.zip", inputs, work, limits=limits, attempt=attempt, models=models
            )
        result = {
            "kind": "infra" if ran.kind in ("infra", "unreadable") else ran.kind,
            "status": ran.status,
            "reason": ran.reason,
            "log": ran.log if ran.kind in ("ok", "code") else "",
            **{k: v for k, v in ran.used.items() if k != "attempt"},
        }
        if ran.kind in ("infra", "unreadable"):
            log.error("run %s: %s\n%s", run_id, ran.reason, ran.log)
        if time.monotonic() - links["at"] > FRESH:  # a fresh link: the last may expire
            try:
                links["result_url"] = site.heartbeat(run_id).get("result_url")
            except SiteRefused as e:
                return {"run": run_id, "refused": e.code}
        return site.post_result(links["result_url"], result, ran.output)


def serve(url: str, token: str, *, once: bool = False, idle: float = 2.0, models=()) -> int:
    """Claim, run and post back, again and again (`once`: until nothing waits); 0 when done."""
    site = Site(url, token)
    while True:
        try:
            claim = site.claim()
        except SiteRefused as e:
            if e.status == 401:
                log.error("the site refuses this token (%s): stopping", e)
                return 2
            log.warning("claim refused (%s); again in %s s", e, idle)
            time.sleep(idle)
            continue
        except OSError as e:
            log.warning("the site does not answer (%s); again in %s s", e, idle)
            time.sleep(idle)
            continue
        if not claim.get("run"):
            if once:
                return 0
            time.sleep(idle)
            continue
        try:
            got = run_claimed(site, claim, models=models)
        except RuntimeError as e:  # no sandbox here: this machine runs nothing (its lease ends)
            log.error("run %s: %s: stopping", claim["run"], e)
            return 3
        except SiteRefused as e:
            got = {"run": claim["run"], "refused": e.code}
        except OSError as e:  # the site went away: the lease runs out, the run goes back
            got = {"run": claim["run"], "error": str(e)}
        print(json.dumps(got), flush=True)
