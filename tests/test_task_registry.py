"""One contract, run over every registered task (as mteb runs its tests over its registry): a task
added later gets these tests for free, from its declaration alone.

Each task is imported from the synthetic release its declaration makes (`Task.demo`), validated
with good and bad files, scored (on the whole split and on both parts of a stratified partition),
and shown on a leaderboard through the real queue.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from backbone import burst, make_team, phase, submit
from helpers import tree_bytes

from scorer import (
    SubmissionInvalid,
    partition_strata,
    partition_units,
    score_file,
    score_validated,
    validate_file,
)
from scorer.metrics import REGISTRY
from scorer.partition import stratified_partition
from tasks import all_tasks, get_task
from tasks.base import resolve
from tasks.importers import import_task
from tasks.store import TaskStore

TASKS = [t.id for t in all_tasks()]


@pytest.fixture(scope="module")
def contract_home(tmp_path_factory) -> Path:
    """Every registered task imported from its declared demo release, twice (the second import
    must change no byte)."""
    h = tmp_path_factory.mktemp("contract-home")
    rel = tmp_path_factory.mktemp("contract-releases")
    for t in all_tasks():
        assert t.demo is not None, f"{t.id} declares no demo data"
        options = resolve(t.demo.release)(rel / t.id, 120)
        import_task(t.id, h, **options)
        first = tree_bytes(TaskStore(t.id, h).root)
        import_task(t.id, h, **options)
        assert tree_bytes(TaskStore(t.id, h).root) == first, t.id
    return h


def _submission(task, home, tmp_path, noise: float, seed: int = 1, split: str = "test") -> Path:
    fn = resolve(task.demo.predictions)
    data, name = fn(task, TaskStore(task.id, home), split, noise, random.Random(seed))
    p = tmp_path / f"{noise}-{seed}-{name}"
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("task_id", TASKS)
def test_the_declaration_is_complete(task_id):
    t = get_task(task_id)
    assert not [m for m in t.metrics if m not in REGISTRY], "metrics the registry lacks"
    for m in t.metrics:
        if REGISTRY[m].greater_is_better is not None:
            assert t.metric_direction(m) == REGISTRY[m].greater_is_better, m
    assert t.primary[1] in t.metrics and t.primary[0] in t.subsets
    assert t.format.key and all(k in [f.name for f in t.format.fields] for k in t.format.key)
    assert callable(resolve(t.importer)) and callable(resolve(t.demo.release))
    assert callable(resolve(t.demo.predictions))
    assert not t.agreement_rows or (t.agreement and callable(resolve(t.agreement_rows)))
    flags = [o.flag for o in t.import_options]
    assert len(flags) == len(set(flags)) and any(o.required for o in t.import_options)
    for p in t.paper_rows:  # every figure lands in a column of the boards on its split
        from server.boards.leaderboard import columns_for

        folds = [
            str(f) for f in range(1, (t.cross_validation.folds if t.cross_validation else 0) + 1)
        ]
        keys = {c.key for c in columns_for(t, p.split, folds)}
        assert p.split in t.splits and p.source and {k for k, _ in p.values} <= keys, (
            p.method,
            p.split,
        )
    for r in t.references:
        assert r.subset in t.subsets and r.metric in t.metrics and r.source
        assert r.split in ("", *t.splits), (r.name, r.split)


@pytest.mark.parametrize("task_id", TASKS)
def test_import_keeps_gold_apart_and_says_what_it_holds(contract_home, task_id):
    t = get_task(task_id)
    st = TaskStore(task_id, contract_home)
    m = st.manifest()
    assert m["task"] == task_id and set(m["splits"]) <= set(t.splits) and m["splits"]
    for split in m["splits"]:
        assert list((st.root / "gold" / split).rglob("*")), split
    assert all("gold" not in p.relative_to(st.root).parts[:1] for p in st.public_files())


@pytest.mark.parametrize("task_id", TASKS)
def test_good_files_validate_and_score(contract_home, tmp_path, task_id):
    t = get_task(task_id)
    noisy = score_file(task_id, _submission(t, contract_home, tmp_path, 0.3), home=contract_home)
    perfect = score_file(task_id, _submission(t, contract_home, tmp_path, 0.0), home=contract_home)
    assert list(noisy["metrics"]) == list(t.subsets)
    for sub, values in noisy["metrics"].items():
        assert set(values) == set(t.metrics), sub
    sub, name = t.primary
    assert noisy["primary"]["value"] is not None, noisy["notes"]
    assert noisy["primary"] == {
        "name": name,
        "subset": sub,
        "value": noisy["metrics"][sub][name],
        "greater_is_better": t.greater_is_better,
    }
    better = (lambda a, b: a >= b) if t.greater_is_better else (lambda a, b: a <= b)
    assert better(perfect["primary"]["value"], noisy["primary"]["value"])
    assert noisy["signature"].startswith(f"{name}|task:{task_id}|")


@pytest.mark.parametrize("task_id", TASKS)
def test_bad_files_are_refused_with_every_problem(contract_home, tmp_path, task_id):
    t = get_task(task_id)
    good = _submission(t, contract_home, tmp_path, 0.2)
    lines = good.read_bytes().splitlines(keepends=True)
    body = lines[1:] if good.suffix != ".jsonl" else lines  # a CSV's header stays first
    text = b"".join(lines)
    units = partition_units(task_id, home=contract_home)
    if t.kind == "spans":  # a detection names its pair by its documents; a repeat counts once
        units = [json.loads(body[0])["this_reference"]]
    named = next(u.encode() for u in units if u.encode() in text)
    bad = {
        "empty": b"",
        "not a table": b"{{{\nnot json\n",
        "a row twice": text + b"".join(body[-1:]),
        "an unknown id": text.replace(named, b"no-such-id-anywhere", 1),
    }
    for what, data in bad.items():
        if t.kind == "spans" and what == "a row twice":
            continue  # PAN's evaluator reads detections into a set: valid, counted once
        p = tmp_path / f"bad{good.suffix}"
        p.write_bytes(data)
        with pytest.raises(SubmissionInvalid) as e:
            validate_file(task_id, p, home=contract_home)
        assert e.value.total >= 1 and e.value.problems, what


@pytest.mark.parametrize("task_id", TASKS)
def test_strata_cover_every_unit_and_both_parts_are_scored(contract_home, tmp_path, task_id):
    t = get_task(task_id)
    units = partition_units(task_id, home=contract_home)
    strata = partition_strata(task_id, home=contract_home)
    assert [u for u, _ in strata] == units
    if t.groups and t.kind != "links":
        assert {s for _, s in strata} <= set(t.groups) | {"other"}
    v = validate_file(task_id, _submission(t, contract_home, tmp_path, 0.2), home=contract_home)
    public, private = stratified_partition(strata, seed=7, public_fraction=0.5)
    for part in (public, private):
        r = score_validated(v, home=contract_home, only=part)
        assert r["primary"]["value"] is not None, (task_id, r["notes"])


@pytest.mark.parametrize("task_id", TASKS)
def test_a_scored_run_appears_on_the_board(embedded_backend, task_id):
    from server.boards.leaderboard import build_board
    from server.domain.provenance import current_provenance

    b = embedded_backend
    t = get_task(task_id)
    team, user = make_team(b, f"contract-{task_id}")
    submit(b, team, user, task_id, "test", noise=0.2)
    burst(b)
    ph = phase(b, task_id, "test")
    with b.session() as s:
        board = build_board(s, t, ph, provenance=current_provenance(t, "test", b.settings.home))
    (row,) = [r for r in board.rows if r.team == team.name]
    assert row.rank == 1 and row.values[board.primary.key] is not None


# ---------------------------------------------------------------- what generic code may not know


GENERIC = (
    "scorer/__init__.py",
    "scorer/families.py",
    "scorer/partition.py",
    "cli/main.py",
    "server/demo.py",
)


def test_generic_code_names_no_task():
    """The scorer's families, the CLI's commands and the demo read declarations; they never branch
    on a task's id or its importer."""
    repo = Path(__file__).resolve().parent.parent
    for rel in GENERIC:
        text = (repo / rel).read_text(encoding="utf-8")
        for t in all_tasks():
            for needle in (f'"{t.id}"', f"'{t.id}'", f'"{t.importer}"'):
                assert needle not in text, (rel, needle)


def test_tasks_import_nothing_from_the_scorer():
    import subprocess
    import sys

    code = (
        "import sys, tasks, tasks.importers, tasks.demo; "
        "[__import__(t.importer.split(':')[0]) for t in tasks.all_tasks()]; "
        "print(sorted(m for m in sys.modules if m == 'scorer' or m.startswith('scorer.')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"
