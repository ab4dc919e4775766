"""Running the baselines: write each system's submission, then score it with the offline scorer."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from baselines.models import BaselineError
from baselines.systems import CROSS_SYSTEMS, SYSTEMS, Models, Options, write_submission
from tasks import get_task
from tasks.store import TaskStore

MODEL_PACKAGES = ("torch", "sentence_transformers")
INSTALL_MODELS = "pip install torch==2.13.0 && pip install -e '.[baselines]'"


def missing_model_packages() -> list[str]:
    """The packages the model-based systems need that this Python lacks (nothing is imported)."""
    import importlib.util

    def absent(name: str) -> bool:
        try:
            return importlib.util.find_spec(name) is None
        except (ImportError, ValueError):  # a finder that refuses it, or a broken half-import
            return True

    return [p for p in MODEL_PACKAGES if absent(p)]


def plan(
    task_ids: list[str] | None,
    systems: list[str] | None,
    options: Options,
    home=None,
    here: bool = True,
) -> tuple[list[tuple[str, str]], list[str]]:
    """The (task, system) runs asked for, and a note for each one left out and why.

    With no task given, every imported task; with no system given, every system that applies,
    leaving out the cross-encoder ones when no cross-encoder model is given and, when the runs are
    `here` (not queued for another machine), the model-based ones when torch or
    sentence-transformers is not installed; asked for by name, those are refused, saying why.
    """
    notes: list[str] = []
    missing = missing_model_packages() if here else []
    split = options.split
    if task_ids:
        tasks = [get_task(t).id for t in task_ids]
        if split != "test":
            wrong = [t for t in tasks if not get_task(t).is_cross_validated(split)]
            if wrong:
                raise BaselineError(
                    f"{', '.join(wrong)}: no cross-validated split {split!r}; their "
                    "baselines answer the test split"
                )
    else:
        tasks = [t for t in SYSTEMS if TaskStore(t, home).exists()]
        notes += [f"{t}: not imported, skipped" for t in SYSTEMS if t not in tasks]
        if split != "test":
            notes += [
                f"{t}: no {split} split, skipped"
                for t in tasks
                if not get_task(t).is_cross_validated(split)
            ]
            tasks = [t for t in tasks if get_task(t).is_cross_validated(split)]
    runs = []
    for t in tasks:
        applicable = SYSTEMS[t]
        if systems:
            wrong = [s for s in systems if s not in applicable]
            if wrong and len(tasks) == 1:
                raise BaselineError(
                    f"system(s) {', '.join(wrong)} do not apply to {t} "
                    f"(systems: {', '.join(applicable)})"
                )
            chosen = [s for s in systems if s in applicable]
        else:
            chosen = list(applicable)
            if not options.cross_model:
                left = [s for s in chosen if s in CROSS_SYSTEMS]
                chosen = [s for s in chosen if s not in CROSS_SYSTEMS]
                notes += [f"{t}/{s}: no --cross-model given, skipped" for s in left]
        if missing and any(s != "lexical" for s in chosen):
            needs = [s for s in chosen if s != "lexical"]
            why = f"{', '.join(missing)} not installed ({INSTALL_MODELS})"
            if systems:
                raise BaselineError(
                    f"system(s) {', '.join(needs)} need a model: {why}; "
                    "the lexical system needs none"
                )
            notes += [f"{t}/{s}: {why}, skipped" for s in needs]
            chosen = [s for s in chosen if s == "lexical"]
        runs += [(t, s) for s in chosen]
    return runs, notes


def run_baselines(
    task_ids: list[str] | None = None,
    systems: list[str] | None = None,
    options: Options | None = None,
    out_dir: str | Path = "baselines-out",
    home=None,
    split: str | None = None,
    log=None,
) -> list[dict]:
    """Write and score every asked-for (task, system); returns one result per run:
    {task, system, model, file, scores (the scorer's JSON contract; None where the split's gold is
    not on this machine), seconds, device}."""
    from scorer import score_file

    options = options or Options()
    split = split or options.split
    options.split = split
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    runs, notes = plan(task_ids, systems, options, home)
    for n in notes:
        log(f"note: {n}")
    models = Models(options)
    results = []
    for task_id, system in runs:
        store = TaskStore(task_id, home)
        if not store.exists():
            from scorer.errors import TaskNotImported

            raise TaskNotImported(
                f"task {task_id!r} has no data in {store.home}; import it with: "
                f"{get_task(task_id).import_help}"
            )
        t0 = time.perf_counter()
        path = write_submission(task_id, system, store, Path(out_dir), models)
        seconds = time.perf_counter() - t0
        if (store.root / "gold" / split).is_dir():
            scores = score_file(task_id, path, split, home)
        else:  # a machine with the public inputs only (`palimpsest download`): the server scores it
            scores = None
            log(
                f"note: {task_id}: no {split} gold in {store.home}, so no score here; "
                "a recorded run is scored by the server"
            )
        device = (
            next((m.device for m in models.loaded.values()), "cpu")
            if system != "lexical"
            else "cpu"
        )
        results.append(
            {
                "task": task_id,
                "split": split,
                "system": system,
                "model": models.model_name(system),
                "file": str(path),
                "scores": scores,
                "seconds": round(seconds, 3),
                "device": device,
            }
        )
        if scores is not None:
            p = scores["primary"]
            log(
                f"{task_id}/{system}: {p['name']} on {p['subset']} = {p['value']:.4f} ({seconds:.1f} s)"
            )
    return results


def method_label(system: str, model: str | None) -> str:
    """What a baseline's row is called on the leaderboard, e.g. `bi-encoder-mask (all-MiniLM-L6-v2)`."""
    return f"{system} ({model})" if model else system


def server_database(settings):
    """The engine of the local server's database, at the migrations' head (the embedded default is
    upgraded; a DATABASE_URL that is behind is refused with BaselineError, saying what to run)."""
    from server.migrate import SchemaError, prepare

    try:
        return prepare(settings)
    except SchemaError as e:
        raise BaselineError(str(e)) from None


def _description(result: dict) -> str:
    what = f"with {result['model']}" if result.get("model") else "model-free"
    return (
        f"Reference system {result['system']} of the task's paper, {what}, written by "
        f"`palimpsest baselines run` on {result.get('device', 'cpu')} and scored like any team's file."
    )


def record_baseline(
    result: dict,
    *,
    server: str | None = None,
    token: str | None = None,
    home=None,
    phases: list[str] | None = None,
    settings=None,
) -> list[dict]:
    """Record one run of `run_baselines` on the leaderboard as a baseline entry.

    The file goes through the participants' path -- stored, validated and scored by the queue -- as
    a submission of the reserved baselines team, in every phase of the task on its test split (or
    in `phases`); the scores in `result` are never inserted. Locally (the server's database and
    queue of `home`, or of `settings`) or on `server` with an organizer's `token` (REST API).
    Recording the same file again returns the first submission (`duplicate: true`).
    Returns one {phase, submission_id, duplicate} per phase.
    """
    missing = [k for k in ("task", "system", "model", "file") if k not in result]
    if missing:
        raise ValueError(f"not a baseline result: missing {', '.join(missing)}")
    method = method_label(result["system"], result["model"])
    if server:
        return _record_remote(result, method, server, token, phases)
    from sqlmodel import Session

    from server.baselines import record_file
    from server.settings import get_settings

    if settings is None:
        settings = get_settings(home)
    with Session(server_database(settings)) as s:
        rec = record_file(
            s,
            task_id=result["task"],
            path=result["file"],
            method_name=method,
            description=_description(result),
            phases=phases,
            settings=settings,
            split=result.get("split", "test"),
        )
    return [r.as_dict() for r in rec]


def _record_remote(
    result: dict, method: str, server: str, token: str | None, phases: list[str] | None
) -> list[dict]:
    from cli.client import Client, ClientError, load_config

    if not token:
        cfg = load_config()
        token = (
            cfg.get("token") if cfg.get("server", "").rstrip("/") == server.rstrip("/") else None
        )
    if not token:
        raise BaselineError(
            f"recording on {server} needs an organizer's API token: give --token "
            "(or PALIMPSEST_TOKEN), or `palimpsest login` to that server first"
        )
    c = Client(server, token)
    try:
        if not c.get_json("/me").get("is_organizer"):
            raise BaselineError(
                f"the token is not an organizer's on {server}: only organizers record baselines"
            )
        if not phases:
            detail = c.get_json(f"/tasks/{result['task']}")
            split = result.get("split", "test")
            phases = [p["name"] for p in detail.get("phases", []) if p.get("split") == split]
            if not phases:
                raise BaselineError(
                    f"task {result['task']!r} has no phase on its {split} split on {server}"
                )
        out = []
        for name in phases:
            body = c.upload(
                f"/tasks/{result['task']}/submissions",
                Path(result["file"]),
                {
                    "phase": name,
                    "baseline": "true",
                    "method_name": method,
                    "description": _description(result),
                },
            )
            out.append(
                {
                    "phase": name,
                    "submission_id": body["id"],
                    "duplicate": bool(body.get("duplicate")),
                }
            )
        return out
    except ClientError as e:
        raise BaselineError(
            f"recording {result['task']}/{result['system']} on {server}: {e}"
        ) from None


def enqueue_baselines(
    task_ids: list[str] | None = None,
    systems: list[str] | None = None,
    options: Options | None = None,
    home=None,
    phases: list[str] | None = None,
) -> list[dict]:
    """Put each asked-for (task, system) run on the baselines queue of the server at `home` (or
    REDIS_URL), for `palimpsest worker --queue baselines` on a machine with the models."""
    from server.queue import connect, enqueue_baseline_run
    from server.settings import get_settings

    options = options or Options()
    settings = get_settings(home)
    runs, _notes = plan(
        task_ids, systems, options, settings.home, here=False
    )  # models: the worker's
    opts = options.job_args()
    try:
        conn = connect(settings)
        conn.ping()
    except Exception as e:  # noqa: BLE001 - any failure to reach Redis
        where = (
            settings.redis_url
            or f"the embedded Redis of {settings.home} (is `palimpsest serve` running?)"
        )
        raise BaselineError(f"cannot reach the queue at {where}: {e}") from None
    jobs = []
    for task_id, system in runs:
        job = enqueue_baseline_run(conn, task_id, system, opts, settings, phases)
        status = job.get_status(refresh=False)
        jobs.append(
            {
                "task": task_id,
                "system": system,
                "job": job.id,
                "status": getattr(status, "value", status) or "queued",
            }
        )
    return jobs
