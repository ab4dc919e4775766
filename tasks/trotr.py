"""TRiC (binary and ranking) and TRaC, from the TRoTR benchmark (Periti et al., EMNLP 2024): the
importer that turns a TRoTR checkout into each task's bundle. What the tasks are lives in their
specs (tasks/specs/tric-binary.yaml, tric-ranking.yaml, trac.yaml), the importer's options in
tasks/builtin.py."""

from __future__ import annotations

from pathlib import Path

from tasks.base import Task
from tasks.builtin import CROSS_VALIDATED, HELD_OUT
from tasks.bundle import ReleaseBundle
from tasks.errors import ReleaseError
from tasks.release import as_float, locate, read_jsonl, read_table
from tasks.store import TaskStore

_INPUT_FIELDS = (
    "instanceID",
    "dataID1",
    "dataID2",
    "lemma",
    "context1",
    "context2",
    "indices_target_token1",
    "indices_target_token2",
    "indices_target_sentence1",
    "indices_target_sentence2",
)


def _root(source: Path) -> Path:
    return locate(Path(source), "datasets", "TRoTR")


def _pairs(path: Path, kind: str) -> list[tuple[int, dict]]:
    rows = list(read_jsonl(path, required=_INPUT_FIELDS + ("label",)))
    seen: dict[str, int] = {}
    for line, r in rows:
        iid = r["instanceID"]
        if not isinstance(iid, str):
            raise ReleaseError(path, f"instanceID must be a string, found {iid!r}", line)
        if iid in seen:
            raise ReleaseError(path, f"instanceID {iid!r} repeats line {seen[iid]}", line)
        seen[iid] = line
        v = as_float(path, line, "label", r["label"])
        if kind == "binary" and v not in (0.0, 1.0):
            raise ReleaseError(path, f"binary label must be 0 or 1, found {r['label']!r}", line)
        r["label"] = int(v) if kind == "binary" else v
    return rows


def _split_rows(fold_dir: Path, split: str, kind: str) -> tuple[list[dict], dict[str, str]]:
    """A fold's dev or test pairs and each one's subset (`oov` or `iov`, from the release's
    `{split}.oov.*` / `{split}.iov.*` files)."""
    rows = [r for _, r in _pairs(fold_dir / f"{split}.{kind}.jsonl", kind)]
    known = {r["instanceID"] for r in rows}
    subset_of: dict[str, str] = {}
    for sub in ("oov", "iov"):
        p = fold_dir / f"{split}.{sub}.{kind}.jsonl"
        for line, r in _pairs(p, kind):
            if r["instanceID"] not in known:
                raise ReleaseError(
                    p, f"instanceID {r['instanceID']!r} is not in {split}.{kind}.jsonl", line
                )
            if r["instanceID"] in subset_of:
                raise ReleaseError(
                    p, f"instanceID {r['instanceID']!r} is in both oov and iov", line
                )
            subset_of[r["instanceID"]] = sub
    missing = [r["instanceID"] for r in rows if r["instanceID"] not in subset_of]
    if missing:
        raise ReleaseError(
            fold_dir,
            f"{len(missing)} {split} instance(s) in neither the oov nor "
            f"the iov file, e.g. {missing[0]!r}",
        )
    return rows, subset_of


def _counts(rows: list[dict], subset_of: dict[str, str]) -> dict:
    return {
        "all": len(rows),
        "oov": sum(subset_of[r["instanceID"]] == "oov" for r in rows),
        "iov": sum(subset_of[r["instanceID"]] == "iov" for r in rows),
    }


def _release_folds(root: Path) -> list[int]:
    found = []
    for p in (root / "datasets").glob("FOLD_*"):
        n = p.name[len("FOLD_") :]
        if n.isdigit() and (p / "pair-by-line").is_dir():
            found.append(int(n))
    return sorted(found)


def _import_tric(
    task: Task, source: Path, store: TaskStore, fold: int, protocol: str = HELD_OUT
) -> dict:
    kind = "binary" if task.id == "tric-binary" else "ranking"
    root = _root(source)
    fold_dir = root / "datasets" / f"FOLD_{fold}" / "pair-by-line"
    if not fold_dir.is_dir():
        raise ReleaseError(fold_dir, f"fold {fold} not found (the release has FOLD_1 ... FOLD_10)")
    if protocol not in (HELD_OUT, CROSS_VALIDATED):
        raise ReleaseError(
            source, f"unknown protocol {protocol!r} ({HELD_OUT} or {CROSS_VALIDATED})"
        )
    counts: dict = {}
    # the cross-validated protocol publishes every fold's labels: no split of it may be hidden
    splits = ["dev"] if protocol == CROSS_VALIDATED else ["dev", "test"]
    # the release repeats a few test instances in the same fold's dev or train file (one each in
    # folds 1 to 3); under the held-out protocol they stay in the hidden test split only
    hidden = (
        {r["instanceID"] for r in _split_rows(fold_dir, "test", kind)[0]}
        if protocol == HELD_OUT
        else set()
    )
    notes = []
    with ReleaseBundle(task, store) as b:
        for split in list(splits):
            rows, subset_of = _split_rows(fold_dir, split, kind)
            if split != "test" and hidden & {r["instanceID"] for r in rows}:
                dropped = sorted(hidden & {r["instanceID"] for r in rows})
                rows = [r for r in rows if r["instanceID"] not in hidden]
                notes.append(_dropped_note(split, dropped))
            inputs = [
                {**{k: r[k] for k in _INPUT_FIELDS}, "subset": subset_of[r["instanceID"]]}
                for r in rows
            ]
            gold = [
                {
                    "instanceID": r["instanceID"],
                    "label": r["label"],
                    "subset": subset_of[r["instanceID"]],
                }
                for r in rows
            ]
            b.write_jsonl(split, "inputs.jsonl", inputs)
            b.write_jsonl(split, "gold.jsonl", gold)  # dev's is public: the spec says so
            counts[split] = _counts(rows, subset_of)
        train = [r for _, r in _pairs(fold_dir / f"train.{kind}.jsonl", kind)]
        if hidden & {r["instanceID"] for r in train}:
            notes.append(_dropped_note("train", sorted(hidden & {r["instanceID"] for r in train})))
            train = [r for r in train if r["instanceID"] not in hidden]
        b.write_jsonl(
            "train",
            "train.jsonl",
            [{**{k: r[k] for k in _INPUT_FIELDS}, "label": r["label"]} for r in train],
        )
        counts["train"] = {"all": len(train)}
        folds = _release_folds(root)
        cv = task.cross_validation
        per_fold = {}
        if cv is not None and len(folds) >= 2 and protocol == CROSS_VALIDATED:
            per_fold = _import_folds(b, root, kind, folds, cv)
            counts[cv.split] = {
                "all": sum(c["test"]["all"] for c in per_fold.values()),
                "folds": len(folds),
            }
            splits.append(cv.split)
        manifest = {
            "task": task.id,
            "version": task.version,
            "source": "TRoTR",
            "fold": fold,
            "protocol": protocol,
            "splits": splits,
            "notes": notes,
            "counts": counts,
        }
        if cv is not None:
            manifest["cross_validation"] = {
                "split": cv.split,
                "folds": folds if per_fold else [],
                "counts": per_fold,
                "note": (
                    ""
                    if per_fold
                    else f"the release holds {len(folds)} fold(s): no {cv.split} split"
                    if protocol == CROSS_VALIDATED
                    else f"imported for the {HELD_OUT} protocol: no {cv.split} split (its folds' "
                    f"labels cover the hidden test split; import with --protocol {CROSS_VALIDATED})"
                ),
            }
        judgments = root / "judgments" / "TRoTR.tsv"
        derived = None
        if judgments.is_file():  # the human ceiling (tric-ranking's board shows it)
            # numpy, scipy and krippendorff load only when an import computes human rows
            from tasks.agreement import save_agreement, trotr_agreement_cached

            # computed once per release and code: a re-import reuses the task's cached figures
            got = trotr_agreement_cached(judgments, b.store.root if b.store.root.is_dir() else None)

            def derived(st) -> None:
                manifest["agreement"] = save_agreement(st.tmp, got)

        return b.install(manifest, derived)


def _dropped_note(split: str, ids: list[str]) -> str:
    return (
        f"{len(ids)} instance(s) of the {split} file are also in the hidden test split and were "
        f"left out of {split} ({', '.join(ids[:3])})"
    )


def _import_folds(b: ReleaseBundle, root: Path, kind: str, folds: list[int], cv) -> dict:
    """The cross-validated split: every fold's test pairs, each with its fold (what a submission
    answers), and each fold's labelled train and dev pairs (public: TRoTR's protocol trains and
    tunes on them). An instance is in the test sets of several folds, and in the training data of
    others, so this split's gold is no secret: its board ranks on all of it."""
    inputs, gold, dev, train = [], [], [], []
    per_fold: dict[str, dict] = {}
    for f in folds:
        fold_dir = root / "datasets" / f"FOLD_{f}" / "pair-by-line"
        rows, subset_of = _split_rows(fold_dir, "test", kind)
        for r in rows:
            inputs.append(
                {
                    cv.field: f,
                    **{k: r[k] for k in _INPUT_FIELDS},
                    "subset": subset_of[r["instanceID"]],
                }
            )
            gold.append(
                {
                    cv.field: f,
                    "instanceID": r["instanceID"],
                    "label": r["label"],
                    "subset": subset_of[r["instanceID"]],
                }
            )
        d_rows, d_subset = _split_rows(fold_dir, "dev", kind)
        dev += [
            {
                cv.field: f,
                **{k: r[k] for k in _INPUT_FIELDS},
                "subset": d_subset[r["instanceID"]],
                "label": r["label"],
            }
            for r in d_rows
        ]
        t_rows = [r for _, r in _pairs(fold_dir / f"train.{kind}.jsonl", kind)]
        train += [
            {cv.field: f, **{k: r[k] for k in _INPUT_FIELDS}, "label": r["label"]} for r in t_rows
        ]
        per_fold[str(f)] = {
            "test": _counts(rows, subset_of),
            "dev": len(d_rows),
            "train": len(t_rows),
        }
    b.write_jsonl(cv.split, "inputs.jsonl", inputs)
    b.write_jsonl(cv.split, "dev.jsonl", dev)
    b.write_jsonl(cv.split, "train.jsonl", train)
    b.write_jsonl(cv.split, "gold.jsonl", gold)  # not published: the spec says so
    return per_fold


def _import_trac(task: Task, source: Path, store: TaskStore) -> dict:
    root = _root(source)
    gold_path = root / "datasets" / "trac_gold_scores.tsv"
    gold: dict[str, float] = {}
    for line, r in read_table(gold_path, ("lemma", "topic_variation")):
        if r["lemma"] in gold:
            raise ReleaseError(gold_path, f"target {r['lemma']!r} appears twice", line)
        gold[r["lemma"]] = as_float(gold_path, line, "topic_variation", r["topic_variation"])
    uses_path = root / "data" / "uses.tsv"
    uses = {}
    for _line, r in read_table(
        uses_path, ("dataID", "context", "indices_target_token", "lemma"), "\t"
    ):
        uses[r["dataID"]] = r
    inst_path = root / "data" / "instances.tsv"
    pairs = []
    for line, r in read_table(inst_path, ("instanceID", "dataIDs"), "\t"):
        ids = r["dataIDs"].split(",")
        if len(ids) != 2:
            raise ReleaseError(
                inst_path, f"dataIDs must name two uses, found {r['dataIDs']!r}", line
            )
        for d in ids:
            if d not in uses:
                raise ReleaseError(inst_path, f"use {d!r} is not in data/uses.tsv", line)
        u1, u2 = uses[ids[0]], uses[ids[1]]
        if u1["lemma"] != u2["lemma"]:
            raise ReleaseError(inst_path, "the two uses quote different targets", line)
        if u1["lemma"] not in gold:
            continue
        pairs.append(
            {
                "target": u1["lemma"],
                "instanceID": r["instanceID"],
                "dataID1": ids[0],
                "dataID2": ids[1],
                "context1": u1["context"],
                "context2": u2["context"],
                "indices_target_token1": u1["indices_target_token"],
                "indices_target_token2": u2["indices_target_token"],
            }
        )
    covered = {p["target"] for p in pairs}
    lacking = [t for t in gold if t not in covered]
    if lacking:
        raise ReleaseError(
            inst_path, f"{len(lacking)} gold target(s) have no annotated pairs, e.g. {lacking[0]!r}"
        )
    pairs.sort(key=lambda p: (p["target"], p["instanceID"]))
    with ReleaseBundle(task, store) as b:
        b.write_jsonl("test", "inputs.jsonl", pairs)
        b.write_jsonl("test", "targets.jsonl", [{"target": t} for t in sorted(gold)])
        b.write_jsonl("test", "gold.jsonl", [{"target": t, "score": gold[t]} for t in sorted(gold)])
        manifest = {
            "task": task.id,
            "version": task.version,
            "source": "TRoTR",
            "splits": ["test"],
            "counts": {"test": {"targets": len(gold), "pairs": len(pairs)}},
        }
        return b.install(manifest)


def import_trotr(
    task: Task, *, source, store: TaskStore, fold: int = 1, protocol: str = HELD_OUT, **_
) -> dict:
    """Build a TRoTR task (tric-binary, tric-ranking or trac) from a TRoTR checkout, for the
    held-out protocol (one fold's test hidden) or the cross-validated one (every fold public)."""
    if task.id == "trac":
        return _import_trac(task, Path(source), store)
    return _import_tric(task, Path(source), store, int(fold), protocol or HELD_OUT)
