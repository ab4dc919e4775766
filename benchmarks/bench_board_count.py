"""Several boards per phase: the statistics job of a phase (`server.boards.stats.
compute_board_stats`, what the worker runs after a score) with its default board alone, and with
ten declared boards beside it, from scratch each time (no resamples kept), on the same runs, seed
and data. The goal: ten boards cost under twice one board (one resampling per phase feeds every
board: each board adds its rows' resampled values and its own ranking statistics, never a
matrix of its own, and a run's predictions are read once per job).

The data: the example bundle's task with its test split enlarged (`--pairs`, written by
examples/make_bundle_sts.py's generator, in five genres), every pair in the public part (the
ranked part of an open phase), `--teams` teams alternately on tracks A and B. The ten boards
(`--boards`): `genres`, a board per genre and five track boards (as a shared task's boards per
language and track); `metrics`, Spearman and Pearson on two genres and six track boards.

    python3 benchmarks/bench_board_count.py [--pairs 4000] [--teams 40] [--B 1000] [--repeat 3]
        [--boards genres|metrics] [--primary all|macro] [--cases one|all]

`--cases all` measures the three cases of docs/benchmarks.md in one run (the `genres` boards
beside a primary over the genres' macro and beside one over all pairs, the `metrics` boards
beside one over all pairs): each site built once, then each repeat measures every case in turn,
one board then eleven (interleaved, so that the machine's load falls on each alike), each
measurement in a fresh process on its built site.

Prints one JSON document: per configuration the CPU seconds (every thread) and wall seconds of
each repeat, their medians, and the ratio of the medians (with the load average before and
after).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "examples"))

TASK, PHASE = "sts-latin", "evaluation"


GENRES = ("prose", "verse", "letters", "drama", "law")


def ten_boards(which: str, primary: str = "all") -> list[dict]:
    """`genres`: one board per genre (Spearman; as a shared task's per-language boards) and five
    track boards (tracks A and B ranked by the primary subset, track B on three genres);
    `metrics`: Spearman and Pearson on prose and on verse, and tracks A and B each on all, prose
    and verse."""
    if which == "genres":
        out = [
            {"name": g, "title": g, "ranking": {"subset": g, "metric": "spearman"}} for g in GENRES
        ]
        for track, sub in (
            ("A", primary),
            ("B", primary),
            ("B", "prose"),
            ("B", "verse"),
            ("B", "letters"),
        ):
            out.append(
                {
                    "name": f"track-{track.lower()}-{sub}",
                    "title": f"Track {track}, {sub}",
                    "ranking": {"subset": sub, "metric": "spearman"},
                    "filter": {"fact": "track", "equals": [track]},
                }
            )
        return out
    out = []
    for sub in ("prose", "verse"):
        for met in ("spearman", "pearson"):
            out.append(
                {
                    "name": f"{sub}-{met}",
                    "title": f"{sub} {met}",
                    "ranking": {"subset": sub, "metric": met},
                }
            )
    for track in ("A", "B"):
        for sub in ("all", "prose", "verse"):
            out.append(
                {
                    "name": f"track-{track.lower()}-{sub}",
                    "title": f"Track {track}, {sub}",
                    "ranking": {"subset": sub, "metric": "spearman"},
                    "filter": {"fact": "track", "equals": [track]},
                }
            )
    return out


def build(home: Path, pairs: int, teams: int, primary: str = "all") -> int:
    """The site: the bundle's competition with `pairs` test pairs, `teams` scored runs; returns the
    evaluation phase's id."""
    import make_bundle_sts
    import yaml
    from sqlmodel import Session, select

    from server.actions import bundles
    from server.db import get_engine
    from server.domain.submissions import take_file
    from server.jobs.scoring import score_submission
    from server.migrate import upgrade
    from server.models import Phase, Team, TeamMember, User
    from server.settings import get_settings

    src = home.parent / "bundle"
    shutil.copytree(REPO / "examples" / "bundle-sts-latin", src)
    make_bundle_sts.SIZES["test"] = pairs
    make_bundle_sts.GENRES = GENRES  # five genres, the pairs dealt in turn
    make_bundle_sts.write(src, 2027)
    spec = yaml.safe_load((src / "competition.yaml").read_text(encoding="utf-8"))
    spec["tasks"][0]["subsets"] = ["all", *GENRES, "macro"]
    spec["tasks"][0]["primary"] = {"subset": primary, "metric": "spearman"}
    spec["state"] = "visible"
    spec["anonymous_board"] = False
    spec["fact_fields"] = [f for f in spec["fact_fields"] if f["key"] == "track"]
    ev = next(p for p in spec["tasks"][0]["phases"] if p["name"] == PHASE)
    ev.update(opens=None, closes=None, daily_limit=None, total_limit=None, public_fraction=1.0)
    ev["boards"] = []
    (src / "competition.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))

    settings = get_settings()
    upgrade(settings)
    engine = get_engine(settings.sqlalchemy_url())
    with Session(engine) as s:
        bundles.create_from_bundle(s=s, actor=None, source=src, via="bench", settings=settings)
        s.commit()
    gold = [
        json.loads(x)
        for x in (home / "tasks" / TASK / "gold" / "test" / "gold.jsonl").read_text().splitlines()
    ]
    ids = []
    for i in range(teams):
        rng = random.Random(i)
        noise = 0.05 + 0.02 * i
        data = "".join(
            json.dumps(
                {"pair_id": g["pair_id"], "score": round(g["score"] + rng.gauss(0, noise), 4)}
            )
            + "\n"
            for g in gold
        ).encode()
        with Session(engine) as s:
            team = Team(name=f"team-{i:02d}", invite_code=f"code-{i}")
            user = User(email=f"u{i}@example.org", password_hash="x")
            s.add_all([team, user])
            s.flush()
            s.add(TeamMember(team_id=team.id, user_id=user.id, role="captain"))
            sub = take_file(
                s,
                user=user,
                team=team,
                task_id=TASK,
                phase=PHASE,
                stream=data,
                filename="pred.jsonl",
                method_name="m",
                description="",
                url="",
                show_publicly=True,
                settings=settings,
                facts={"track": "AB"[i % 2]},
                dedupe=False,
            )
            s.commit()
            ids.append(sub.id)
    for sid in ids:
        assert score_submission(sid)["status"] == "scored", sid
    with Session(engine) as s:
        return s.exec(select(Phase).where(Phase.task_id == TASK, Phase.name == PHASE)).one().id


def set_boards(phase_id: int, boards: list[dict] | None) -> None:
    from sqlmodel import Session

    from server.db import get_engine
    from server.models import Phase
    from server.settings import get_settings

    with Session(get_engine(get_settings().sqlalchemy_url())) as s:
        p = s.get(Phase, phase_id)
        p.boards = boards
        p.revision = (p.revision or 0) + 1
        s.add(p)
        s.commit()


def once(phase_id: int) -> dict:
    """The statistics job from scratch: no resamples, no board statistics kept (the per-run
    arrays the scoring job wrote stay, as they do on a site)."""
    from server.boards import stats
    from server.settings import get_settings

    settings = get_settings()
    root = stats.stats_dir(settings.home)
    for sub in ("samples", "boards"):
        shutil.rmtree(root / sub, ignore_errors=True)
    stats.Part._cache.clear()
    c0, t0 = time.process_time(), time.perf_counter()
    got = stats.compute_board_stats(phase_id, settings)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    body = stats.read_board_stats(settings, phase_id, got["version"])
    return {
        "cpu": round(cpu, 3),
        "wall": round(wall, 3),
        "rows": got["rows"],
        "boards": 1 + len(body.get("boards") or {}),
    }


CASES = (("macro", "genres"), ("all", "genres"), ("all", "metrics"))


def _env(home: Path, B: int) -> None:
    os.environ["PALIMPSEST_HOME"] = str(home)
    os.environ["PALIMPSEST_BOOTSTRAP_SAMPLES"] = str(B)
    os.environ["REDIS_URL"] = "redis://127.0.0.1:1/0"  # no queue: the job is called here


def _child(args) -> None:
    """`--site HOME --build`: build the site there, print its phase id; `--site HOME`: one board
    then eleven on it, printed as JSON."""
    home = Path(args.site)
    _env(home, args.B)
    if args.build:
        home.mkdir(parents=True)
        print(build(home, args.pairs, args.teams, args.primary))
        return
    pid = int((home.parent / "phase").read_text())
    set_boards(pid, None)
    one = once(pid)
    set_boards(pid, ten_boards(args.boards, args.primary))
    print(json.dumps({"1 board": one, "11 boards": once(pid)}))


def _all_cases(args) -> None:
    import subprocess

    def run(*extra) -> str:
        cmd = [sys.executable, __file__, "--B", str(args.B), "--pairs", str(args.pairs),
               "--teams", str(args.teams), *extra]  # fmt: skip
        return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout

    load0, t0 = os.getloadavg(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="palimpsest-boards-") as d:
        for primary in ("all", "macro"):
            site = Path(d) / primary / "home"
            pid = run("--site", str(site), "--build", "--primary", primary).strip()
            (site.parent / "phase").write_text(pid)
        built = time.perf_counter() - t0
        runs = {f"{p}/{b}": {"1 board": [], "11 boards": []} for p, b in CASES}
        for _ in range(args.repeat):
            for primary, boards in CASES:
                got = json.loads(
                    run(
                        "--site",
                        str(Path(d) / primary / "home"),
                        "--primary",
                        primary,
                        "--boards",
                        boards,
                    )  # fmt: skip
                )
                for k in ("1 board", "11 boards"):
                    runs[f"{primary}/{boards}"][k].append(got[k])
    out = {}
    for case, r in runs.items():
        med = {k: statistics.median(x["cpu"] for x in v) for k, v in r.items()}
        wall = {k: statistics.median(x["wall"] for x in v) for k, v in r.items()}
        out[case] = {
            "runs": r,
            "median_cpu": med,
            "ratio_cpu": round(med["11 boards"] / med["1 board"], 2),
            "ratio_wall": round(wall["11 boards"] / wall["1 board"], 2),
        }
    print(
        json.dumps(
            {
                "pairs": args.pairs,
                "teams": args.teams,
                "B": args.B,
                "repeat": args.repeat,
                "setup_seconds": round(built, 1),
                "cases": out,
                "load_before": load0,
                "load_after": os.getloadavg(),
            },
            indent=2,
        )
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=4000)
    ap.add_argument("--teams", type=int, default=40)
    ap.add_argument("--B", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--boards", choices=("genres", "metrics"), default="genres", help="The ten boards."
    )
    ap.add_argument(
        "--primary",
        choices=("all", "macro"),
        default="all",
        help="The task's primary subset: Spearman over all pairs, or the macro over the genres "
        "(STR's: the mean of the languages' values).",
    )
    ap.add_argument("--cases", choices=("one", "all"), default="one")
    ap.add_argument("--site", help=argparse.SUPPRESS)  # a child of `--cases all`
    ap.add_argument("--build", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.site:
        return _child(args)
    if args.cases == "all":
        return _all_cases(args)
    with tempfile.TemporaryDirectory(prefix="palimpsest-boards-") as d:
        home = Path(d) / "home"
        home.mkdir()
        os.environ["PALIMPSEST_HOME"] = str(home)
        os.environ["PALIMPSEST_BOOTSTRAP_SAMPLES"] = str(args.B)
        os.environ["REDIS_URL"] = "redis://127.0.0.1:1/0"  # no queue: the job is called here
        t0 = time.perf_counter()
        pid = build(home, args.pairs, args.teams, args.primary)
        built = time.perf_counter() - t0
        runs: dict[str, list] = {"1 board": [], "11 boards": []}
        for _ in range(args.repeat):  # alternately, so that the load falls on both alike
            set_boards(pid, None)
            runs["1 board"].append(once(pid))
            set_boards(pid, ten_boards(args.boards, args.primary))
            runs["11 boards"].append(once(pid))
    med = {k: statistics.median(r["cpu"] for r in v) for k, v in runs.items()}
    print(
        json.dumps(
            {
                "pairs": args.pairs,
                "boards": args.boards,
                "primary": args.primary,
                "teams": args.teams,
                "B": args.B,
                "setup_seconds": round(built, 1),
                "runs": runs,
                "median_cpu": med,
                "ratio_cpu": round(med["11 boards"] / med["1 board"], 2),
                "ratio_wall": round(
                    statistics.median(r["wall"] for r in runs["11 boards"])
                    / statistics.median(r["wall"] for r in runs["1 board"]),
                    2,
                ),
                "load": os.getloadavg(),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
