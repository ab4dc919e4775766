"""Running the baselines: write each system's submission, then score it with the offline scorer."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from baselines.models import BaselineError
from baselines.systems import CROSS_SYSTEMS, SYSTEMS, Models, Options, write_submission
from tasks import get_task
from tasks.store import TaskStore


def plan(task_ids: list[str] | None, systems: list[str] | None, options: Options, home=None
         ) -> tuple[list[tuple[str, str]], list[str]]:
    """The (task, system) runs asked for, and a note for each one left out and why.

    With no task given, every imported task; with no system given, every system that applies,
    leaving out the cross-encoder ones when no cross-encoder model is given.
    """
    notes: list[str] = []
    if task_ids:
        tasks = [get_task(t).id for t in task_ids]
    else:
        tasks = [t for t in SYSTEMS if TaskStore(t, home).exists()]
        notes += [f"{t}: not imported, skipped" for t in SYSTEMS if t not in tasks]
    runs = []
    for t in tasks:
        applicable = SYSTEMS[t]
        if systems:
            wrong = [s for s in systems if s not in applicable]
            if wrong and len(tasks) == 1:
                raise BaselineError(f"system(s) {', '.join(wrong)} do not apply to {t} "
                                    f"(systems: {', '.join(applicable)})")
            chosen = [s for s in systems if s in applicable]
        else:
            chosen = list(applicable)
            if not options.cross_model:
                left = [s for s in chosen if s in CROSS_SYSTEMS]
                chosen = [s for s in chosen if s not in CROSS_SYSTEMS]
                notes += [f"{t}/{s}: no --cross-model given, skipped" for s in left]
        runs += [(t, s) for s in chosen]
    return runs, notes


def run_baselines(task_ids: list[str] | None = None, systems: list[str] | None = None,
                  options: Options | None = None, out_dir: str | Path = "baselines-out", home=None,
                  split: str = "test", log=None) -> list[dict]:
    """Write and score every asked-for (task, system); returns one result per run:
    {task, system, model, file, scores (the scorer's JSON contract), seconds, device}."""
    from scorer import score_file

    options = options or Options()
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

            raise TaskNotImported(f"task {task_id!r} has no data in {store.home}; import it with: "
                                  f"{get_task(task_id).import_help}")
        t0 = time.perf_counter()
        path = write_submission(task_id, system, store, Path(out_dir), models)
        seconds = time.perf_counter() - t0
        scores = score_file(task_id, path, split, home)
        device = next((m.device for m in models.loaded.values()), "cpu") if system != "lexical" else "cpu"
        results.append({"task": task_id, "system": system, "model": models.model_name(system),
                        "file": str(path), "scores": scores, "seconds": round(seconds, 3),
                        "device": device})
        p = scores["primary"]
        log(f"{task_id}/{system}: {p['name']} on {p['subset']} = {p['value']:.4f} ({seconds:.1f} s)")
    return results


def record_baseline(result: dict, *, server: str | None = None, token: str | None = None, home=None) -> None:
    """Record one run of `run_baselines` on the leaderboard as a baseline entry.

    TO BE WIRED TO THE SERVER (issue 5 builds on the server issue): the entry must go through the
    same scoring path as a participant's submission -- upload `result["file"]` as a submission of a
    reserved "baselines" team (locally through the server's library functions with `home`, or to
    `server` with an organizer's `token`), marked as a baseline, with `result["system"]` and
    `result["model"]` as its description -- and never insert `result["scores"]` directly.
    """
    missing = [k for k in ("task", "system", "model", "file", "scores") if k not in result]
    if missing:
        raise ValueError(f"not a baseline result: missing {', '.join(missing)}")
    raise NotImplementedError("recording baselines on the leaderboard waits for the server "
                              "(server/): see baselines.run.record_baseline's docstring")
