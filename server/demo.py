"""Synthetic demo data: small made-up releases of every task (never the official files), imported
through the real importers, plus demo teams, submissions and baselines so leaderboards fill at once.
"""

from __future__ import annotations

import csv
import io
import json
import random
import tempfile
from pathlib import Path

from server.baselines import BASELINE_TEAM

WORDS = ("river stone light garden word voice bread house road fire letter mountain city star "
         "harvest door window shepherd lamp seed field tree sea wind path").split()
DEMO_TEAMS = (("Aurora NLP", 0.15), ("Borealis", 0.3), ("Cirrus Lab", 0.45))
ORGANIZER_EMAIL = "organizer@demo.palimpsest.invalid"
ORGANIZER_PASSWORD = "palimpsest-demo"


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _jsonl(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def _table(path: Path, header, rows, delimiter=",") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, delimiter=delimiter, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def write_trotr(root: Path, n_pairs: int = 120, seed: int = 1) -> Path:
    """A made-up TRoTR checkout: one fold with train/dev/test pairs, TRaC gold, uses and instances."""
    rng = random.Random(seed)
    targets = [f"Demo passage {i}: {_sentence(rng, 3)}" for i in range(8)]
    uses, instances = [], []
    for t_i, t in enumerate(targets):
        for u in range(5):
            uses.append((f"u{t_i}_{u}", f"{_sentence(rng, 6)} {t} {_sentence(rng, 4)}", "7:20", t))
    by_target = {t: [u for u in uses if u[3] == t] for t in targets}
    pl = root / "datasets" / "FOLD_1" / "pair-by-line"
    counter = 0
    for split, n in (("train", n_pairs // 2), ("dev", n_pairs // 2), ("test", n_pairs)):
        rows = []
        for _ in range(n):
            t = rng.choice(targets)
            a, b = rng.sample(by_target[t], 2)
            counter += 1
            score = round(rng.uniform(1, 4), 3)
            rows.append({"instanceID": f"pair_{counter}_(Demo {targets.index(t)})", "dataID1": a[0],
                         "dataID2": b[0], "lemma": t, "context1": a[1], "context2": b[1],
                         "indices_target_token1": a[2], "indices_target_token2": b[2],
                         "indices_target_sentence1": "0:80", "indices_target_sentence2": "0:80",
                         "score": score, "oov": targets.index(t) % 2 == 0})
        for kind in ("binary", "ranking"):
            def lab(r):
                return int(r["score"] >= 2.5) if kind == "binary" else r["score"]

            clean = [{k: v for k, v in r.items() if k not in ("score", "oov")} | {"label": lab(r)} for r in rows]
            _jsonl(pl / f"{split}.{kind}.jsonl", clean)
            if split != "train":
                _jsonl(pl / f"{split}.oov.{kind}.jsonl", [c for c, r in zip(clean, rows) if r["oov"]])
                _jsonl(pl / f"{split}.iov.{kind}.jsonl", [c for c, r in zip(clean, rows) if not r["oov"]])
    _table(root / "datasets" / "trac_gold_scores.tsv", ("lemma", "topic_variation"),
           [(t, round(rng.uniform(0, 1), 4)) for t in targets], "\t")
    _table(root / "data" / "uses.tsv", ("dataID", "context", "indices_target_token", "lemma"), uses, "\t")
    inst = []
    for t in targets:
        us = by_target[t]
        for i in range(len(us) - 1):
            inst.append((f"inst_{us[i][0]}_{us[i + 1][0]}", f"{us[i][0]},{us[i + 1][0]}"))
    _table(root / "data" / "instances.tsv", ("instanceID", "dataIDs"), inst, "\t")
    return root


def write_swissgov(root: Path, docs: int = 3, seed: int = 2) -> Path:
    rng = random.Random(seed)
    base = root / "data" / "evaluation" / "gold_labels"
    for split, n in (("dev", max(1, docs - 1)), ("test", docs)):
        for lang in ("de", "fr", "it"):
            rows = []
            for i in range(n):
                ta, tb = _sentence(rng, rng.randint(20, 40)), _sentence(rng, rng.randint(20, 40))
                rows.append({"id": f"admin_{lang}_{split}_{i}", "text_a": ta, "text_b": tb,
                             "labels_a": [round(rng.random(), 3) for _ in ta.split()],
                             "labels_b": [round(rng.random(), 3) for _ in tb.split()]})
            _jsonl(base / split / f"gold_admin_{lang}.jsonl", rows)
    return root


def write_loci(root: Path, seed: int = 3) -> dict:
    rng = random.Random(seed)
    queries = [(f"hier. demo {i}", _sentence(rng, 12)) for i in range(15)]
    sources = [(f"verg. demo {j}", _sentence(rng, 12)) for j in range(30)]
    links = [(q, s, 1) for q, _ in queries for s, _ in rng.sample(sources, rng.randint(0, 2))]
    links += [(queries[0][0], s, 0) for s, _ in sources[:3] if (queries[0][0], s, 1) not in links]
    paths = {"query": root / "queries.csv", "source": root / "sources.csv", "gold": root / "gold.csv"}
    _table(paths["query"], ("seg_id", "text"), queries)
    _table(paths["source"], ("seg_id", "text"), sources)
    _table(paths["gold"], ("query_id", "source_id", "label"), links)
    return paths


def import_demo_tasks(home: Path, *, only_missing: bool = True, n_pairs: int = 120) -> list[str]:
    """Import synthetic releases of every task into `home`; returns the ids imported."""
    from tasks import all_tasks
    from tasks.importers import import_task
    from tasks.store import TaskStore

    done = []
    with tempfile.TemporaryDirectory(prefix="palimpsest-demo-") as tmp:
        tmp = Path(tmp)
        trotr = write_trotr(tmp / "TRoTR", n_pairs=n_pairs)
        swiss = write_swissgov(tmp / "SwissGov-RSD")
        loci = write_loci(tmp / "loci")
        for t in all_tasks():
            if only_missing and TaskStore(t.id, home).exists():
                continue
            if t.importer == "trotr":
                import_task(t.id, home, source=trotr, fold=1)
            elif t.importer == "swissgov":
                import_task(t.id, home, source=swiss)
            elif t.importer == "loci":
                import_task(t.id, home, query=loci["query"], source=loci["source"], gold=loci["gold"])
            else:  # a task added later without a demo generator
                continue
            done.append(t.id)
    return done


def predictions(task_id: str, split: str, home: Path, noise: float, seed: int) -> tuple[bytes, str]:
    """A plausible submission for a demo team: the gold with `noise` (0 = perfect), as (bytes, name)."""
    from tasks import get_task
    from tasks.store import TaskStore

    rng = random.Random(seed)
    task = get_task(task_id)
    st = TaskStore(task_id, home)
    if task.importer == "loci":
        gold = list(csv.DictReader(io.StringIO(st.gold(split, "links.csv").read_text())))
        qs = st.root.joinpath("index", split, "query_ids.txt").read_text().splitlines()
        ss = st.root.joinpath("index", split, "source_ids.txt").read_text().splitlines()
        rows = [(g["query_id"], g["source_id"], round(1 - rng.random() * noise, 3))
                for g in gold if rng.random() > noise]
        rows += [(rng.choice(qs), rng.choice(ss), round(rng.random() * noise, 3)) for _ in range(int(10 * noise))]
        rows = list({(q, s): (q, s, v) for q, s, v in rows}.values())
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(("query_id", "source_id", "score"))
        w.writerows(rows)
        return buf.getvalue().encode(), "links.csv"
    gold = [json.loads(line) for line in st.gold(split, "gold.jsonl").read_text().splitlines() if line.strip()]
    out = []
    for g in gold:
        if task_id == "tric-binary":
            lab = g["label"] if rng.random() > noise else 1 - g["label"]
            out.append({"instanceID": g["instanceID"], "label": lab})
        elif task_id == "tric-ranking":
            out.append({"instanceID": g["instanceID"], "score": g["label"] + rng.gauss(0, 3 * noise)})
        elif task_id == "trac":
            out.append({"target": g["target"], "score": g["score"] + rng.gauss(0, noise)})
        elif task.importer == "swissgov":
            out.append({"id": g["id"], "labels_a": [x + rng.gauss(0, 2 * noise) for x in g["labels_a"]],
                        "labels_b": [x + rng.gauss(0, 2 * noise) for x in g["labels_b"]]})
    return "".join(json.dumps(r) + "\n" for r in out).encode(), "predictions.jsonl"


def seed_demo(settings, engine, *, enqueue: bool = True, redis=None) -> dict:
    """Import synthetic tasks, create demo teams, an organizer and baselines, and submit their runs.
    Idempotent: a second call finds the demo teams and adds nothing."""
    from sqlalchemy import select
    from sqlmodel import Session

    from server.auth import create_user, new_invite_code
    from server.models import Team, User
    from server.submissions import create_submission, ensure_phases, mark_primary
    from tasks import all_tasks

    imported = import_demo_tasks(settings.home)
    with Session(engine) as s:
        phases = ensure_phases(s)
        if s.execute(select(Team).where(Team.name == DEMO_TEAMS[0][0])).first():
            return {"imported": imported, "submissions": 0}
        if not s.execute(select(User).where(User.email == ORGANIZER_EMAIL)).first():
            create_user(s, email=ORGANIZER_EMAIL, password=ORGANIZER_PASSWORD, is_organizer=True)
        teams = []
        for i, (name, noise) in enumerate(DEMO_TEAMS + ((BASELINE_TEAM, 0.6),)):
            team = Team(name=name, invite_code=new_invite_code(), is_baseline=name == BASELINE_TEAM)
            s.add(team)
            s.flush()
            user = create_user(s, email=f"team{i + 1}@demo.palimpsest.invalid",
                               password=new_invite_code() + "x")
            user.team_id = team.id
            s.add(user)
            teams.append((team, user, noise))
        s.commit()
        from server.models import Phase

        made = 0
        for t in all_tasks():
            for phase in s.execute(select(Phase).where(Phase.task_id == t.id)).scalars().all():
                for k, (team, user, noise) in enumerate(teams):
                    runs = (("baseline: noisy gold", noise),) if team.is_baseline else (
                        ("primary system", noise), ("contrastive variant", min(0.9, noise + 0.1)))
                    first = None
                    for r, (method, nz) in enumerate(runs):
                        data, name = predictions(t.id, phase.split, settings.home, nz, seed=hash((t.id, k, r)) & 0xFFFF)
                        sub = create_submission(
                            s, user=user, team=team, task_id=t.id, phase=phase, upload_bytes_or_stream=data,
                            filename=name, method_name=f"{team.name} {method}",
                            description=f"Demo run of {team.name} (synthetic data).", url="",
                            show_publicly=True, is_baseline=team.is_baseline, settings=settings,
                            redis=redis, enqueue=enqueue, enforce_limits=False)
                        first = first or sub
                        made += 1
                    if first is not None and not team.is_baseline:
                        mark_primary(s, submission_id=first.id, team_id=team.id)
                if phase.name == "dev":  # one broken file, to show every validation message
                    team, user, _ = teams[-2]
                    create_submission(s, user=user, team=team, task_id=t.id, phase=phase,
                                      upload_bytes_or_stream=b'{"oops": 1}\nnot json\n', filename="broken.jsonl",
                                      method_name="a broken file", settings=settings, redis=redis,
                                      enqueue=enqueue, enforce_limits=False)
                    made += 1
    return {"imported": imported, "submissions": made, "phases": len(phases)}
