"""pan-text-alignment: PAN's corpus layout imported, runs read as JSON Lines, as PAN's detection XML
(one file, several documents under a root, a zip of PAN's per-pair output files) with the same
values, every impossible span refused by line and field, boards per obfuscation declared as
slices, and the offline command's values the scorer's."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from pankit import adversarial_runs, naive, ours

from cli.main import main
from scorer import SubmissionInvalid, score_file, validate_file
from tasks import pan
from tasks.errors import ReleaseError
from tasks.importers import import_task
from tasks.store import TaskStore

TASK = "pan-text-alignment"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("pan-task")
    root = base / "corpus"
    pan.generate(root, seed=11, n_susp=10, n_src=10, pairs_per_susp=2)
    home = base / "home"
    import_task(TASK, home, source=root)
    return root, home, pan.read_corpus(root)


def _rows(c: dict, shift: int = 0) -> list[tuple]:
    return [
        (
            t,
            s,
            c2["this_offset"] + shift,
            max(1, c2["this_length"] - shift),
            c2["source_offset"],
            c2["source_length"],
        )
        for (t, s) in c["pairs"]
        for c2 in c["cases"][(t, s)]
    ]


def _problems(path: Path, home: Path) -> list:
    with pytest.raises(SubmissionInvalid) as e:
        validate_file(TASK, path, home=home)
    return e.value.problems


def test_the_import_keeps_every_pair_and_case_with_its_obfuscation(corpus):
    root, home, c = corpus
    gold = [
        json.loads(x)
        for x in TaskStore(TASK, home).gold("test", "gold.jsonl").read_text().splitlines()
    ]
    assert len(gold) == len(c["pairs"]) == len((root / "pairs").read_text().split("\n")) - 1
    assert sum(len(g["cases"]) for g in gold) == sum(len(v) for v in c["cases"].values()) > 0
    kinds = {g["obfuscation"] for g in gold}
    assert kinds <= {*pan.OBFUSCATIONS, pan.NO_PLAGIARISM, pan.MIXED}
    assert pan.NO_PLAGIARISM in kinds and "none" in kinds
    pairs = TaskStore(TASK, home).public("test", "pairs.jsonl").read_text()
    assert "obfuscation" not in pairs and "offset" not in pairs  # the gold stays hidden


def test_jsonl_and_every_xml_form_score_alike_and_equal_the_measures(corpus, tmp_path):
    _root, home, c = corpus
    run = _rows(c, shift=7)[:-3]
    jl = tmp_path / "run.jsonl"
    jl.write_text(pan.jsonl_detections(run))
    want = score_file(TASK, jl, home=home)
    mine = ours(c, run)
    for k in ("plagdet", "precision", "recall", "granularity", "case_f1", "document_f1"):
        assert want["metrics"]["all"][k] == pytest.approx(mine[k], abs=1e-12), k
    by_pair: dict = {}
    for t, s, *v in run:
        by_pair.setdefault((t, s), []).append(v)
    files = {
        f"{pan.pair_id(t, s)}.xml": pan.detection_xml(t, s, v) for (t, s), v in by_pair.items()
    }
    one = tmp_path / "run.xml"
    one.write_text("<detections>\n" + "".join(files.values()) + "</detections>\n")
    z = tmp_path / "run.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for name, text in files.items():
            zf.writestr(f"output/{name}", '<?xml version="1.0" encoding="UTF-8"?>\n' + text)
    for p in (one, z):
        got = score_file(TASK, p, home=home)
        assert got["metrics"] == want["metrics"], p.name
    # a single pair's file of PAN's output is a run of that pair alone
    (name, text), *_ = files.items()
    single = tmp_path / name
    single.write_text(text)
    assert validate_file(TASK, single, home=home).format == "xml"
    # the slices: a board per obfuscation type is a declared subset
    assert {"none", "random", "translation"} <= set(want["metrics"])
    perfect = tmp_path / "perfect.jsonl"
    perfect.write_text(pan.jsonl_detections(_rows(c)))
    top = score_file(TASK, perfect, home=home)["metrics"]
    assert all(
        top[s]["plagdet"] == 1.0 for s in ("all", "none", "random", "translation") if top[s]["n"]
    )


def test_impossible_spans_are_refused_by_line_and_field(corpus, tmp_path):
    _root, home, c = corpus
    (t, s), *_ = c["pairs"]
    n = len(c["docs"][t])
    other = next(x for (y, x) in c["pairs"] if y != t)
    rows = [
        (t, s, 0, 10, 0, 10),  # good
        (t, s, -1, 10, 0, 10),
        (t, s, 0, 0, 0, 10),
        (t, s, n - 5, 10, 0, 10),
        (t, other, 0, 10, 0, 10),
        ("no-such.txt", s, 0, 10, 0, 10),
        (t, s, 0, 1.5, 0, 10),
    ]
    p = tmp_path / "bad.jsonl"
    p.write_text(pan.jsonl_detections(rows) + '{"this_reference": "x"}\nnot json\n')
    got = {pr.line: pr.message for pr in _problems(p, home)}
    assert set(got) == {2, 3, 4, 5, 6, 7, 8, 9}
    assert "this_offset is negative" in got[2]
    assert "this_length is 0" in got[3]
    assert f"past the end of {t!r} ({n} characters)" in got[4]
    assert "not a pair of the corpus" in got[5]
    assert "no document 'no-such.txt'" in got[6]
    assert "this_length must be an integer" in got[7]
    assert "missing field(s) this_offset" in got[8]
    x = tmp_path / "bad.xml"
    x.write_text(
        f'<document reference="{t}">\n<feature name="detected-plagiarism" this_offset="-3" '
        f'this_length="4" source_reference="{s}" source_offset="0" source_length="5"/>\n'
        "</document>\n"
    )
    (pr,) = _problems(x, home)
    assert pr.line == 2 and "this_offset" in pr.message
    x.write_text('<!DOCTYPE d [<!ENTITY a "aaaa">]>\n<document reference="x">&a;</document>')
    (pr,) = _problems(x, home)
    assert "DTD" in pr.message
    x.write_text(f'<document reference="{t}">\n<feature name="detected-plagiarism"\n')
    (pr,) = _problems(x, home)
    assert "not well-formed XML" in pr.message


def test_a_corpus_with_an_impossible_case_is_refused_naming_the_file(corpus, tmp_path):
    root, _home, c = corpus
    bad = tmp_path / "c"
    pan.generate(bad, seed=11, n_susp=4, n_src=4)
    f = next(p for p in sorted(bad.glob("*/*.xml")) if "this_offset" in p.read_text())
    f.write_text(f.read_text().replace('this_offset="', 'this_offset="9999999', 1))
    with pytest.raises(ReleaseError) as e:
        pan.read_corpus(bad)
    assert f.name in str(e.value) and "past" in str(e.value)


def test_the_offline_command_gives_the_scorers_values(corpus, tmp_path):
    _root, home, c = corpus
    p = tmp_path / "run.xml"
    by_pair: dict = {}
    for t, s, *v in _rows(c, shift=3):
        by_pair.setdefault((t, s), []).append(v)
    p.write_text(
        "<run>" + "".join(pan.detection_xml(t, s, v) for (t, s), v in by_pair.items()) + "</run>"
    )
    out = CliRunner().invoke(
        main, ["score", TASK, str(p), "--json", "--home", str(home)], catch_exceptions=False
    )
    assert out.exit_code == 0, out.output[-500:]
    doc = json.loads(out.output)
    assert doc["metrics"] == score_file(TASK, p, home=home)["metrics"]


def test_each_obfuscation_subset_is_the_measures_on_its_pairs_alone(corpus, tmp_path):
    """A subset's values (micro included, where pairs share a source passage) are the measures of
    the corpus cut to the subset's pairs, by the naive computation."""
    _root, home, c = corpus
    run = adversarial_runs(c, seed=2)["noisy"]
    p = tmp_path / "run.jsonl"
    p.write_text(pan.jsonl_detections(run))
    got = score_file(TASK, p, home=home)["metrics"]
    for kind in ("none", "random", "translation"):
        pairs = [q for q in c["pairs"] if pan.pair_attributes(c["cases"][q])["obfuscation"] == kind]
        if not pairs:
            continue
        cut = {"docs": c["docs"], "pairs": pairs, "cases": {q: c["cases"][q] for q in pairs}}
        want = naive(cut, [r for r in run if (r[0], r[1]) in set(pairs)])
        for k in ("plagdet", "recall_micro", "precision_micro", "plagdet_micro", "case_f1"):
            assert got[kind][k] == pytest.approx(want[k], abs=1e-12), (kind, k)


def test_pan_xml_read_in_one_pass_equals_expats_reading_or_leaves_it_to_it(corpus):
    """The one-pass reader of PAN XML (`_fast_xml`) takes PAN's own writing and reads what the
    expat reader reads; any file it could read otherwise (another attribute order, quotes,
    entities, comments, a feature outside a document, nested documents) it leaves to expat."""
    import re

    import numpy as np

    from scorer import family
    from scorer.errors import Problems
    from tasks import get_task

    _root, home, c = corpus
    fam = family(get_task(TASK), TaskStore(TASK, home), "test")
    by_pair: dict = {}
    for t, s, *v in _rows(c, shift=3):
        by_pair.setdefault((t, s), []).append(v)
    docs = [pan.detection_xml(t, s, v) for (t, s), v in by_pair.items()]
    canonical = "<run>\n" + "".join(docs) + "</run>\n"

    def expat_reading(body):
        rows: list = []
        problems = Problems()
        fam._xml_rows(body, "", rows, problems)
        return None if problems.total else fam._check(rows, problems)

    def same(a, b):
        return all(np.array_equal(getattr(a, k), getattr(b, k)) for k in vars(b))

    fast = fam._fast_xml(canonical)
    assert fast is not None and same(fast, expat_reading(canonical))
    assert fam._fast_xml(docs[0]) is not None  # one pair's file of PAN's output
    feature = re.search(r"<feature [^>]*/>", canonical).group(0)
    attrs = dict(re.findall(r'(\w+)="([^"]*)"', feature))
    reordered = "<feature " + " ".join(f'{k}="{v}"' for k, v in reversed(attrs.items())) + " />"
    quoted = feature.replace(f'"{attrs["source_reference"]}"', f"'{attrs['source_reference']}'")
    ref = attrs["source_reference"]
    entity = feature.replace(ref, ref.replace(".", "&#46;"))
    others = {
        "attributes reordered": canonical.replace(feature, reordered, 1),
        "single quotes": canonical.replace(feature, quoted, 1),
        "an entity": canonical.replace(feature, entity, 1),
        "a comment": canonical.replace("<run>", f"<run><!-- {feature} -->", 1),
        "outside a document": canonical.replace("</run>", f"{feature}\n</run>", 1),
        "nested documents": canonical.replace(
            "</document>", f'<document reference="x">{feature}</document></document>', 1
        ),
        "blank in a number": canonical.replace('this_offset="', 'this_offset=" ', 1),
        "another feature": canonical.replace("detected-plagiarism", "plagiarism", 1),
        "not well-formed": canonical.replace("</run>", "</runs>"),
    }
    for name, body in others.items():
        assert body != canonical, name
        assert fam._fast_xml(body) is None, name  # left to expat, read (or refused) by its rules
    # the same spans written otherwise: expat's reading, the same values
    for name in ("attributes reordered", "single quotes", "an entity", "blank in a number"):
        assert same(fam.validate(others[name]), fast), name
    assert len(fam.validate(others["another feature"]).pair) == len(fast.pair) - 1
    with pytest.raises(SubmissionInvalid):
        fam.validate(others["not well-formed"])
