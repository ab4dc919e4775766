"""Running the baselines: write each system's submission, then score it with the offline scorer."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

from baselines.models import BaselineError
from baselines.systems import CROSS_SYSTEMS, SYSTEMS, Models, Options, write_submission
from scorer import score_file
from scorer.errors import TaskNotImported
from tasks import get_task
from tasks.store import TaskStore

MODEL_PACKAGES = ("torch", "sentence_transformers")
INSTALL_MODELS = "pip install torch==2.13.0 && pip install -e '.[baselines]'"


def missing_model_packages() -> list[str]:
    """The packages the model-based systems need that this Python lacks (nothing is imported)."""

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
                f"{task_id}/{system}: {p['name']} on {p['subset']} = {p['value']:.4f} "
                f"({seconds:.1f} s)"
            )
    return results


def method_label(system: str, model: str | None) -> str:
    """What a baseline's row is called on the leaderboard, e.g. `bi-encoder-mask
    (all-MiniLM-L6-v2)`."""
    return f"{system} ({model})" if model else system


def describe_run(result: dict) -> str:
    """The description a recorded baseline entry carries."""
    what = f"with {result['model']}" if result.get("model") else "model-free"
    return (
        f"Reference system {result['system']} of the task's paper, {what}, written by `palimpsest "
        f"baselines run` on {result.get('device', 'cpu')} and scored like any team's file."
    )


def recorded_method(result: dict) -> str:
    """The leaderboard method of one `run_baselines` result; ValueError for what is not one."""
    missing = [k for k in ("task", "system", "model", "file") if k not in result]
    if missing:
        raise ValueError(f"not a baseline result: missing {', '.join(missing)}")
    return method_label(result["system"], result["model"])
