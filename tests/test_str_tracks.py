"""STR as SemEval-2024 Task 1 ran it (issue 50, item 4): the importer reads Tracks A, B and C of a
made-up checkout in the upstream layout, and the phases it gets carry one board per track and
language with gold (`a-eng`, `b-afr`, `c-hin`, ...), each ranking the runs that declared its
track by their Spearman on that language, equal to scipy's on the board's part of the gold; a
team's macro over the languages it covered is shown as such on the main board, never as the
macro."""

from __future__ import annotations

import csv
import json
import random
import re

import numpy as np
import pytest
from backbone import burst, make_team, submit
from conftest import _make_backend
from helpers import printed_as
from scipy.stats import spearmanr
from sqlalchemy import select

from server.models import AuditLog, Phase
from tasks import get_task
from tasks.errors import ReleaseError
from tasks.importers import import_task
from tasks.semrel import write_tracks
from tasks.store import TaskStore

TASK = "str"
LANGUAGE_BOARDS = {"a-eng", "a-esp", "b-afr", "b-eng", "c-afr", "c-eng", "c-hin"}
# each track's mean over its languages with gold in the split (not a SemEval ranking)
MACRO_BOARDS = {
    "a-macro": ["eng", "esp"],
    "b-macro": ["afr", "eng"],
    "c-macro": ["afr", "eng", "hin"],
}
# the same means over each team's ranked run on each language's board (overall boards)
OVERALL_BOARDS = {
    f"{b[0]}-overall": [f"{b[0]}-{lang}" for lang in v] for b, v in MACRO_BOARDS.items()
}
EXPECTED_TEST = LANGUAGE_BOARDS | set(MACRO_BOARDS) | set(OVERALL_BOARDS)
EXPECTED_DEV = EXPECTED_TEST | {"a-kin", "b-kin"}  # kin has dev gold, no test gold


def test_the_importer_reads_every_track_and_refuses_one_that_differs(tmp_path):
    root = write_tracks(tmp_path / "rel", size=60)
    m = import_task(TASK, tmp_path / "home", source=root)
    assert m["source"] == "SemEval-2024 Task 1 (Tracks A, B, C)"
    assert m["tracks"] == {
        "A": ["eng", "esp", "kin"],
        "B": ["afr", "eng", "kin"],
        "C": ["afr", "eng", "hin"],
    }
    assert set(m["counts"]["test"]) == {"afr", "eng", "esp", "hin"}
    assert set(m["counts"]["train"]) == {"eng", "esp", "kin"}  # Track A's alone
    gold = TaskStore(TASK, tmp_path / "home").gold("test", "gold.jsonl")
    rows = [json.loads(x) for x in gold.read_text(encoding="utf-8").splitlines()]
    # afr's tab-separated test gold read as two sentences, once (not once per track)
    afr = [r for r in rows if r["language"] == "afr"]
    assert len(afr) == m["counts"]["test"]["afr"] == len({r["PairID"] for r in afr})
    inputs = TaskStore(TASK, tmp_path / "home").public("test", "inputs.jsonl")
    one = next(json.loads(x) for x in inputs.read_text().splitlines() if '"afr"' in x)
    assert one["sentence1"] and one["sentence2"] and "\t" not in one["sentence1"]
    # a language's gold differs between two tracks: refused, naming the file
    path = root / "Track C" / "eng" / "eng_test_with_labels.csv"
    with open(path, newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    k = table[0].index("Score")
    table[1][k] = "0.999" if table[1][k] != "0.999" else "0.001"
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(table)
    with pytest.raises(ReleaseError, match=r"Track C/eng/eng_test_with_labels.csv.*scores differ"):
        import_task(TASK, tmp_path / "home2", source=root)


@pytest.fixture
def site(request, tmp_path, monkeypatch):
    src = tmp_path / "src"
    import_task(TASK, src, source=write_tracks(tmp_path / "rel", size=90, seed=7))
    b = _make_backend("embedded", request, tmp_path, src, monkeypatch)
    from server.domain import lifecycle

    with b.session() as s:  # no limits: each team submits as it likes
        for p in s.execute(select(Phase).where(Phase.task_id == TASK)).scalars():
            lifecycle.edit_phase(
                s, p, {"daily_limit": None, "total_limit": None, "concurrent_limit": None},
                actor=None,
            )  # fmt: skip
    return b


def _phase(b, name: str) -> Phase:
    with b.session() as s:
        return s.execute(
            select(Phase).where(Phase.task_id == TASK, Phase.name == name)
        ).scalar_one()


def test_each_phase_has_the_boards_of_each_tracks_languages(site):
    from server.domain import people

    test, dev = _phase(site, "test"), _phase(site, "dev")
    assert {b["name"] for b in test.boards} == EXPECTED_TEST
    assert {b["name"] for b in dev.boards} == EXPECTED_DEV
    c_macro = next(b for b in test.boards if b["name"] == "c-macro")
    assert c_macro["ranking"] == {
        "subset": "macro-c",
        "metric": "spearman",
        "over": ["afr", "eng", "hin"],
    }
    assert "not a SemEval-2024 ranking" in c_macro["title"]
    # a mean over groups names groups of the task, and a name of its own; the paths said
    from server.domain import boards
    from server.exceptions import BoardsInvalid
    from tasks import get_task

    bad = [
        {"name": "x", "title": "X", "ranking": {"subset": "eng", "metric": "spearman",
                                               "over": ["eng", "xyz"]}},
        {"name": "y", "title": "Y", "ranking": {"subset": "m y", "metric": "spearman",
                                               "over": ["eng"]}},
    ]  # fmt: skip
    with site.session() as s, pytest.raises(BoardsInvalid) as e:
        boards.checked(s, get_task(TASK), bad, where="tasks[0].phases[1]")
    msg = str(e.value)
    assert "tasks[0].phases[1].boards[0].ranking.subset: 'eng' is a declared subset" in msg
    assert "tasks[0].phases[1].boards[0].ranking.over[1]: 'xyz' is not a language" in msg
    assert "tasks[0].phases[1].boards[1].ranking: Value error, a mean over groups is named" in msg
    b_afr = next(b for b in test.boards if b["name"] == "b-afr")
    assert b_afr["ranking"] == {"subset": "afr", "metric": "spearman"}
    assert b_afr["filter"] == {"fact": "track", "equals": ["B"]}
    with site.session() as s:  # the competition asks the track its boards filter on (audited)
        c = people.competition_of_task(s, TASK)
        track = next(f for f in c.fact_fields if f["key"] == "track")
        assert track["choices"] == ["A", "B", "C"] and track["rules"][0]["when"] == ["B"]
        log = s.execute(select(AuditLog).where(AuditLog.action == "fact_sheet.extend")).scalars()
        assert any(a.details.get("fact_fields_added") == ["track", "labelled_data"] for a in log)


def _gold(b) -> list[dict]:
    path = TaskStore(TASK, b.settings.home).gold("test", "gold.jsonl")
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _file(pred: dict[str, float]) -> bytes:
    return ("PairID,Pred_Score\n" + "".join(f"{k},{v}\n" for k, v in pred.items())).encode()


# team -> (track, languages covered, noise)
TEAMS = {
    "anna": ("A", ("eng", "esp"), 0.1),
    "bert": ("A", ("afr", "eng", "esp", "hin"), 0.2),  # every test language, declared A
    "cleo": ("B", ("afr", "eng"), 0.15),
    "dora": ("B", ("afr",), 0.05),
    "emil": ("C", ("afr", "eng", "hin"), 0.3),
    "fay": ("C", ("hin",), 0.1),
    "gus": (None, ("afr", "eng", "esp", "hin"), 0.25),  # no track: the main board only
}
# the labelled data each team declares having learned from (none where not named)
LABELLED = {
    "anna": "eng, esp",
    "bert": "eng, esp",
    # Track C, cross-lingual: learned from eng's labels, so not ranked on c-eng (its afr and hin
    # are: no labelled data in those target languages)
    "emil": "eng, esp",
}


def _entered(name: str, t: str, lang: str) -> bool:
    track, langs, _ = TEAMS[name]
    if track != t or lang not in langs:
        return False
    used = {x.strip() for x in LABELLED.get(name, "none").split(",")}
    return not (t == "C" and lang in used)


def test_runs_land_on_their_track_and_language_boards(site):
    from server import create_app
    from server.boards import stats

    gold = _gold(site)
    preds = {}
    for i, (name, (track, langs, noise)) in enumerate(TEAMS.items()):
        team, user = make_team(site, name)
        rng = random.Random(i)
        pred = {
            g["PairID"]: round(g["score"] + rng.gauss(0, noise), 4)
            for g in gold
            if g["language"] in langs
        }
        facts = {"track": track, "labelled_data": LABELLED.get(name, "none")} if track else None
        sub = submit(site, team, user, TASK, "test", data=_file(pred), facts=facts,
                     filename="p.csv")  # fmt: skip
        preds[sub.id] = (name, pred)
    burst(site)
    p = _phase(site, "test")
    units = stats._gold_part(site.engine, p, site.settings, "public")
    part = stats.Part.get(site.settings, site.engine, get_task(TASK), p, "public")
    app = create_app({"env": "testing", "PALIMPSEST_ENQUEUE": False})
    c = app.test_client()
    for board in LANGUAGE_BOARDS:
        t, lang = board.split("-")
        want = {n for n in TEAMS if _entered(n, t.upper(), lang)}
        r = c.get(f"/tasks/{TASK}/leaderboard.json?phase=test&board={board}")
        assert r.status_code == 200, (board, r.get_data(as_text=True)[:300])
        got = r.get_json()
        rows = [x for x in got["rows"] if x["row_type"] == "team"]
        assert {preds[x["submission_id"]][0] for x in rows} == want, board
        assert board != "c-eng" or "emil" not in want
        values = {}
        for x in rows:  # each value: scipy's Spearman on the language's public pairs
            pred = preds[x["submission_id"]][1]
            ids = [g for g in gold if g["language"] == lang and g["PairID"] in units]
            rho = spearmanr([g["score"] for g in ids], [pred[g["PairID"]] for g in ids]).statistic
            assert x["metrics"][f"{lang}/spearman"] == pytest.approx(rho, abs=1e-9), board
            values[x["submission_id"]] = rho
        assert [x["submission_id"] for x in rows] == sorted(values, key=lambda k: -values[k])
    # each track's mean over its languages: the teams that cover them all ranked by it (the
    # mean of scipy's Spearman on each), those that cover some shown unranked with their own
    # mean over those, said as such; Track C's run that used eng's labels is not on it
    spearman = {}
    for name, pred in preds.values():
        for lang in ("afr", "eng", "esp", "hin"):
            ids = [g for g in gold if g["language"] == lang and g["PairID"] in units]
            if all(g["PairID"] in pred for g in ids):
                rho = spearmanr([g["score"] for g in ids], [pred[g["PairID"]] for g in ids])
                spearman[(name, lang)] = rho.statistic
    ranked_on = {"a-macro": {"anna", "bert"}, "b-macro": {"cleo"}, "c-macro": set()}
    partial = {"a-macro": {}, "b-macro": {"dora": ["afr"]}, "c-macro": {"fay": ["hin"]}}
    for board, langs in MACRO_BOARDS.items():
        got = c.get(f"/tasks/{TASK}/leaderboard.json?phase=test&board={board}").get_json()
        assert "not a SemEval-2024 ranking" in got["title"]
        assert got["primary"]["subset"] == f"macro-{board[0]}"
        key = f"macro-{board[0]}/spearman"
        rows = {preds[x["submission_id"]][0]: x for x in got["rows"] if x["row_type"] == "team"}
        assert set(rows) == ranked_on[board] | set(partial[board]), board
        for name in ranked_on[board]:
            mean = sum(spearman[(name, lang)] for lang in langs) / len(langs)
            assert rows[name]["rank"] is not None
            assert rows[name]["metrics"][key] == pytest.approx(mean, abs=1e-9), (board, name)
        for name, covered in partial[board].items():
            x = rows[name]
            mine = sum(spearman[(name, lang)] for lang in covered) / len(covered)
            assert x["rank"] is None and x["metrics"][key] is None
            rest = [lang for lang in langs if lang not in covered]
            said = (
                f"covers {', '.join(covered)} only, not {', '.join(rest)}: no macro over every "
                f"language of this board; its macro over the {len(covered)} it covers is "
            )
            assert x["why_empty"].startswith(said), x["why_empty"]
            shown = re.match(r"-?\d+\.\d{4}", x["why_empty"][len(said) :]).group()
            assert printed_as(shown, mine, 4), x["why_empty"]  # a naive mean: its own rounding
        ranked = sorted(ranked_on[board], key=lambda n: -rows[n]["metrics"][key])
        assert [rows[n]["rank"] for n in ranked] == list(range(1, len(ranked) + 1))
        # intervals from the phase's one matrix: the mean of the languages' resampled values
        assert got["statistics"]["status"] == "ready", board
        for name in ranked_on[board]:
            x = rows[name]
            samples = np.mean(
                [
                    part.samples(site.settings, x["submission_id"], 1, value=(lang, "spearman"))
                    for lang in langs
                ],
                axis=0,
            )
            want = np.percentile(samples, [2.5, 97.5])
            assert x["ci"] == pytest.approx(list(want), abs=1e-9), (board, name)
    # each track's overall board: the mean of the language boards' values of the teams on every
    # one of them, the others unranked naming what they miss
    for board, langs in OVERALL_BOARDS.items():
        got = c.get(f"/tasks/{TASK}/leaderboard.json?phase=test&board={board}").get_json()
        assert got["overall"] == {"boards": langs, "rule": "mean", "missing": "unranked"}
        on = {}
        for lb_name in langs:
            x = c.get(f"/tasks/{TASK}/leaderboard.json?phase=test&board={lb_name}").get_json()
            key = f"{x['primary']['subset']}/spearman"
            on[lb_name] = {r["team"]: r["metrics"][key] for r in x["rows"] if r["rank"]}
        teams = set().union(*on.values())
        rows = {r["team"]: r for r in got["rows"]}
        assert set(rows) == teams, board
        for t, r in rows.items():
            if all(t in on[b] for b in langs):
                want = sum(on[b][t] for b in langs) / len(langs)
                assert r["metrics"][f"{board}/mean"] == pytest.approx(want, abs=1e-12)
                assert r["rank"] is not None and r["ci"][0] <= want + 1e-12
            else:
                assert r["rank"] is None and "unranked" in r["why_empty"], (board, t)
    # a declared board's figure (its history of runs): the runs that enter the board, by the
    # board's own value: Track C's run that used eng's labels not on c-eng's, a track's mean as
    # the board computes it (a run covering some of its languages has none)
    from server.boards import leaderboard as lb
    from server.boards import plots
    from server.domain import boards as declared

    with site.session() as s:
        ph = s.get(Phase, p.id)
        for board in ("c-eng", "a-macro", "b-macro", "c-macro"):
            got = c.get(f"/tasks/{TASK}/leaderboard.json?phase=test&board={board}").get_json()
            key = f"{got['primary']['subset']}/{got['primary']['metric']}"
            ranked = {
                preds[x["submission_id"]][0]: x
                for x in got["rows"]
                if x["row_type"] == "team" and x["rank"] is not None
            }
            hist = plots.history(s, lb.board_from_dict(got), ph, spec=declared.resolve(ph, board))
            assert set(hist) == set(ranked), board
            for name, x in ranked.items():
                (value,) = [v for _, v in hist[name]]
                assert value == pytest.approx(x["metrics"][key], abs=1e-12), (board, name)
    # the main board: the macro over every language; a partial team's own macro said as such
    got = c.get(f"/tasks/{TASK}/leaderboard.json?phase=test").get_json()
    by_team = {preds[x["submission_id"]][0]: x for x in got["rows"] if x["row_type"] == "team"}
    assert by_team["bert"]["rank"] is not None and by_team["gus"]["rank"] is not None
    cleo = by_team["cleo"]
    assert cleo["rank"] is None
    mine = (cleo["metrics"]["afr/spearman"] + cleo["metrics"]["eng/spearman"]) / 2
    assert "covers afr, eng only, not esp, hin" in cleo["why_empty"]
    assert f"its macro over the 2 it covers is {mine:.4f}" in cleo["why_empty"]
    # an organizer moves dora's run from Track B to Track C: it leaves b-afr for c-afr at once
    from server.actions import submissions as sub_actions

    (dora,) = [sid for sid, (n, _) in preds.items() if n == "dora"]
    with site.session() as s:
        sub_actions.move_track(s=s, submission_id=dora, track="C", reason="cross-lingual after all",
                               actor=None, settings=site.settings)  # fmt: skip
    burst(site)
    for board, has in (("b-afr", False), ("c-afr", True)):
        got = c.get(f"/tasks/{TASK}/leaderboard.json?phase=test&board={board}").get_json()
        ids = {x["submission_id"] for x in got["rows"] if x["row_type"] == "team"}
        assert (dora in ids) is has, board
        # the new revision's statistics: computed by the job the move asked for after its commit
        # (this app never asks for them itself)
        assert got["statistics"]["status"] == "ready", board
    # publication: SemEval-2024 Task 1 ranked each language on its whole test set, and so does
    # each published board (STR's phases publish on the whole split): every value is Spearman's
    # rho on all of the language's test pairs (scipy, as the organisers' evaluate() computes it),
    # the public part's beside it; before publication no one but organizers sees that part
    from server.boards.leaderboard import board_from_dict
    from server.domain import publication
    from server.domain.visibility import ORGANIZER, TEAM, Viewer, may_see

    with site.session() as s:
        ph = s.get(Phase, p.id)
        assert ph.published_on == "whole" and ph.public_fraction < 1.0
        made = s.get(Phase, p.id).opens_at
        assert not may_see(Viewer(TEAM, 1), ph, made, "whole")
        assert may_see(Viewer(ORGANIZER), ph, made, "whole")
        rv = publication.publish(
            s, ph, task=get_task(TASK), actor=None, settings=site.settings, close_first=True
        )
        main = board_from_dict(json.loads(rv.body_json))
        published = {
            b: board_from_dict(json.loads(publication.board_ranking(s, rv, b).body_json))
            for b in LANGUAGE_BOARDS
        }
    assert main.part == "whole"
    checked = 0
    for board, snap in published.items():
        lang = board.split("-")[1]
        assert snap.part == "whole" and snap.published, board
        rows = [r for r in snap.rows if r.row_type == "team"]
        checked += len(rows)  # c-eng has none: its one Track C run learned from eng's labels
        whole = [g for g in gold if g["language"] == lang]
        public = [g for g in whole if g["PairID"] in units]
        assert len(public) < len(whole)
        values = {}
        for r in rows:
            pred = preds[r.submission_id][1]
            rho = spearmanr([g["score"] for g in whole], [pred[g["PairID"]] for g in whole])
            assert r.values[f"{lang}/spearman"] == pytest.approx(rho.statistic, abs=1e-12), board
            pub = spearmanr([g["score"] for g in public], [pred[g["PairID"]] for g in public])
            assert r.public_value == pytest.approx(pub.statistic, abs=1e-12), board
            assert r.ci is not None and r.ci[0] <= r.values[f"{lang}/spearman"] <= r.ci[1]
            values[r.submission_id] = rho.statistic
        order = sorted(values, key=lambda k: -values[k])
        assert [r.submission_id for r in rows if r.rank is not None] == order, board
    assert checked >= 10
    # anyone sees the published boards on the whole split, ranked as SemEval-2024 ranked them
    got = c.get(f"/tasks/{TASK}/leaderboard.json?phase=test&board=a-eng").get_json()
    assert got["ranked_on"] == "whole"
