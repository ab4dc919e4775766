"""The reference systems: each reads a task's public inputs and writes an ordinary submission file.

Every system is a function `(task_id, store, out_path, models, options) -> Path`; `models` is a
`Models` cache so that one run loads each model once.
"""

from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from baselines import pan_align
from baselines.lexical import dice_texts, dice_top_k, words
from baselines.models import (
    BaselineError,
    BiEncoder,
    PairScorer,
    TokenEncoder,
    load_torch,
    resolve_model,
    show_progress,
)
from baselines.names import ALL_SYSTEMS
from tasks import get_task
from tasks.store import TaskStore

TRIC = ("tric-binary", "tric-ranking", "trac")
PAIR_SYSTEMS = ("lexical", "bi-encoder", "bi-encoder-mask", "cross-encoder", "cross-encoder-mask")
SYSTEMS: dict[str, tuple[str, ...]] = {
    "tric-binary": PAIR_SYSTEMS,
    "tric-ranking": PAIR_SYSTEMS,
    "trac": PAIR_SYSTEMS,
    "swissgov-rsd": ("lexical", "diffalign"),
    "loci-similes": ("lexical", "retrieve", "retrieve-rerank"),
    "str": ("lexical", "bi-encoder"),
    "pan-text-alignment": ("ngram-align",),
}
if set(ALL_SYSTEMS) != {s for names in SYSTEMS.values() for s in names}:
    raise ImportError(f"baselines.names lists {ALL_SYSTEMS}; the tasks' systems are {SYSTEMS}")
CROSS_SYSTEMS = frozenset({"cross-encoder", "cross-encoder-mask", "retrieve-rerank"})
MASK = " - "  # what replaces the reused span; the TRoTR authors' code uses " - " (spaces included)


@dataclass
class Options:
    """Settings shared by the systems of one run."""

    model: str | None = None  # bi-encoder / token encoder (default: all-MiniLM-L6-v2)
    cross_model: str | None = None  # cross-encoder (no default: none ships with the project)
    device: str = "auto"
    batch_size: int = 32
    progress: bool | None = None
    top_k: int = 10  # Loci Similes: sources kept per query
    threshold: float = 0.5  # Loci Similes re-ranker: keep a link when its probability >= this
    prefixes: bool = False  # Loci Similes: "Query: " / "Candidate: " before each segment
    split: str = "test"  # the split whose inputs are answered ("cv": every TRoTR fold's test set)

    def job_args(self) -> dict:
        """The settings a queued run carries (JSON; progress bars are the worker's own business)."""
        return {k: v for k, v in asdict(self).items() if k != "progress"}


@dataclass
class Models:
    """Models loaded once per run, keyed by (kind, name)."""

    options: Options
    loaded: dict = field(default_factory=dict)

    def _get(self, kind, cls, spec, **kw):
        key = (kind, spec)
        if key not in self.loaded:
            o = self.options
            self.loaded[key] = cls(
                spec, device=o.device, batch_size=o.batch_size, progress=o.progress, **kw
            )
        return self.loaded[key]

    def bi(self) -> BiEncoder:
        return self._get("bi", BiEncoder, self.options.model)

    def cross(self) -> PairScorer:
        if not self.options.cross_model:
            raise BaselineError(
                "the cross-encoder systems need a cross-encoder model: give --cross-model "
                "(a local directory or installed package; nothing is downloaded)"
            )
        return self._get("cross", PairScorer, self.options.cross_model)

    def tokens(self) -> TokenEncoder:
        return self._get("tokens", TokenEncoder, self.options.model)

    def model_name(self, system: str) -> str | None:
        """The name the results of `system` are labelled with (None for model-free systems)."""
        if system == "lexical":
            return None
        if system in ("cross-encoder", "cross-encoder-mask"):
            return (
                resolve_model(self.options.cross_model).name if self.options.cross_model else None
            )
        name = resolve_model(self.options.model).name
        if system == "retrieve-rerank":
            cross = (
                resolve_model(self.options.cross_model).name if self.options.cross_model else "?"
            )
            return f"{name} + {cross}"
        return name


# ---------------------------------------------------------------- files


def _read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _write_jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def _read_csv(path: Path) -> list[tuple[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        return [(r["seg_id"], r["text"]) for r in reader]


# ---------------------------------------------------------------- TRiC / TRaC


def masked(context: str, span: str) -> str:
    """The context with the reused text (`indices_target_token` "start:end") replaced by MASK."""
    start, end = (int(x) for x in span.split(":"))
    return context[:start] + MASK + context[end:]


def _texts(pair: dict, mask: bool) -> tuple[str, str]:
    if not mask:
        return pair["context1"], pair["context2"]
    return (
        masked(pair["context1"], pair["indices_target_token1"]),
        masked(pair["context2"], pair["indices_target_token2"]),
    )


def pair_relatedness(pairs: list[dict], system: str, models: Models, desc: str = ""):
    """One relatedness score per pair (higher = more related) for a TRiC/TRaC system."""
    mask = system.endswith("-mask")
    texts = [_texts(p, mask) for p in pairs]
    if system == "lexical":
        # Dice over the whole contexts, as STR-2022 does (removing the shared quote scored a little
        # lower on TRoTR fold 1: Spearman .339 against .350).
        return np.array([dice_texts(*t) for t in texts], dtype=np.float64)
    if system in ("bi-encoder", "bi-encoder-mask"):
        enc = models.bi()
        unique = sorted({t for pair in texts for t in pair})
        pos = {t: i for i, t in enumerate(unique)}
        vec = enc.encode(unique, desc=f"{desc} {system}".strip())
        a = vec[[pos[t] for t, _ in texts]]
        b = vec[[pos[t] for _, t in texts]]
        return np.einsum("ij,ij->i", a.astype(np.float64), b.astype(np.float64))
    if system in ("cross-encoder", "cross-encoder-mask"):
        return models.cross().score(texts, desc=f"{desc} {system}".strip())
    raise BaselineError(
        f"system {system!r} does not apply to TRiC/TRaC (systems: {', '.join(PAIR_SYSTEMS)})"
    )


def best_threshold(scores, labels) -> tuple[float, float]:
    """The threshold t (predict 1 when score >= t) that maximises weighted F1 on (scores, labels),
    and that F1. Candidates are the observed scores (and +inf: all 0); among equal F1 the lowest
    threshold wins, as in the TRoTR authors' `set_threshold`."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64)
    n, pos = len(y), int(y.sum())
    neg = n - pos
    order = np.argsort(-s, kind="stable")
    s_sorted, y_sorted = s[order], y[order]
    # k = how many top-scored items are predicted 1; only k at the end of a run of ties is reachable
    ks = [0] + [k for k in range(1, n + 1) if k == n or s_sorted[k] != s_sorted[k - 1]]
    cum = np.concatenate([[0], np.cumsum(y_sorted)])
    best = (-1.0, float("inf"))
    for k in ks:
        tp1 = cum[k]
        fp1, fn1 = k - tp1, pos - tp1
        tp0, fp0, fn0 = neg - fp1, fn1, fp1
        f1_1 = 2 * tp1 / (2 * tp1 + fp1 + fn1) if (2 * tp1 + fp1 + fn1) else 0.0
        f1_0 = 2 * tp0 / (2 * tp0 + fp0 + fn0) if (2 * tp0 + fp0 + fn0) else 0.0
        f1 = (pos * f1_1 + neg * f1_0) / n if n else 0.0
        t = float(s_sorted[k - 1]) if k else float("inf")
        if f1 > best[0] + 1e-12:
            best = (f1, t)
        elif abs(f1 - best[0]) <= 1e-12:  # a tie: k grows, so t only falls
            best = (best[0], t)
    return best[1], best[0]


def run_tric(
    task_id: str, system: str, store: TaskStore, out: Path, models: Models, opts: Options
) -> Path:
    """TRiC (binary: a dev-tuned threshold on the pair score; ranking: the score) and TRaC."""
    if opts.split != "test":
        return _run_tric_folds(task_id, system, store, out, models, opts)
    test = _read_jsonl(store.public("test", "inputs.jsonl"))
    if task_id == "trac":
        rel = pair_relatedness(test, system, models, desc="trac")
        by_target: dict[str, list[float]] = {}
        for p, r in zip(test, rel, strict=True):
            by_target.setdefault(p["target"], []).append(float(r))
        # Gold topic variation is 1 - mean judgment / max mean judgment (TRoTR
        # src/topic_variation_scores.py): high when relatedness is low, so predict 1 - mean
        # relatedness.
        rows = [
            {"target": t, "score": round(1.0 - float(np.mean(v)), 8)}
            for t, v in sorted(by_target.items())
        ]
        return _write_jsonl(out, rows)
    test_rel = pair_relatedness(test, system, models, desc=f"{task_id} test")
    if task_id == "tric-ranking":
        return _write_jsonl(
            out,
            (
                {"instanceID": p["instanceID"], "score": round(float(s), 8)}
                for p, s in zip(test, test_rel, strict=True)
            ),
        )
    dev = _read_jsonl(store.public("dev", "inputs.jsonl"))
    gold = {g["instanceID"]: g["label"] for g in _read_jsonl(store.public("dev", "gold.jsonl"))}
    dev_rel = pair_relatedness(dev, system, models, desc=f"{task_id} dev")
    thr, _ = best_threshold(dev_rel, [int(gold[p["instanceID"]]) for p in dev])
    return _write_jsonl(
        out,
        (
            {"instanceID": p["instanceID"], "label": int(s >= thr)}
            for p, s in zip(test, test_rel, strict=True)
        ),
    )


def _run_tric_folds(
    task_id: str, system: str, store: TaskStore, out: Path, models: Models, opts: Options
) -> Path:
    """TRiC on the cross-validated split: every fold's test pairs, each fold's binary threshold
    tuned on that fold's own dev pairs (TRoTR's protocol); a row per (fold, instance)."""
    task = get_task(task_id)
    if not task.is_cross_validated(opts.split):
        raise BaselineError(f"{task_id} has no cross-validated split {opts.split!r}")
    fold = task.cross_validation.field
    test = _read_jsonl(store.public(opts.split, "inputs.jsonl"))
    test_rel = pair_relatedness(test, system, models, desc=f"{task_id} {opts.split}")
    if task_id == "tric-ranking":
        return _write_jsonl(
            out,
            (
                {fold: p[fold], "instanceID": p["instanceID"], "score": round(float(s), 8)}
                for p, s in zip(test, test_rel, strict=True)
            ),
        )
    dev = _read_jsonl(store.public(opts.split, "dev.jsonl"))
    dev_rel = pair_relatedness(dev, system, models, desc=f"{task_id} {opts.split} dev")
    thresholds = {}
    for f in dict.fromkeys(p[fold] for p in dev):
        idx = [i for i, p in enumerate(dev) if p[fold] == f]
        thresholds[f], _ = best_threshold(dev_rel[idx], [int(dev[i]["label"]) for i in idx])
    missing = sorted({p[fold] for p in test} - thresholds.keys())
    if missing:
        raise BaselineError(f"{task_id}: no dev pairs of fold(s) {missing} to tune a threshold on")
    return _write_jsonl(
        out,
        (
            {fold: p[fold], "instanceID": p["instanceID"], "label": int(s >= thresholds[p[fold]])}
            for p, s in zip(test, test_rel, strict=True)
        ),
    )


# ---------------------------------------------------------------- SwissGov-RSD


def diffalign_scores(va, vb):
    """DiffAlign: each token's score is 1 minus its best cosine to the other document's tokens."""
    if len(va) == 0 or len(vb) == 0:
        return np.ones(len(va)), np.ones(len(vb))
    sim = va.astype(np.float64) @ vb.astype(np.float64).T
    return 1.0 - sim.max(axis=1), 1.0 - sim.max(axis=0)


def _norm(token: str) -> str:
    return "".join(words(token))


def run_swissgov(
    task_id: str, system: str, store: TaskStore, out: Path, models: Models, opts: Options
) -> Path:
    """SwissGov-RSD: DiffAlign, or the lexical baseline (1 when a token's word form is absent from
    the other document, else 0; names, numbers and cognates are what it can match across
    languages)."""
    docs = _read_jsonl(store.public("test", "inputs.jsonl"))
    rows = []
    if system == "lexical":
        for d in docs:
            ta, tb = d["text_a"].split(), d["text_b"].split()
            sa, sb = {_norm(t) for t in ta} - {""}, {_norm(t) for t in tb} - {""}
            rows.append(
                {
                    "id": d["id"],
                    "labels_a": [0.0 if not _norm(t) or _norm(t) in sb else 1.0 for t in ta],
                    "labels_b": [0.0 if not _norm(t) or _norm(t) in sa else 1.0 for t in tb],
                }
            )
        return _write_jsonl(out, rows)
    if system != "diffalign":
        raise BaselineError(
            f"system {system!r} does not apply to {task_id} (systems: lexical, diffalign)"
        )
    enc = models.tokens()
    flat = [d[k].split() for d in docs for k in ("text_a", "text_b")]
    vecs = enc.encode_documents(flat, desc="swissgov-rsd diffalign")
    for i, d in enumerate(docs):
        la, lb = diffalign_scores(vecs[2 * i], vecs[2 * i + 1])
        rows.append(
            {
                "id": d["id"],
                "labels_a": [round(float(x), 6) for x in la],
                "labels_b": [round(float(x), 6) for x in lb],
            }
        )
    return _write_jsonl(out, rows)


# ---------------------------------------------------------------- Loci Similes


def top_k(q, s, k: int, device: str = "cpu", chunk: int = 4096, progress: bool = False):
    """Exact top-k rows of s by inner product for each row of q, by chunked matrix products
    (on the GPU when device is cuda); returns (indices, scores) as numpy arrays."""
    torch = load_torch()

    k = min(k, s.shape[0])
    dtype = torch.float16 if device == "cuda" else torch.float32
    st = torch.from_numpy(np.ascontiguousarray(s)).to(device=device, dtype=dtype)
    idx = np.zeros((q.shape[0], k), dtype=np.int64)
    val = np.zeros((q.shape[0], k), dtype=np.float64)
    with torch.inference_mode():
        for a in tqdm(
            range(0, q.shape[0], chunk), desc="top-k", unit="chunk", disable=not progress
        ):
            qt = torch.from_numpy(np.ascontiguousarray(q[a : a + chunk])).to(
                device=device, dtype=dtype
            )
            v, i = torch.topk(qt @ st.T, k, dim=1, largest=True, sorted=True)
            idx[a : a + chunk] = i.cpu().numpy()
            val[a : a + chunk] = v.float().cpu().numpy()
    return idx, val


def _write_links(out: Path, rows) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(("query_id", "source_id", "score"))
        for q, s, v in rows:
            w.writerow((q, s, f"{v:.6f}"))
    return out


def run_loci(
    task_id: str, system: str, store: TaskStore, out: Path, models: Models, opts: Options
) -> Path:
    """Loci Similes: the top-k sources per query by Dice or by bi-encoder cosine; `retrieve-rerank`
    keeps the retrieved links whose cross-encoder probability reaches the threshold."""
    # the split's own inputs: the test split, or the cross-validated one (every fold's queries
    # against the one source collection; the scorer reads each query's fold from the gold)
    queries = _read_csv(store.public(opts.split, "queries.csv"))
    sources = _read_csv(store.public(opts.split, "sources.csv"))
    if system == "lexical":
        idx, val = dice_top_k(
            [t for _, t in queries],
            [t for _, t in sources],
            opts.top_k,
            progress=show_progress(opts.progress),
        )
    elif system in ("retrieve", "retrieve-rerank"):
        enc = models.bi()
        qp, sp = ("Query: ", "Candidate: ") if opts.prefixes else ("", "")
        qv = enc.encode([qp + t for _, t in queries], desc="loci-similes queries")
        sv = enc.encode([sp + t for _, t in sources], desc="loci-similes sources")
        idx, val = top_k(qv, sv, opts.top_k, enc.device, progress=enc.progress)
    else:
        raise BaselineError(
            f"system {system!r} does not apply to {task_id} "
            f"(systems: {', '.join(SYSTEMS[task_id])})"
        )
    links = [
        (qi, int(si), float(v))
        for qi in range(len(queries))
        for si, v in zip(idx[qi], val[qi], strict=True)
    ]
    if system == "retrieve-rerank":
        probs = models.cross().score(
            [(queries[qi][1], sources[si][1]) for qi, si, _ in links], desc="loci-similes re-rank"
        )
        links = [
            (qi, si, float(p))
            for (qi, si, _), p in zip(links, probs, strict=True)
            if p >= opts.threshold
        ]
    return _write_links(out, ((queries[qi][0], sources[si][0], v) for qi, si, v in links))


# ---------------------------------------------------------------- STR


def run_str(
    task_id: str, system: str, store: TaskStore, out: Path, models: Models, opts: Options
) -> Path:
    """STR: the STR-2022 paper's lexical baseline (Dice over the two sentences' word sets) or the
    cosine of their bi-encoder vectors; written as the official `PairID,Pred_Score` CSV."""
    # the split's own inputs: the test split, or the cross-validated one (every fold's pairs)
    pairs = _read_jsonl(store.public(opts.split, "inputs.jsonl"))
    if system == "lexical":
        scores = np.array(
            [dice_texts(p["sentence1"], p["sentence2"]) for p in pairs], dtype=np.float64
        )
    elif system == "bi-encoder":
        enc = models.bi()
        unique = sorted({p[k] for p in pairs for k in ("sentence1", "sentence2")})
        pos = {t: i for i, t in enumerate(unique)}
        vec = enc.encode(unique, desc="str bi-encoder").astype(np.float64)
        a = vec[[pos[p["sentence1"]] for p in pairs]]
        b = vec[[pos[p["sentence2"]] for p in pairs]]
        scores = np.einsum("ij,ij->i", a, b)
    else:
        raise BaselineError(
            f"system {system!r} does not apply to {task_id} (systems: "
            f"{', '.join(SYSTEMS[task_id])})"
        )
    # a cross-validated split's file names each pair's fold (the task's fold field) first
    cv = get_task(task_id).cross_validation if opts.split != "test" else None
    fold = (cv.field,) if cv is not None and cv.field else ()
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow((*fold, "PairID", "Pred_Score"))
        w.writerows(
            (*(p[k] for k in fold), p["PairID"], f"{float(v):.6f}")
            for p, v in zip(pairs, scores, strict=True)
        )
    return out


def run_pan(
    task_id: str, system: str, store: TaskStore, out: Path, models: Models, opts: Options
) -> Path:
    """PAN text alignment: seeding by shared word 2-grams, extension, filtering
    (`baselines.pan_align`), every pair of the test split."""
    pairs = _read_jsonl(store.public("test", "pairs.jsonl"))
    texts = {r["id"]: r["text"] for r in _read_jsonl(store.public("test", "documents.jsonl"))}
    return pan_align.run(pairs, texts, out)


RUNNERS = {
    "tric-binary": run_tric,
    "tric-ranking": run_tric,
    "trac": run_tric,
    "swissgov-rsd": run_swissgov,
    "loci-similes": run_loci,
    "str": run_str,
    "pan-text-alignment": run_pan,
}
EXTENSIONS = {"loci-similes": "csv", "str": "csv"}


def write_submission(
    task_id: str, system: str, store: TaskStore, out_dir: Path, models: Models
) -> Path:
    """Run one system on one task's test inputs (or, with `options.split`, its cross-validated
    split's); returns the submission file it wrote."""
    if system not in SYSTEMS.get(task_id, ()):
        raise BaselineError(
            f"system {system!r} does not apply to {task_id} "
            f"(systems: {', '.join(SYSTEMS.get(task_id, ()))})"
        )
    split = models.options.split
    if split != "test":
        if not get_task(task_id).is_cross_validated(split):
            raise BaselineError(f"the baselines of {task_id} answer its test split, not {split!r}")
    name = system if split == "test" else f"{system}.{split}"
    out = Path(out_dir) / task_id / f"{name}.{EXTENSIONS.get(task_id, 'jsonl')}"
    return RUNNERS[task_id](task_id, system, store, out, models, models.options)
