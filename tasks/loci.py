"""Loci Similes: links between Latin query segments and the source segments they reuse."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from tasks.base import Demo, Field, ImportOption, SubmissionFormat, Task
from tasks.errors import ReleaseError
from tasks.release import read_table
from tasks.store import StagedImport, TaskStore

LOCI_SIMILES = Task(
    id="loci-similes",
    # 2: precision/recall/F1 per gold query as locisimiles computes them; IR ranking metrics
    version=2,
    title="Loci Similes: find the intertextual links between Latin texts",
    description=(
        "Query segments (Jerome, Lactantius) reuse source segments (Virgil, Cicero, ...). Submit "
        "every link you predict as a (query_id, source_id) row, optionally with a score for "
        "ranking; a file with the header only (no link) is valid. Scored as the locisimiles "
        "package's IntertextEvaluator scores it: precision, recall, F1 and accuracy are the means "
        "of the per-query values over the queries that have at least one gold link (a query with "
        "no predicted link has precision 0), *_micro the same from counts pooled over those "
        "queries; SMR = (FP+FN)/N, FPR = FP/N and FNR = FN/N (lower is better) over all queries, "
        "TP/FP/FN/TN over all query x source pairs. This is not a pooled F1 over all pairs, "
        "which false links of queries without a gold link would drag down. With scores: "
        "recall, MAP, MRR and nDCG at 10 and 100 (and 1000 for a run that deep) per gold query, "
        "sources ranked by descending score, ties by descending source_id (trec_eval's rule)."
    ),
    citation="""@misc{schelb-loci-similes,
  title = {Loci Similes: A Benchmark for Extracting Intertextualities in Latin Literature},
  author = {Schelb, Julian and others},
  note = {Evaluation as in the locisimiles package, github.com/julianschelb/locisimiles}
}""",
    licence="locisimiles is open source; the benchmark's segments are imported from the "
    "organizer's copy.",
    source="https://github.com/julianschelb/locisimiles",
    kind="links",
    format=SubmissionFormat(
        fields=(
            Field("query_id", "id", "seg_id of a query segment"),
            Field("source_id", "id", "seg_id of a source segment"),
            Field("score", "float", "optional: confidence, used to rank sources per query"),
        ),
        native="csv",
        example='query_id,source_id,score\n"hier. adv. iovin. 1.1","verg. aen. 10.636",0.93\n',
        key=("query_id", "source_id"),
        optional=("score",),
        max_bytes=1024 * 1024 * 1024,  # a top-100 run at the paper's scale: 8.3 M links, ~400 MiB
    ),
    metrics=(
        "f1",
        "precision",
        "recall",
        "accuracy",
        "f1_micro",
        "precision_micro",
        "recall_micro",
        "smr",
        "fpr",
        "fnr",
        "recall@10",
        "map@10",
        "mrr@10",
        "ndcg@10",
        "recall@100",
        "map@100",
        "mrr@100",
        "ndcg@100",
        "recall@1000",
        "map@1000",
        "mrr@1000",
        "ndcg@1000",
        "tp",
        "fp",
        "fn",
        "tn",
        "n",
    ),
    subsets=("all",),
    primary=("all", "f1"),
    key_columns=("all/precision", "all/recall", "all/mrr"),
    greater_is_better=True,
    splits=("test",),
    importer="tasks.loci:import_loci",
    import_help=(
        "palimpsest tasks import loci-similes --query queries.csv --source sources.csv "
        "--gold ground_truth.csv"
    ),
    import_options=(
        ImportOption(
            "--query", "query", "file", "Loci Similes query segments (seg_id,text).", required=True
        ),
        ImportOption(
            "--source",
            "source",
            "file",
            "Loci Similes source segments (seg_id,text).",
            required=True,
        ),
        ImportOption(
            "--gold",
            "gold",
            "file",
            "Loci Similes gold links (query_id,source_id,label).",
            required=True,
        ),
    ),
    unit="query",
    demo=Demo(release="tasks.demo:loci_release", predictions="tasks.demo:link_predictions"),
    secondary=(("all", "smr", False),),
)


def _segments(path: Path, role: str) -> list[tuple[str, str]]:
    out, seen = [], {}
    for line, r in read_table(Path(path), ("seg_id", "text"), ","):
        sid = r["seg_id"]
        if not sid.strip() or "\n" in sid or "\r" in sid:
            raise ReleaseError(path, f"empty or multi-line seg_id in the {role} file", line)
        if sid in seen:
            raise ReleaseError(path, f"seg_id {sid!r} repeats line {seen[sid]}", line)
        seen[sid] = line
        out.append((sid, r["text"]))
    if not out:
        raise ReleaseError(path, f"the {role} file has no segments")
    return out


def _csv(rows, header) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def import_loci(task: Task, *, query, source, gold, store: TaskStore, **_) -> dict:
    """Build loci-similes from locisimiles CSVs: `seg_id,text` twice and
    `query_id,source_id,label`."""
    queries = _segments(query, "query")
    sources = _segments(source, "source")
    qset, sset = {q for q, _ in queries}, {s for s, _ in sources}
    links, seen = [], set()
    gold = Path(gold)
    for line, r in read_table(gold, ("query_id", "source_id", "label"), ","):
        q, s, label = r["query_id"], r["source_id"], r["label"].strip().lower()
        if q not in qset:
            raise ReleaseError(gold, f"query_id {q!r} is not in the query file", line)
        if s not in sset:
            raise ReleaseError(gold, f"source_id {s!r} is not in the source file", line)
        if label in ("0", "0.0", "", "no_match", "no match", "negative", "none", "false"):
            continue
        if (q, s) in seen:
            raise ReleaseError(gold, f"link ({q!r}, {s!r}) appears twice", line)
        seen.add((q, s))
        links.append((q, s))
    with StagedImport(store) as st:
        st.write_text("public", "test", "queries.csv", _csv(queries, ("seg_id", "text")))
        st.write_text("public", "test", "sources.csv", _csv(sources, ("seg_id", "text")))
        st.write_text("index", "test", "query_ids.txt", "".join(q + "\n" for q, _ in queries))
        st.write_text("index", "test", "source_ids.txt", "".join(s + "\n" for s, _ in sources))
        st.write_text("gold", "test", "links.csv", _csv(links, ("query_id", "source_id")))
        manifest = {
            "task": task.id,
            "version": task.version,
            "source": "locisimiles CSV",
            "splits": ["test"],
            "counts": {
                "test": {"queries": len(queries), "sources": len(sources), "links": len(links)}
            },
        }
        st.commit(manifest)
    return manifest
