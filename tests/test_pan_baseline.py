"""The PAN text aligner (baselines/pan_align.py): it finds verbatim reuse where it is, nothing
where there is none, and runs as a registered baseline of pan-text-alignment."""

from __future__ import annotations

import pytest
from pankit import ours

from baselines import pan_align
from baselines.systems import SYSTEMS, write_submission
from scorer import score_file
from tasks import pan
from tasks.importers import import_task
from tasks.store import TaskStore


def test_a_copied_passage_is_found_at_its_offsets():
    rng_words = [f"w{i}x" for i in range(400)]
    src = " ".join(rng_words[:200])
    passage = " ".join(rng_words[50:90])
    susp = " ".join(rng_words[300:340]) + " " + passage + " " + " ".join(rng_words[340:380])
    ((to, tl, so, sl),) = pan_align.align(susp, src)
    assert susp[to : to + tl] == passage and src[so : so + sl] == passage
    assert pan_align.align(" ".join(rng_words[200:300]), src) == []


def test_the_baseline_runs_on_the_task_and_scores(tmp_path):
    corpus = tmp_path / "corpus"
    pan.generate(corpus, seed=9, n_susp=12, n_src=12)
    home = tmp_path / "home"
    import_task("pan-text-alignment", home, source=corpus)
    assert SYSTEMS["pan-text-alignment"] == ("ngram-align",)

    class _Models:  # what write_submission reads of a run's models
        class options:
            split = "test"

    out = write_submission(
        "pan-text-alignment",
        "ngram-align",
        TaskStore("pan-text-alignment", home),
        tmp_path,
        _Models,
    )
    got = score_file("pan-text-alignment", out, home=home)["metrics"]
    assert got["none"]["plagdet"] > 0.9 and got["all"]["precision"] > 0.9
    c = pan.read_corpus(corpus)
    run = [(t, s, *x) for (t, s) in c["pairs"] for x in pan_align.align(c["docs"][t], c["docs"][s])]
    assert got["all"]["plagdet"] == pytest.approx(ours(c, run)["plagdet"], abs=1e-12)
