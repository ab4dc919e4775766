"""STR (SemEval-2024 Task 1, Track A; STR-2022): the importer on fixtures the project writes in the
upstream layout, the submission formats, and the per-language metrics against scipy.

The official data is not in ../shared/data (its licence is unclear): every file here is made up.
"""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner
from scipy import stats

from cli.main import main
from scorer import SubmissionInvalid, partition_strata, score_file, validate_file
from tasks.errors import ReleaseError
from tasks.importers import import_task
from tasks.semrel import write_track_a
from tasks.store import TaskStore


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return write_track_a(
        tmp_path_factory.mktemp("str-release") / "Semantic_Relatedness_SemEval2024", 60
    )


@pytest.fixture(scope="module")
def str_home(tmp_path_factory, release):
    h = tmp_path_factory.mktemp("str-home")
    import_task("str", h, source=release)
    return h


def rows(home, split="test", area="public", name="inputs.jsonl"):
    st = TaskStore("str", home)
    path = st.public(split, name) if area == "public" else st.gold(split, name)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def csv_lines(path, header="PairID,Text,Score"):
    return [header, *[f'{pid},"{t}",{s}' for pid, t, s in path]]


def write(path, lines, eol="\n", bom=""):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(bom + eol.join(lines) + eol, encoding="utf-8", newline="")


# ---------------------------------------------------------------- the fixture release


def test_the_fixture_has_the_upstream_quirks(release):
    esp = (release / "Track A" / "esp" / "esp_test_with_labels.csv").read_bytes()
    assert esp.startswith("\ufeff".encode()) and b"\r\n" in esp and b'""really""' in esp
    eng = (release / "Track A" / "eng" / "eng_test_with_labels.csv").read_text(encoding="utf-8")
    assert eng.startswith("PairID,Score,Text\n") and ".\nIs it" in eng  # STR-2022's column order
    kin = release / "Track A" / "kin"
    assert (kin / "kin_test.csv").is_file() and not (kin / "kin_test_with_labels.csv").exists()
    # upstream's arq: a space after the separating newline; esp_dev.csv, ary_dev.csv: CRLF rows
    # around a bare newline in the field, and no line end after the last row
    assert ".\n Is it" in esp.decode("utf-8")
    esp_dev = (release / "Track A" / "esp" / "esp_dev.csv").read_bytes()
    assert b"\r\n" in esp_dev and b".\n Is it" in esp_dev and esp_dev.endswith(b'?"')


def test_import_reads_every_language_and_says_which_lacks_test_gold(str_home):
    m = TaskStore("str", str_home).manifest()
    assert m["languages"] == ["eng", "esp", "kin"] and m["splits"] == ["dev", "test"]
    assert set(m["counts"]["test"]) == {"eng", "esp"} and set(m["counts"]["dev"]) == {
        "eng",
        "esp",
        "kin",
    }
    assert m["notes"] == [
        "kin: no test gold (kin_test_with_labels.csv absent; inputs only), imported "
        "without a test split for kin"
    ]
    test = rows(str_home)
    assert {r["language"] for r in test} == {"eng", "esp"}
    r = next(r for r in test if r["language"] == "esp")
    assert (
        r["sentence2"].startswith("Is it")
        and '"really"' in r["sentence2"]
        and "\r" not in r["sentence2"]
    )
    assert all(p[k] == p[k].strip() for p in test for k in ("sentence1", "sentence2"))
    # esp_dev.csv ends without a line end: its last pair is read too, or its PairIDs would differ
    # from esp_dev_with_labels.csv's and the import would be refused
    assert (
        m["counts"]["dev"]["esp"]
        == sum(r["language"] == "esp" for r in rows(str_home, "dev"))
        == 10
    )
    gold = rows(str_home, area="gold", name="gold.jsonl")
    assert [g["PairID"] for g in gold] == [r["PairID"] for r in test]
    assert all(0 <= g["score"] <= 1 for g in gold)
    assert not TaskStore("str", str_home).public("test", "gold.jsonl").exists()
    assert TaskStore("str", str_home).public("dev", "gold.jsonl").exists()  # dev labels are public
    assert TaskStore("str", str_home).public("train", "train.jsonl").exists()


def test_strata_are_languages(str_home):
    strata = partition_strata("str", home=str_home)
    assert {s for _, s in strata} == {"eng", "esp"}
    assert all(u.startswith(s.upper()) for u, s in strata)


def test_cli_import_with_languages_and_the_note(tmp_path, release):
    h = tmp_path / "home"
    r = CliRunner().invoke(
        main,
        [
            "tasks",
            "import",
            "str",
            "--from",
            str(release),
            "--languages",
            "kin,eng",
            "--home",
            str(h),
        ],
    )
    assert r.exit_code == 0, r.output
    assert "test: eng 20" in r.output and "note: kin: no test gold" in r.output
    assert TaskStore("str", h).manifest()["languages"] == ["kin", "eng"]
    r = CliRunner().invoke(
        main, ["tasks", "import", "str", "--from", str(release), "--fold", "2", "--home", str(h)]
    )
    assert r.exit_code == 2 and "str takes no --fold" in r.output
    r = CliRunner().invoke(main, ["tasks", "import", "str", "--home", str(h)])
    assert r.exit_code == 2 and "str needs --from" in r.output
    r = CliRunner().invoke(
        main,
        ["tasks", "import", "str", "--from", str(release), "--languages", "xyz", "--home", str(h)],
    )
    assert r.exit_code == 2 and "unknown language(s) xyz" in r.output


def test_the_track_a_folder_itself_may_be_given(tmp_path, release):
    m = import_task("str", tmp_path, source=release / "Track A", languages=["esp"])
    assert m["languages"] == ["esp"] and m["notes"] == []


def _lang(tmp_path, test_lines, lang="eng", **kw):
    base = tmp_path / "rel" / "Track A" / lang
    write(base / f"{lang}_test_with_labels.csv", test_lines, **kw)
    return tmp_path / "rel"


@pytest.mark.parametrize(
    "lines, message",
    [
        (
            ["PairID,Text,Score", 'a,"one\ntwo\nthree",0.5'],
            "two sentences separated by a newline, found 3 lines",
        ),
        (["PairID,Text,Score", 'a,"only one",0.5'], "found 1 line"),
        (["PairID,Text,Score", 'a,"x\ny",1.5'], "Score must be in [0, 1]"),
        (["PairID,Text,Score", 'a,"x\ny",nan'], "Score is not finite"),
        (["PairID,Text,Score", 'a,"x\ny",0.5', 'a,"x\nz",0.2'], "PairID 'a' repeats line 2"),
        (["PairID,Text", 'a,"x\ny"'], "lacks column(s) Score"),
        (["PairID,Text,Score", 'a,"x\ny,0.5'], "expected 3 columns"),
    ],
)
def test_bad_releases_name_file_and_line(tmp_path, lines, message):
    with pytest.raises(
        ReleaseError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
    ):
        import_task("str", tmp_path / "home", source=_lang(tmp_path, lines))
    assert not TaskStore("str", tmp_path / "home").exists()  # nothing half-imported


def test_spaces_around_the_sentences_are_dropped(tmp_path):
    """Upstream's arq files put a space after the newline between the sentences (`s1\n s2`), and a
    few pairs end in spaces: the sentences are stored without them."""
    rel = _lang(
        tmp_path, ["PairID,Text,Score", 'a,"x y\n z ",0.5', 'b," w\r\n  v  ",0.1'], lang="arq"
    )
    import_task("str", tmp_path / "home", source=rel)
    assert [(r["sentence1"], r["sentence2"]) for r in rows(tmp_path / "home")] == [
        ("x y", "z"),
        ("w", "v"),
    ]


def test_inputs_and_labels_files_must_hold_the_same_pairs(tmp_path):
    rel = _lang(tmp_path, ["PairID,Text,Score", 'a,"x\ny",0.5', 'b,"x\nz",0.1'])
    write(rel / "Track A" / "eng" / "eng_test.csv", ["PairID,Text", 'a,"x\ny"'])
    with pytest.raises(ReleaseError, match="PairIDs differ"):
        import_task("str", tmp_path / "home", source=rel)


def test_a_release_without_any_gold_or_language_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReleaseError, match="not a SemEval-2024 Task 1 checkout"):
        import_task("str", tmp_path / "h", source=tmp_path / "empty")
    base = tmp_path / "rel" / "Track A" / "eng"
    write(base / "eng_test.csv", ["PairID,Text", 'a,"x\ny"'])
    with pytest.raises(ReleaseError, match="nothing to score"):
        import_task("str", tmp_path / "h", source=tmp_path / "rel")


def test_an_str_2022_file_is_the_english_test_split(tmp_path):
    p = tmp_path / "str5500_ranked.csv"
    write(
        p,
        [
            "PairID,Score,Text",
            '1,0.9,"A cat sat.\nA cat was sitting."',
            '2,0.1,"Rain.\nTaxes rise."',
            '3,0.5,"I read.\nShe writes."',
        ],
        eol="\r\n",
        bom="\ufeff",
    )
    m = import_task("str", tmp_path / "h", source=p)
    assert (
        m["splits"] == ["test"]
        and m["counts"]["test"] == {"eng": 3}
        and "STR-2022" in m["notes"][0]
    )
    sub = tmp_path / "pred.csv"
    sub.write_text("PairID,Pred_Score\n3,0.4\n1,0.8\n2,0.3\n", encoding="utf-8")
    assert score_file("str", sub, home=tmp_path / "h")["metrics"]["eng"][
        "spearman"
    ] == pytest.approx(1.0)


def test_str5500_ranked_with_its_index_and_extra_columns(tmp_path):
    """data/str5500/str5500_ranked.csv of the STR-2022 repository: a pandas index column with an
    empty name, DocID and Adj-Score beside PairID, Score and Text; Score is the gold."""
    p = tmp_path / "str5500_ranked.csv"
    write(
        p,
        [
            ",DocID,PairID,Score,Adj-Score,Text",
            '0,f_pp,f_pp_222,1.0,1.0,"It that happens, just pull the plug.\nif that ever happens, '
            'just pull the plug."',
            '1,sts,sts_245,0.938,0.969,"Two dogs are peeing.\nTwo dogs are ""urinating""."',
            '2,w_pp,w_pp_7,0.1,0.55,"Autograph.\nThe census."',
        ],
    )
    m = import_task("str", tmp_path / "h", source=p)
    assert m["counts"]["test"] == {"eng": 3}
    gold = rows(tmp_path / "h", area="gold", name="gold.jsonl")
    assert [(g["PairID"], g["score"]) for g in gold] == [
        ("f_pp_222", 1.0),
        ("sts_245", 0.938),
        ("w_pp_7", 0.1),
    ]
    assert rows(tmp_path / "h")[1]["sentence2"] == 'Two dogs are "urinating".'


# ---------------------------------------------------------------- submissions and metrics


def _predictions(home, seed=3, langs=("eng", "esp")):
    rng = random.Random(seed)
    gold = {g["PairID"]: g for g in rows(home, area="gold", name="gold.jsonl")}
    out = [
        (pid, round(g["score"] + rng.gauss(0, 0.3), 4))
        for pid, g in gold.items()
        if g["language"] in langs
    ]
    rng.shuffle(out)  # matched on PairID, not by position
    return gold, out


def test_official_csv_and_jsonl_score_alike_and_match_scipy_per_language(str_home, tmp_path):
    gold, pred = _predictions(str_home)
    csv_path = tmp_path / "pred_all.csv"
    csv_path.write_text(
        "\ufeffPairID,Pred_Score\r\n" + "".join(f"{p},{v}\r\n" for p, v in pred), encoding="utf-8"
    )
    jsonl = tmp_path / "pred.jsonl"
    jsonl.write_text(
        "".join(json.dumps({"PairID": p, "score": v}) + "\n" for p, v in pred), encoding="utf-8"
    )
    a, b = score_file("str", csv_path, home=str_home), score_file("str", jsonl, home=str_home)
    assert a["metrics"] == b["metrics"]
    rhos = []
    for lang in ("eng", "esp"):
        g = [gold[p]["score"] for p, _ in pred if gold[p]["language"] == lang]
        q = [v for p, v in pred if gold[p]["language"] == lang]
        assert a["metrics"][lang]["spearman"] == pytest.approx(
            stats.spearmanr(g, q).statistic, abs=1e-12
        )
        assert a["metrics"][lang]["pearson"] == pytest.approx(
            stats.pearsonr(g, q).statistic, abs=1e-12
        )
        assert a["metrics"][lang]["n"] == len(g)
        rhos.append(stats.spearmanr(g, q).statistic)
    assert a["primary"]["value"] == pytest.approx(sum(rhos) / 2, abs=1e-12)
    assert a["metrics"]["kin"] == {"spearman": None, "pearson": None, "n": 0}
    assert "kin: no pair of kin in the gold" in a["notes"]


def test_a_file_covering_some_languages_scores_them_and_says_why_macro_is_empty(str_home, tmp_path):
    _, pred = _predictions(str_home, langs=("eng",))
    p = tmp_path / "eng_only.csv"
    p.write_text("PairID,Pred_Score\n" + "".join(f"{i},{v}\n" for i, v in pred), encoding="utf-8")
    r = score_file("str", p, home=str_home)
    assert r["metrics"]["eng"]["spearman"] is not None and r["primary"]["value"] is None
    assert "esp: not in the submission" in r["notes"]
    assert "macro: undefined unless every language in the gold has a value" in r["notes"]


def test_within_a_language_every_pair_is_needed(str_home, tmp_path):
    _, pred = _predictions(str_home, langs=("eng", "esp"))
    esp = [x for x in pred if x[0].startswith("ESP")]
    p = tmp_path / "partial.csv"
    p.write_text(
        "PairID,Pred_Score\n" + "".join(f"{i},{v}\n" for i, v in pred if (i, v) != esp[0]),
        encoding="utf-8",
    )
    with pytest.raises(
        SubmissionInvalid,
        match=f"1 PairID\\(s\\) of esp missing from the submission: '{esp[0][0]}'",
    ):
        validate_file("str", p, home=str_home)
    p.write_text("PairID,Score\nENG-test-0000,1\n", encoding="utf-8")
    with pytest.raises(SubmissionInvalid, match="lacks column\\(s\\) Pred_Score"):
        validate_file("str", p, home=str_home)
    p.write_text("PairID,Pred_Score\nKIN-test-0000,1\n", encoding="utf-8")  # no test gold for kin
    with pytest.raises(SubmissionInvalid, match="unknown PairID"):
        validate_file("str", p, home=str_home)


# ---------------------------------------------------------------- on the server


def test_the_board_says_why_a_partial_file_has_no_macro(embedded_backend):
    from backbone import burst, make_team, phase, set_phase, submit

    from server.boards.leaderboard import build_board, to_dict
    from server.domain.provenance import current_provenance
    from tasks import get_task

    b = embedded_backend
    set_phase(b, "str", "test", public_fraction=1.0)
    task = get_task("str")
    inputs = [
        json.loads(x)
        for x in TaskStore("str", b.settings.home)
        .public("test", "inputs.jsonl")
        .read_text(encoding="utf-8")
        .splitlines()
    ]
    data = "PairID,Pred_Score\n" + "".join(
        f"{r['PairID']},{i % 7}\n" for i, r in enumerate(inputs) if r["language"] == "eng"
    )
    team, user = make_team(b, "English only")
    submit(b, team, user, "str", "test", data=data.encode(), filename="pred_eng.csv")
    burst(b)
    with b.session() as s:
        board = build_board(
            s,
            task,
            phase(b, "str", "test"),
            provenance=current_provenance(task, "test", b.settings.home),
        )
    (row,) = [r for r in board.rows if r.team == "English only"]
    assert row.values["macro/spearman"] is None and row.values["eng/spearman"] is not None
    assert row.why_empty == (  # its own macro (English's value) said as such, never the macro
        "covers eng only, not esp: no macro over every language; its macro over the 1 it covers "
        f"is {row.values['eng/spearman']:.4f}; macro: undefined unless every language in the "
        "gold has a value; esp: not in the submission"
    )
    assert to_dict(board)["rows"][0]["why_empty"] == row.why_empty


def test_the_task_page_shows_the_human_reference(client):
    page = client.get("/tasks/str").get_data(as_text=True)
    assert "Reference values" in page and "0.84" in page and "split-half" in page
    # the organisers' lexical figures, each with the file and commit it was read from
    assert page.count("the organisers&#39; figure") == 9 and "0.67" in page and "0.31" in page
    assert "results_lexical/hau/hau_lexical_overlap.json" in page and "6c38f37" in page
    assert "Reference values" in client.get("/tasks/str/leaderboard").get_data(as_text=True)
