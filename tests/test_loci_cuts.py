"""Loci Similes' Table 3 setting: a scored run cut at each declared k, the top k sources of every
query taken as its predicted links, scored as a set (TP/FP/FN, F1, FPR and SMR x 10^4). Each
figure equals a brute-force count written here, ties and near ties included."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import loci_files
from pydantic import ValidationError
from test_loci_reference import generated_release, ours, read_csv, write_csv

from cli.main import main
from tasks import get_task
from tasks.builtin import builtin_spec
from tasks.bundle_models import TaskSpec
from tasks.importers import import_task

TABLE3 = (5, 10, 20, 50, 100, 500, 1000)


def brute_force(run: dict, gold: set, queries: list[str], n_sources: int, k: int) -> dict:
    """Every query's sources sorted one by one as trec_eval ranks them (descending float32 score,
    ties by descending source id in byte order), the first k kept, the pairs counted."""
    tp = fp = fn = 0
    f1s, pooled = [], [0, 0, 0]  # F1 per gold query; TP, FP, FN of the gold queries
    for q in queries:
        ranked = sorted(
            run.get(q, {}).items(),
            key=lambda item: (float(np.float32(item[1])), item[0].encode("utf-8")),
            reverse=True,
        )
        top = {s for s, _ in ranked[:k]}
        g = {s for (gq, s) in gold if gq == q}
        t = len(top & g)
        tp, fp, fn = tp + t, fp + len(top) - t, fn + len(g) - t
        if g:
            pooled = [pooled[0] + t, pooled[1] + len(top) - t, pooled[2] + len(g) - t]
            p = t / len(top) if top else 0.0
            r = t / len(g)
            f1s.append(2 * p * r / (p + r) if p + r else 0.0)
    n = len(queries) * n_sources
    t, f_p, f_n = pooled
    pm = t / (t + f_p) if t + f_p else 0.0
    rm = t / (t + f_n) if t + f_n else 0.0
    return {
        "predictions": tp + fp,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "f1": sum(f1s) / len(f1s) if f1s else None,
        "f1_micro": 2 * pm * rm / (pm + rm) if pm + rm else 0.0,
        "fpr_e4": fp / n * 1e4,
        "smr_e4": (fp + fn) / n * 1e4,
    }


def check(got: dict, want: dict) -> None:
    for c, v in want.items():
        if isinstance(v, int):
            assert got[c] == v, (c, got[c], v)
        else:
            assert math.isclose(got[c], v, rel_tol=1e-12, abs_tol=1e-12), (c, got[c], v)


def test_the_task_declares_table3s_depths():
    assert get_task("loci-similes").cut_at == TABLE3


@pytest.mark.parametrize("seed, depth, near", [(0, 30, False), (1, 120, True), (2, 1100, True)])
def test_cuts_equal_a_brute_force_count(tmp_path, seed, depth, near):
    n_q, n_s = 40, 1200
    files, qids, sids, gold = generated_release(tmp_path / "release", seed, n_q, n_s, 60)
    home = tmp_path / "home"
    import_task("loci-similes", home, **files)
    rng = np.random.default_rng(seed)
    gold_set = set(gold)
    run: dict = {}
    rows = []
    for q in qids:
        k = int(rng.integers(0, depth + 1))
        picked = {sids[int(j)] for j in rng.choice(n_s, size=k, replace=False)}
        picked |= {s for (gq, s) in gold if gq == q and rng.random() < 0.7}
        for s in sorted(picked):
            # few distinct values: ties are common, broken by the source id
            sc = float(np.round(rng.random() + (0.3 if (q, s) in gold_set else 0.0), 1))
            if near:  # moved by less than float32's resolution: still a tie
                sc *= 1.0 + float(rng.choice([0.0, 2.0**-40, -(2.0**-38), 2.0**-20]))
            run.setdefault(q, {})[s] = sc
            rows.append((q, s, sc))
    sub = write_csv(tmp_path / "sub.csv", ("query_id", "source_id", "score"), rows)
    result = ours(home, sub)
    assert list(result["cuts"]) == [str(k) for k in TABLE3]
    for k in TABLE3:
        check(result["cuts"][str(k)], brute_force(run, gold_set, qids, n_s, k))
    # a cut deeper than every list takes every prediction: the file's own set metrics
    deepest = max(len(v) for v in run.values())
    if deepest <= 1000:
        whole = result["metrics"]["all"]
        for c in ("tp", "fp", "fn", "f1", "f1_micro"):
            assert result["cuts"]["1000"][c] == whole[c], c
    # the public part of a phase: the same count over the kept queries only
    part = set(qids[::3])
    got = ours(home, sub, only=part)["cuts"]
    for k in TABLE3:
        check(got[str(k)], brute_force(run, gold_set, [q for q in qids if q in part], n_s, k))


def test_a_run_without_scores_has_no_cut(tmp_path):
    files = loci_files()
    home = tmp_path / "home"
    import_task("loci-similes", home, **files)
    gold = [(r[0], r[1]) for r in read_csv(files["gold"])]
    sub = write_csv(tmp_path / "s.csv", ("query_id", "source_id"), gold)
    assert "cuts" not in ours(home, sub)


def test_the_shared_sample_table_by_the_command(tmp_path):
    """The docs' command prints the k = 5...1000 table; its JSON holds the same counts."""
    files = loci_files()
    home = tmp_path / "home"
    import_task("loci-similes", home, **files)
    queries = [r[0] for r in read_csv(files["query"])]
    sources = [r[0] for r in read_csv(files["source"])]
    gold = {(r[0], r[1]) for r in read_csv(files["gold"])}
    rng = np.random.default_rng(7)
    run = {q: {s: float(rng.random()) for s in sources} for q in queries}
    sub = write_csv(
        tmp_path / "run.csv",
        ("query_id", "source_id", "score"),
        [(q, s, v) for q, r in run.items() for s, v in r.items()],
    )
    env = {"PALIMPSEST_DEBUG": ""}
    argv = ["score", "loci-similes", str(sub), "--home", str(home)]
    out = CliRunner().invoke(main, [*argv, "--json"], catch_exceptions=False, env=env)
    assert out.exit_code == 0, out.output
    cuts = json.loads(out.output)["cuts"]
    for k in TABLE3:
        check(cuts[str(k)], brute_force(run, gold, queries, len(sources), k))
    text = CliRunner().invoke(main, argv, catch_exceptions=False, env=env).output
    assert "ranking cut at k" in text
    line5 = next(ln for ln in text.splitlines() if ln.split()[:1] == ["5"])
    assert line5.split()[1:5] == [str(cuts["5"][c]) for c in ("predictions", "tp", "fp", "fn")]


def test_a_cut_is_declared_on_a_links_task_only():
    spec = builtin_spec("str")
    with pytest.raises(ValidationError, match="links family only"):
        TaskSpec.model_validate({**spec, "cut_at": [5]})
    loci = builtin_spec("loci-similes")
    for bad in ([0], [5, 5], [2_000_000]):
        with pytest.raises(ValidationError, match="cut_at"):
            TaskSpec.model_validate({**loci, "cut_at": bad})
