"""Encoding throughput (stock encode() against our pipeline), Loci Similes at the paper's scale, and
the wall time of every baseline of every task, as `baselines run` does them.

    python benchmarks/bench_baselines.py [--device auto] [--batch-size 32] [--sentences 1262]
        [--loci-scale 171000] [--skip-runs] [--model all-MiniLM-L6-v2]
        [--json benchmarks/out/x.json]

Throughput: the TRoTR tweets (repeated to --sentences), one model on one device, one batch size,
encoded by sentence-transformers' stock `encode()` and by our pipeline (`BiEncoder(pipeline=...)`),
each after a warm-up, interleaved; the ratio is of the two figures taken in this one run. On CUDA
the GPU's utilisation is sampled while each one runs, with its peak memory.

Loci Similes: the full benchmark (about 83k Jerome/Lactantius query segments, 88k Vergil source
segments) is not available here, so --loci-scale segments are generated: 83/171 of them queries, the
rest sources, with word counts drawn from the real query and source segments in
../shared/data/loci-similes and words drawn (by frequency) from their vocabulary, seed 0. Timed end
to end as `run_loci` does it: encode queries and sources, exact top-10 by chunked matrix products.
Below 171,000 segments the figure at 171,000 is extrapolated (encoding linearly, top-k by queries x
sources), and labelled so.

Runs: imports every task from ../shared/data (TRoTR fold 1) into a temporary data directory, runs
every system that has a model here (the cross-encoder ones need weights this machine lacks) and
reports each run's seconds and the total.

When all-MiniLM-L6-v2 is not installed, a stand-in of its shape (a 6-layer, 384-wide BERT with
random weights, mean pooling, a WordPiece vocabulary trained here on the tasks' text) is built in a
temporary directory and used instead, and the report says so: its speed is MiniLM's shape's speed,
its scores mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("PALIMPSEST_SHARED_DATA", REPO.parent / "shared" / "data"))
PAPER_SEGMENTS = 171_000  # Loci Similes: about 83k query and 88k source segments
PAPER_QUERIES = 83 / 171


def import_all(home: Path) -> None:
    from tasks.importers import import_task

    for t in ("tric-binary", "tric-ranking", "trac"):
        import_task(t, home, source=SHARED / "trotr" / "TRoTR", fold=1)
    import_task("swissgov-rsd", home, source=SHARED / "swissgov-rsd")
    loci = SHARED / "loci-similes"
    import_task(
        "loci-similes",
        home,
        query=loci / "hieronymus_samples.csv",
        source=loci / "vergil_samples.csv",
        gold=loci / "ground_truth.csv",
    )


def tweets() -> list[str]:
    rows = [
        json.loads(x)
        for x in (SHARED / "trotr" / "TRoTR" / "raw_data.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
        if x.strip()
    ]
    key = next(k for k in ("sentence", "context", "text") if k in rows[0])
    return [r[key] for r in rows]


def _loci_segments() -> tuple[list[str], list[str]]:
    import csv

    def read(name):
        with (SHARED / "loci-similes" / name).open(encoding="utf-8", newline="") as f:
            return [r["text"] for r in csv.DictReader(f)]

    return read("hieronymus_samples.csv"), read("vergil_samples.csv")


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# ---------------------------------------------------------------- the model


def minilm_standin(out: Path) -> Path:
    """A sentence-transformers model with all-MiniLM-L6-v2's shape and random weights (seed 0), its
    WordPiece vocabulary trained on the tasks' own text; returns its directory."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    try:
        from sentence_transformers.sentence_transformer.modules import (
            Normalize,
            Pooling,
            Transformer,
        )
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import Normalize, Pooling, Transformer
    from sentence_transformers import SentenceTransformer

    queries, sources = _loci_segments()
    corpus = tweets() + queries + sources
    for f in sorted((SHARED / "swissgov-rsd").rglob("gold_admin_*.jsonl"))[:3]:
        corpus += [
            r[k]
            for line in f.read_text(encoding="utf-8").splitlines()
            if line.strip()
            for r in [json.loads(line)]
            for k in ("text_a", "text_b")
        ]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(
        corpus,
        trainers.WordPieceTrainer(
            vocab_size=30522,
            special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
            show_progress=False,
        ),
    )
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    hf = out / "hf"
    PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=512,
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
    ).save_pretrained(hf)
    torch.manual_seed(0)
    BertModel(
        BertConfig(
            vocab_size=tok.get_vocab_size(),
            hidden_size=384,
            num_hidden_layers=6,
            num_attention_heads=12,
            intermediate_size=1536,
            max_position_embeddings=512,
        )
    ).eval().save_pretrained(hf)
    word = Transformer(str(hf), max_seq_length=256)
    st = SentenceTransformer(modules=[word, Pooling(384, "mean"), Normalize()], device="cpu")
    path = out / "minilm-l6-shape-random"
    st.save(str(path))
    return path


def choose_model(spec: str | None, tmp: Path) -> tuple[str | None, str]:
    """(what to load, what the report calls it): the model asked for, else MiniLM, else the
    stand-in."""
    from baselines.models import ModelNotFound, resolve_model

    try:
        return spec, resolve_model(spec).name
    except ModelNotFound:
        if spec:
            raise
        print(
            "all-MiniLM-L6-v2 is not installed: building a stand-in of its shape (random weights)",
            file=sys.stderr,
            flush=True,
        )
        return str(
            minilm_standin(tmp)
        ), "stand-in: all-MiniLM-L6-v2's shape, random weights, vocabulary trained here"


# ---------------------------------------------------------------- GPU sampling


class GpuSampler:
    """Samples the GPU's utilisation (%) every 50 ms while in use; figures are None without NVML or
    nvidia-smi."""

    def __init__(self, device: str):
        self.cuda = device.startswith("cuda")
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = None
        self._smi = None

    def __enter__(self):
        if not self.cuda:
            return self
        import torch

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        try:
            torch.cuda.utilization()
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        except Exception:  # noqa: BLE001 - no pynvml: try nvidia-smi's own sampling loop
            try:
                self._smi = subprocess.Popen(
                    [
                        "nvidia-smi",
                        "--query-gpu=utilization.gpu",
                        "--format=csv,noheader,nounits",
                        "-lms",
                        "50",
                    ],
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            except OSError:
                self._smi = None
        return self

    def _poll(self):
        import torch

        while not self._stop.wait(0.05):
            self.samples.append(float(torch.cuda.utilization()))

    def __exit__(self, *exc):
        if not self.cuda:
            return
        import torch

        torch.cuda.synchronize()
        self.peak_bytes = torch.cuda.max_memory_allocated()
        self._stop.set()
        if self._thread:
            self._thread.join()
        if self._smi:
            self._smi.terminate()
            out, _ = self._smi.communicate()
            self.samples = [float(x) for x in out.split() if x.strip().isdigit()]

    def report(self) -> dict:
        if not self.cuda:
            return {}
        s = self.samples
        return {
            "gpu_utilisation_mean_pct": round(sum(s) / len(s), 1) if s else None,
            "gpu_utilisation_max_pct": max(s) if s else None,
            "gpu_samples": len(s),
            "peak_gpu_memory_mib": round(self.peak_bytes / 2**20, 1),
        }


# ---------------------------------------------------------------- parts


def throughput(
    model: str | None, label: str, device: str, batch_size: int, n: int, repeats: int
) -> dict:
    """Stock encode() and our pipeline on the same texts, interleaved, each after a warm-up."""
    import numpy as np
    import torch

    from baselines.models import BiEncoder

    base = tweets()
    texts = (base * (n // len(base) + 1))[:n]
    enc = BiEncoder(model, device=device, batch_size=batch_size, progress=False)
    for p in ("stock", "fast"):  # warm-up: kernels, allocator, tokenizer copy
        enc.encode_all(texts[: 4 * batch_size], pipeline=p)
    runs: dict[str, list[dict]] = {"stock": [], "fast": []}
    vectors = {}
    for _ in range(repeats):
        for p in ("stock", "fast"):
            with GpuSampler(enc.device) as gpu:
                t0 = time.perf_counter()
                vectors[p] = enc.encode_all(texts, pipeline=p)
                s = time.perf_counter() - t0
            runs[p].append(
                {"seconds": round(s, 3), "sentences_per_s": round(n / s, 1), **gpu.report()}
            )
    best = {p: max(r, key=lambda x: x["sentences_per_s"]) for p, r in runs.items()}
    ids = enc._tokenize(texts[: len(base)], "")
    return {
        "model": label,
        "device": enc.device,
        "batch_size": batch_size,
        "sentences": n,
        "distinct_sentences": len(set(texts)),
        "mean_tokens": round(float(np.mean([len(i) for i in ids])), 1),
        "torch_threads": torch.get_num_threads(),
        "repeats": repeats,
        "stock": best["stock"],
        "fast": best["fast"],
        "ratio_fast_over_stock": round(
            best["fast"]["sentences_per_s"] / best["stock"]["sentences_per_s"], 2
        ),
        "max_abs_difference": float(np.abs(vectors["fast"] - vectors["stock"]).max()),
        "all_runs": runs,
    }


def loci_corpus(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """n synthetic Latin segments: queries (83/171 of n) and sources, word counts drawn from the
    real query and source segments, words drawn from their vocabulary by frequency."""
    real_q, real_s = _loci_segments()
    rng = random.Random(seed)
    vocab = [w for t in real_q + real_s for w in t.split()]  # repeated words: drawn by frequency
    n_q = round(n * PAPER_QUERIES)

    def make(count, like):
        lengths = [len(t.split()) for t in like]
        return [" ".join(rng.choices(vocab, k=rng.choice(lengths))) for _ in range(count)]

    return make(n_q, real_q), make(n - n_q, real_s)


def loci_scale(model: str | None, label: str, device: str, batch_size: int, n: int) -> dict:
    """Encode n generated segments and take the exact top-10 of each query among the sources."""
    import numpy as np

    from baselines.models import BiEncoder
    from baselines.systems import top_k

    queries, sources = loci_corpus(n)
    enc = BiEncoder(model, device=device, batch_size=batch_size, progress=False)
    enc.encode(queries[: 4 * batch_size])  # warm-up
    enc._cache.clear()
    with GpuSampler(enc.device) as gpu:
        t0 = time.perf_counter()
        qv = enc.encode(queries, desc="loci queries")
        sv = enc.encode(sources, desc="loci sources")
        t1 = time.perf_counter()
        idx, _ = top_k(qv, sv, 10, enc.device)
        t2 = time.perf_counter()
    assert idx.shape == (len(queries), min(10, len(sources)))
    ids = enc._tokenize(queries[:2000] + sources[:2000], "")
    out = {
        "model": label,
        "device": enc.device,
        "batch_size": batch_size,
        "segments": n,
        "queries": len(queries),
        "sources": len(sources),
        "k": 10,
        "mean_tokens": round(float(np.mean([len(i) for i in ids])), 1),
        "distinct_segments": len(set(queries + sources)),
        "seconds_encoding": round(t1 - t0, 2),
        "seconds_top_k": round(t2 - t1, 2),
        "seconds_end_to_end": round(t2 - t0, 2),
        "segments_per_s_encoding": round(n / (t1 - t0), 1),
        **gpu.report(),
    }
    if n < PAPER_SEGMENTS:
        n_q = round(PAPER_SEGMENTS * PAPER_QUERIES)
        enc_s = (t1 - t0) * PAPER_SEGMENTS / n
        topk_s = (t2 - t1) * (n_q * (PAPER_SEGMENTS - n_q)) / (len(queries) * len(sources))
        out["extrapolated_to_171000"] = {
            "note": "EXTRAPOLATED, not measured: encoding x 171000/n (linear), top-k x "
            "queries*sources",
            "seconds_encoding": round(enc_s, 1),
            "seconds_top_k": round(topk_s, 1),
            "seconds_end_to_end": round(enc_s + topk_s, 1),
        }
    return out


def topk_speed(n_q: int, n_s: int, device: str, dim: int = 384, k: int = 10) -> dict:
    import numpy as np

    from baselines.systems import top_k

    rng = np.random.default_rng(0)
    q = rng.standard_normal((n_q, dim), dtype=np.float32)
    s = rng.standard_normal((n_s, dim), dtype=np.float32)
    t0 = time.perf_counter()
    top_k(q, s, k, device)
    return {"queries": n_q, "sources": n_s, "k": k, "seconds": round(time.perf_counter() - t0, 2)}


def every_baseline(model: str | None, device: str, batch_size: int) -> dict:
    from baselines.run import run_baselines
    from baselines.systems import Options

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        import_all(home)
        t0 = time.perf_counter()
        results = run_baselines(
            None,
            None,
            Options(model=model, device=device, batch_size=batch_size, progress=False),
            home / "out",
            home,
            log=lambda m: print(m, file=sys.stderr, flush=True),
        )
        total = time.perf_counter() - t0
    return {
        "runs": [
            {
                "task": r["task"],
                "system": r["system"],
                "seconds": r["seconds"],
                "primary": (r["scores"] or {}).get("primary", {}).get("value"),
            }
            for r in results
        ],
        "total_seconds": round(total, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument(
        "--model", help="default: the installed all-MiniLM-L6-v2, else a stand-in of its shape"
    )
    ap.add_argument(
        "--sentences", type=int, default=1262, help="tweets encoded (the 1,262 repeated as needed)"
    )
    ap.add_argument(
        "--repeats", type=int, default=2, help="timed runs of each pipeline (the best is reported)"
    )
    ap.add_argument(
        "--loci-scale",
        type=int,
        help="generated Loci Similes segments (default: 171000 on CUDA, 3000 on the CPU; 0: skip)",
    )
    ap.add_argument(
        "--topk-scale", type=int, default=20000, help="queries = sources = this many; 0: skip"
    )
    ap.add_argument("--skip-runs", action="store_true", help="leave out every baseline's run")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    from baselines.models import pick_device

    device = pick_device(a.device)
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load_average_start": load_average(),
    }
    print(f"load average at start: {report['load_average_start']}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        model, label = choose_model(a.model, Path(tmp))
        report["model"] = label
        report["throughput"] = throughput(
            model, label, device, a.batch_size, a.sentences, a.repeats
        )
        print(
            json.dumps({k: v for k, v in report["throughput"].items() if k != "all_runs"}),
            flush=True,
        )
        scale = (
            a.loci_scale
            if a.loci_scale is not None
            else (PAPER_SEGMENTS if device == "cuda" else 3000)
        )
        if scale:
            report["loci_scale"] = loci_scale(model, label, device, a.batch_size, scale)
            print(json.dumps(report["loci_scale"]), flush=True)
        if a.topk_scale:
            report["topk"] = topk_speed(a.topk_scale, a.topk_scale, device)
            print(json.dumps(report["topk"]), flush=True)
        if not a.skip_runs:
            report.update(every_baseline(model, device, a.batch_size))
    report["load_average_end"] = load_average()
    print(json.dumps(report, indent=2))
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
