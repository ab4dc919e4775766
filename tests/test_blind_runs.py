"""Blind runs end to end: the example bundle's competition, a participant's system submitted
through the API and the CLI, run in the sandbox by the runs queue's job, its output scored like
an uploaded file (the same scores as the same predictions uploaded), a blind phase's inputs never
downloaded and its log shown to the team only after review, a failing system counted with its
log, a dead code worker's run tried once more and scored once."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from blindkit import EXAMPLE, SYSTEM, TASK, _competition, _facts, _h, _phase, _zip
from browserkit import (
    driver,  # noqa: F401  (driver: Chromium, console read)
    live,  # noqa: F401  (live: the app served on a port)
)
from click.testing import CliRunner
from sqlmodel import Session, select
from webkit import engine_of

from server.jobs import sandbox
from server.models import CodeRun, Phase, Score, Submission


@pytest.fixture(autouse=True)
def _bwrap():
    why = sandbox.available()
    if why:
        from conftest import service_missing

        service_missing(why)


@pytest.fixture
def web_home(tmp_path, home) -> Path:
    """A data directory of its own (the bundle installs its task here)."""
    d = tmp_path / "data"
    (d / "tasks").mkdir(parents=True)
    return d


@pytest.fixture(autouse=True)
def _forget_declared_tasks():
    yield
    from tasks import unregister_declared

    unregister_declared(TASK)


def _primary(app, sid) -> float:
    with Session(engine_of(app)) as s:
        rows = s.exec(select(Score).where(Score.submission_id == sid)).all()
        return {r.part: r.result for r in rows}


def test_a_system_runs_blind_and_scores_as_its_predictions_do(app, tmp_path):
    from server.jobs.run_jobs import run_system
    from server.jobs.scoring import score_submission

    tok = _competition(app)
    c = app.test_client()
    code = _zip(SYSTEM, tmp_path / "system.zip")
    # a prediction file is refused on a phase that takes code, and code on one that takes files
    r = c.post(
        f"/api/v1/tasks/{TASK}/submissions",
        data={"phase": "systems", "file": (io.BytesIO(b'{"pair_id": "x"}\n'), "p.jsonl")},
        headers=_h(tok["ann"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 409 and r.json["error"]["code"] == "code_only"
    r = c.post(
        f"/api/v1/tasks/{TASK}/runs",
        data={"phase": "evaluation", "code": (io.BytesIO(code), "system.zip"), **_facts()},
        headers=_h(tok["ann"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 409 and r.json["error"]["code"] == "no_code"
    # the system, through the API
    r = c.post(
        f"/api/v1/tasks/{TASK}/runs",
        data={"phase": "systems", "code": (io.BytesIO(code), "system.zip"), **_facts()},
        headers=_h(tok["ann"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json
    run = r.json
    assert run["stage"] == "queued" and run["command"][0] == "python3"
    # the same archive again: the same run, counted once
    r = c.post(
        f"/api/v1/tasks/{TASK}/runs",
        data={"phase": "systems", "code": (io.BytesIO(code), "system.zip"), **_facts()},
        headers=_h(tok["ann"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 200 and r.json["id"] == run["id"]
    got = run_system(run["id"])
    assert got["stage"] == "ran", got
    assert run_system(run["id"])["skipped"]  # a second run of the job changes nothing
    sid = got["submission"]
    assert score_submission(sid)["status"] == "scored"
    shown = c.get(f"/api/v1/runs/{run['id']}", headers=_h(tok["ann"])).json
    assert shown["stage"] == "ran" and shown["submission"] == sid
    assert shown["submission_status"] == "scored"
    assert shown["resources"]["status"] == "ok" and shown["cpu_seconds"] > 0
    assert shown["log"] is not None  # not a blind phase: the team reads its log at once

    # the same predictions, computed here and uploaded as a file to the evaluation phase
    preds = tmp_path / "preds.jsonl"
    home = Path(app.extensions["palimpsest.settings"].home)
    subprocess.run(
        [
            sys.executable,
            str(SYSTEM / "predict.py"),
            str(home / "tasks" / TASK / "public" / "test" / "inputs.jsonl"),
            str(preds),
        ],
        check=True,
    )
    with Session(engine_of(app)) as s:
        ran = s.get(Submission, sid)
        assert ran.file_sha256 == __import__("hashlib").sha256(preds.read_bytes()).hexdigest()
    r = c.post(
        f"/api/v1/tasks/{TASK}/submissions",
        data={
            "phase": "evaluation",
            "file": (io.BytesIO(preds.read_bytes()), "p.jsonl"),
            **_facts(),
        },
        headers=_h(tok["ann"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json
    assert score_submission(r.json["id"])["status"] == "scored"
    a, b = _primary(app, sid), _primary(app, r.json["id"])
    assert a == b and a  # the same scores, part by part

    # an organizer lists the task's runs
    r = c.get(f"/api/v1/tasks/{TASK}/runs", headers=_h(tok["admin"]))
    assert [x["id"] for x in r.json["runs"]] == [run["id"]]
    assert c.get(f"/api/v1/tasks/{TASK}/runs", headers=_h(tok["ann"])).status_code == 403


def test_a_blind_phase_hides_its_inputs_and_its_logs_until_review(app, tmp_path):
    from server.jobs.run_jobs import run_system

    tok = _competition(app)
    c = app.test_client()
    systems = _phase(app, "systems")
    r = c.patch(
        f"/api/v1/tasks/{TASK}/phases/systems",
        json={"blind": True, "compute_budget_seconds": 600},
        headers=_h(tok["admin"]),
    )
    assert r.status_code == 200, r.json
    assert r.json["blind"] is True and r.json["accepts"] == "code"
    # the test inputs are never downloaded, by the API or the web
    r = c.get(f"/api/v1/tasks/{TASK}/download?split=test", headers=_h(tok["ann"]))
    assert r.status_code == 403 and r.json["error"]["code"] == "blind"
    assert "never downloaded" in r.json["error"]["message"]
    r = c.get(f"/api/v1/tasks/{TASK}/download", headers=_h(tok["ann"]))
    assert r.status_code == 200
    names = zipfile.ZipFile(io.BytesIO(r.data)).namelist()
    assert not any("/test/" in n for n in names) and any("/dev/" in n for n in names)
    assert json.loads(zipfile.ZipFile(io.BytesIO(r.data)).read("task.json"))["withheld"] == {
        "test": "blind"
    }
    # a system that prints the hidden inputs, then fails
    leak = (
        "import sys\nprint(open('/input/inputs.jsonl').read())\nsys.exit('the inputs are above')\n"
    )
    code = _zip(SYSTEM, tmp_path / "leak.zip", {"predict.py": leak})
    r = c.post(
        f"/api/v1/tasks/{TASK}/runs",
        data={"phase": "systems", "code": (io.BytesIO(code), "leak.zip"), **_facts()},
        headers=_h(tok["ann"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 201, r.json
    rid = r.json["id"]
    assert run_system(rid)["stage"] == "failed"
    seen = c.get(f"/api/v1/runs/{rid}", headers=_h(tok["ann"])).json
    assert seen["category"] == "submitted" and seen.get("log") is None and seen["log_hidden"]
    assert "LAT-test" not in json.dumps(seen)
    org = c.get(f"/api/v1/runs/{rid}", headers=_h(tok["admin"])).json
    assert "LAT-test" in org["log"]
    listed = c.get(f"/api/v1/tasks/{TASK}/runs?awaiting_review=1", headers=_h(tok["admin"]))
    assert [x["id"] for x in listed.json["runs"]] == [rid]
    release = {"decision": "release"}
    r = c.post(f"/api/v1/runs/{rid}/review", json=release, headers=_h(tok["ann"]))
    assert r.status_code == 403
    r = c.post(f"/api/v1/runs/{rid}/review", json=release, headers=_h(tok["admin"]))
    assert r.status_code == 200 and r.json["reviewed"]
    assert "LAT-test" in c.get(f"/api/v1/runs/{rid}", headers=_h(tok["ann"])).json["log"]
    # a failure of the code counts against the phase's limits; the quota shows it
    with Session(engine_of(app)) as s:
        from server.domain.submissions import quota

        q = quota(s, phase=s.get(Phase, systems.id), team_id=s.get(CodeRun, rid).team_id)
    assert q["total_used"] == 1 and q["daily_used"] == 1
    assert q["compute_budget_seconds"] == 600 and 0 < q["compute_used_seconds"] < 600
    r = c.patch(
        f"/api/v1/tasks/{TASK}/phases/systems",
        json={"daily_limit": None, "total_limit": None, "compute_budget_seconds": None},
        headers=_h(tok["admin"]),
    )
    assert r.status_code == 200, r.json
    # hostile systems are stopped, their reason named, and the site keeps serving
    for name, script, needle in (
        ("bomb", "import os\nwhile True:\n    os.fork()\n", "limit"),
        ("hog", "x = bytearray(64 * 1024**3)\n", "memory"),
        (
            "net",
            "import socket\nsocket.create_connection(('127.0.0.1', 5432), timeout=2)\n",
            "exit",
        ),
    ):
        code = _zip(SYSTEM, tmp_path / f"{name}.zip", {"predict.py": script})
        r = c.post(
            f"/api/v1/tasks/{TASK}/runs",
            data={"phase": "systems", "code": (io.BytesIO(code), f"{name}.zip"), **_facts()},
            headers=_h(tok["ann"]),
            content_type="multipart/form-data",
        )
        assert r.status_code == 201, r.json
        assert run_system(r.json["id"])["stage"] == "failed", name
        got = c.get(f"/api/v1/runs/{r.json['id']}", headers=_h(tok["admin"])).json
        assert got["failure_kind"] == "code" and needle in (got["reason"] + got["log"]), got
        assert c.get("/").status_code == 200 and c.get(f"/tasks/{TASK}").status_code == 200


def test_archives_that_cannot_run_are_refused_naming_the_problem(app, tmp_path):
    tok = _competition(app)
    c = app.test_client()
    bad = io.BytesIO()
    with zipfile.ZipFile(bad, "w") as zf:
        zf.writestr("system.yaml", "command: python3 predict.py\nnetwork: true\n")
    r = c.post(
        f"/api/v1/tasks/{TASK}/runs",
        data={"phase": "systems", "code": (io.BytesIO(bad.getvalue()), "s.zip"), **_facts()},
        headers=_h(tok["ann"]),
        content_type="multipart/form-data",
    )
    assert r.status_code == 422 and r.json["error"]["code"] == "invalid_system"
    text = json.dumps(r.json["error"]["problems"])
    assert "command" in text and "network" in text
    with Session(engine_of(app)) as s:
        assert s.exec(select(CodeRun)).all() == []


def test_the_cli_submits_a_folder_and_waits_for_its_scores(app, tmp_path):
    """`palimpsest submit TASK --code DIR --wait` over real HTTP (the app served on a port); the
    run and its scoring done by a real worker on the runs and scoring queues."""
    import threading

    from werkzeug.serving import WSGIRequestHandler, make_server

    from cli.main import main

    tok = _competition(app)

    class Quiet(WSGIRequestHandler):
        def log(self, *args, **kwargs):
            pass

    srv = make_server("127.0.0.1", 0, app, threaded=True, request_handler=Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    env = {
        "PALIMPSEST_SERVER": f"http://127.0.0.1:{srv.server_port}",
        "PALIMPSEST_TOKEN": tok["ann"],
        "XDG_CONFIG_HOME": "/nonexistent",
    }

    def work():  # what a worker does: run the system, then score its output
        import time

        from server.jobs.run_jobs import run_system
        from server.jobs.scoring import score_submission

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with Session(engine_of(app)) as s:
                run = s.exec(select(CodeRun)).first()
            if run is not None:
                got = run_system(run.id)
                score_submission(got["submission"])
                return
            time.sleep(0.1)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    try:
        args = ["submit", TASK, "--code", str(SYSTEM), "--phase", "systems"]
        args += ["--fact", "system_description=overlap", "--wait", "--json"]
        r = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
        t.join(30)
        assert r.exit_code == 0, r.output
        got = json.loads(r.stdout)  # exactly one document
        assert got["run"]["stage"] == "ran" and got["submission"]["status"] == "scored"
        assert got["submission"]["id"] == got["run"]["submission"]
        r = CliRunner().invoke(main, ["run", str(got["run"]["id"]), "--json"], env=env)
        assert r.exit_code == 0 and json.loads(r.stdout)["stage"] == "ran"
        r = CliRunner().invoke(main, ["submit", TASK], env=env)
        assert r.exit_code == 1 and "--code" in r.stderr
    finally:
        srv.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["embedded", pytest.param("services", marks=pytest.mark.postgres)])
def test_a_killed_code_worker_is_retried_once_and_scored_once(kind, request, tmp_path, monkeypatch):
    """kill -9 of the worker running a system: the reconciler queues the run again (attempt 2),
    a fresh worker runs it, its output becomes one submission, scored once."""
    import time

    from backbone import burst, kill_group, make_team, wait_for, worker_process
    from conftest import _make_backend

    from server.actions import bundles
    from server.domain import lifecycle
    from server.domain.system_archive import unpack
    from server.jobs.queue import enqueue_code_run
    from server.jobs.reconciler import reconcile
    from server.storage import path_for, store_upload
    from tasks import get_task

    src = tmp_path / "src"
    (src / "tasks").mkdir(parents=True)
    b = _make_backend(kind, request, tmp_path, src, monkeypatch)
    with b.session() as s:
        bundles.create_from_bundle(s=s, actor=None, source=EXAMPLE, via="test", settings=b.settings)
        p = s.exec(select(Phase).where(Phase.task_id == TASK, Phase.name == "systems")).one()
        lifecycle.edit_phase(s, p, {"opens_at": None, "closes_at": None}, actor=None)
        phase_id = p.id
    assert get_task(TASK).id == TASK
    team, user = make_team(b)
    slow = (
        (SYSTEM / "predict.py")
        .read_text()
        .replace(
            "def main(inputs: str, out: str) -> None:",
            "def main(inputs: str, out: str) -> None:\n    import time\n    time.sleep(4)",
        )
    )
    archive = _zip(SYSTEM, tmp_path / "slow.zip", {"predict.py": slow})
    key, sha, size = store_upload(b.settings.home, archive, "slow.zip")
    manifest = unpack(path_for(b.settings.home, key), tmp_path / "check")
    with b.session() as s:
        run = CodeRun(
            team_id=team.id,
            user_id=user.id,
            task_id=TASK,
            phase_id=phase_id,
            archive_sha256=sha,
            storage_key=key,
            size=size,
            manifest=manifest.model_dump(),
            fields={"method_name": "slow overlap"},
        )
        s.add(run)
        s.commit()
        rid = run.id
    enqueue_code_run(b.conn, rid, b.settings)
    w = worker_process(b, "--queue", "runs")

    def stage():
        with b.session() as s:
            return s.get(CodeRun, rid)

    try:
        assert wait_for(lambda: stage().stage == "running", timeout=60), stage()
        time.sleep(1.0)
        kill_group(w)
    finally:
        if w.poll() is None:
            kill_group(w)
    assert stage().stage == "running" and stage().attempts == 1
    # nothing of the killed run lives on: bwrap and the sandbox die with the worker
    import psutil

    def orphans():
        return [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if "predict.py" in " ".join(p.info["cmdline"] or []) and "bwrap" not in p.name()
        ]

    assert wait_for(lambda: not orphans(), timeout=10), orphans()
    time.sleep(b.settings.stale_after + 1)  # the dead worker's heartbeat goes stale
    got = reconcile(b.settings, b.engine, b.conn)
    assert got["runs_requeued"] == 1, got
    burst(b, ("runs",))
    r = stage()
    assert (r.stage, r.attempts) == ("ran", 2), (r.stage, r.attempts, r.reason, r.log[-500:])
    burst(b, ("scoring",))
    with b.session() as s:
        subs = s.exec(select(Submission).where(Submission.phase_id == phase_id)).all()
        assert [x.id for x in subs] == [r.submission_id]
        assert subs[0].status == "scored" and subs[0].attempts == 1
    # another pass finds nothing to do
    assert reconcile(b.settings, b.engine, b.conn)["runs_requeued"] == 0


def test_the_lexical_baselines_run_through_the_same_path_with_todays_files(
    embedded_backend, tmp_path
):
    """Each task's lexical baseline as a code run of the baselines team: its output is byte for
    byte the file `baselines run` writes today, so recording today's file answers with the code
    run's submission (the same run, the same scores)."""
    from backbone import burst

    from baselines.run import run_baselines
    from baselines.systems import SYSTEMS, Options
    from server.actions.baselines import record_baseline
    from server.actions.code_runs import record_baseline_runs

    b = embedded_backend
    tasks = [t for t in SYSTEMS if "lexical" in SYSTEMS[t]]
    queued = {}
    with b.session() as s:
        for t in tasks:
            (rec,) = record_baseline_runs(
                s,
                task_id=t,
                system="lexical",
                options=Options(),
                phases=["test"],
                settings=b.settings,
            )
            queued[t] = rec["run"]
    burst(b, ("runs",))
    burst(b, ("scoring",))
    today = run_baselines(
        tasks, ["lexical"], Options(progress=False), tmp_path / "out", b.settings.home
    )
    for r in today:
        with b.session() as s:
            run = s.get(CodeRun, queued[r["task"]])
            assert run.stage == "ran", (r["task"], run.reason, run.log[-800:])
            sub = s.get(Submission, run.submission_id)
            assert sub.is_baseline and sub.status == "scored", (r["task"], sub.errors)
        digest = __import__("hashlib").sha256(Path(r["file"]).read_bytes()).hexdigest()
        assert sub.file_sha256 == digest, r["task"]
        (again,) = record_baseline(r, phases=["test"], settings=b.settings)
        assert again == {"phase": "test", "submission_id": sub.id, "duplicate": True}
    # the command line queues the same: asked again, the same archive answers with the same run
    from click.testing import CliRunner

    from cli.main import main

    r = CliRunner().invoke(
        main,
        ["baselines", "run", "--task", "tric-binary", "--system", "lexical"]
        + ["--phase", "test", "--enqueue", "--sandbox", "--json"],
    )
    assert r.exit_code == 0, r.output
    (job,) = json.loads(r.stdout)
    assert job["run"] == queued["tric-binary"] and job["status"] == "duplicate"


@pytest.mark.browser
@pytest.mark.slow
def test_the_web_form_runs_a_system_to_its_board_row(app, live, driver, tmp_path):  # noqa: F811
    """In Chromium at 1366 and 390 px: a participant submits the example system on the web form,
    follows the run page from queued to ran, and its output's submission is on the board; the
    organizer's list of runs shows it. The console stays clean; no page is wider than the window."""
    from browserkit import SHOTS, _body, _errors, _fill, _go, _sign_in, _width
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from server.jobs.run_jobs import run_system
    from server.jobs.scoring import score_submission

    _competition(app)
    archive = tmp_path / "system.zip"
    _zip(SYSTEM, archive)
    for width in ("wide", "phone"):
        _width(driver, width)
        _sign_in(driver, live, "ann@x.org")
        driver.get(f"{live}/tasks/{TASK}")
        assert "submit a system" in _body(driver)
        driver.get(f"{live}/tasks/{TASK}/system")
        Select(driver.find_element(By.NAME, "phase")).select_by_value("systems")
        driver.find_element(By.NAME, "code").send_keys(str(archive))
        _fill(driver, "method_name", f"overlap {width}")
        _fill(driver, "fact.system_description", "Jaccard overlap of the words")
        if width == "phone":  # a second, different archive: the first one is the same run
            _zip(SYSTEM, archive, {"README": "phone"})
            driver.find_element(By.NAME, "code").send_keys(str(archive))
        _go(driver, driver.find_element(By.CSS_SELECTOR, "main form button[type=submit]"))
        assert "/runs/" in driver.current_url, _body(driver)[:500]
        run_id = int(driver.current_url.rsplit("/", 1)[1])
        assert "queued" in _body(driver)
        assert driver.execute_script("return document.documentElement.scrollWidth") <= (
            driver.execute_script("return window.innerWidth")
        )
        got = run_system(run_id)
        assert got["stage"] == "ran", got
        score_submission(got["submission"])
        driver.get(f"{live}/runs/{run_id}")
        body = _body(driver)
        assert "ran" in body and f"submission #{got['submission']}" in body and "Log" in body
        assert "validated and scored" in body
        SHOTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(SHOTS / f"blind-run-{width}.png"))
        _go(driver, driver.find_element(By.LINK_TEXT, f"submission #{got['submission']}"))
        assert "scored" in _body(driver)
        assert _errors(driver) == []
    _sign_in(driver, live, "admin@x.org")
    driver.get(f"{live}/tasks/{TASK}/runs")
    assert driver.find_elements(By.CSS_SELECTOR, "table tbody tr"), _body(driver)[:500]
    assert _errors(driver) == []
