"""Synthetic demo data: the small made-up release each task declares (never the official files),
imported through the real importers, plus demo teams, submissions and baselines so leaderboards fill
at once.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from sqlalchemy import select
from sqlmodel import Session

from server import objectstore
from server.actions import competitions as comp_actions
from server.domain import people
from server.domain.accounts import create_user, new_invite_code
from server.domain.baselines import BASELINE_TEAM
from server.domain.submissions import ensure_phases, mark_primary, take_file
from server.jobs.dispatch import KEY, Jobs, jobs
from server.models import (
    Competition,
    CompetitionTask,
    Phase,
    Registration,
    Team,
    TeamMember,
    User,
    utcnow,
)
from tasks import all_tasks, get_task
from tasks.base import resolve

# the makers moved to the tasks' declarations; these names stay for the tests and benchmarks
from tasks.demo import WORDS, sentence, table, write_jsonl, write_loci, write_swissgov, write_trotr  # noqa: F401
from tasks.importers import import_task
from tasks.store import TaskStore

DEMO_TEAMS = (("Aurora NLP", 0.15), ("Borealis", 0.3), ("Cirrus Lab", 0.45))
ORGANIZER_EMAIL = "organizer@demo.palimpsest.invalid"
ORGANIZER_PASSWORD = "palimpsest-demo"
DEMO_COMPETITION = "palimpsest-demo"
DEMO_PAGES = (
    (
        "overview",
        "Overview",
        "A demonstration of Palimpsest on **synthetic data**: every task below comes with a "
        "small made-up release, three demo teams and a baseline, so that each leaderboard is "
        "filled from the start.\n\n"
        "1. Sign up, then register for this competition by accepting its terms (approval is "
        "automatic).\n"
        "2. Form a team (a team of one is fine).\n"
        "3. Open a task, download its inputs and read its submission format.\n"
        "4. Upload a prediction file and mark your primary run.\n",
    ),
    (
        "terms",
        "Terms",
        "The demo data are made up by Palimpsest itself; they carry no licence of an official "
        "release. Runs submitted here are kept on this machine only and may be deleted at any "
        "time.\n",
    ),
)


def import_demo_tasks(home: Path, *, only_missing: bool = True, n_pairs: int = 120) -> list[str]:
    """Import the synthetic release each task declares (`Task.demo`) into `home`; returns the ids
    imported. A task without demo data is left out. `n_pairs` sizes the releases that take a
    size."""
    done = []
    with tempfile.TemporaryDirectory(prefix="palimpsest-demo-") as tmp:
        tmp = Path(tmp)
        releases: dict[str, dict] = {}  # one release per maker, shared by the tasks that name it
        for t in all_tasks():
            if t.demo is None or (only_missing and TaskStore(t.id, home).exists()):
                continue
            if t.demo.release not in releases:
                root = tmp / f"release-{len(releases)}"
                releases[t.demo.release] = resolve(t.demo.release)(root, n_pairs)
            import_task(t.id, home, **releases[t.demo.release])
            done.append(t.id)
    return done


def predictions(task_id: str, split: str, home: Path, noise: float, seed: int) -> tuple[bytes, str]:
    """A plausible submission for a demo team: the gold with `noise` (0 = perfect), as (bytes,
    name), made by the task's declared `demo.predictions`."""
    task = get_task(task_id)
    if task.demo is None:
        raise ValueError(f"task {task_id!r} declares no demo data")
    return resolve(task.demo.predictions)(
        task, TaskStore(task_id, home), split, noise, random.Random(seed)
    )


def seed_demo(settings, engine) -> dict:
    """Import synthetic tasks, create demo teams, an organizer and baselines, and submit their runs.
    Idempotent: a second call finds the demo teams and adds nothing."""
    imported = import_demo_tasks(settings.home)
    objectstore.push_tasks(settings, imported)  # a site on a store: its workers find them there
    with Session(engine, info={KEY: Jobs(settings)}) as s:
        # the competition first: phases made for a task in none would give it one of its own
        seed_demo_competition(s, settings.home)
        phases = ensure_phases(s)
        if s.execute(select(Team).where(Team.name == DEMO_TEAMS[0][0])).first():
            return {"imported": imported, "submissions": 0}
        if not s.execute(select(User).where(User.email == ORGANIZER_EMAIL)).first():
            create_user(s, email=ORGANIZER_EMAIL, password=ORGANIZER_PASSWORD, is_admin=True)
        teams = []
        for i, (name, noise) in enumerate(DEMO_TEAMS + ((BASELINE_TEAM, 0.6),)):
            team = Team(name=name, invite_code=new_invite_code(), is_baseline=name == BASELINE_TEAM)
            s.add(team)
            s.flush()
            user = create_user(
                s, email=f"team{i + 1}@demo.palimpsest.invalid", password=new_invite_code() + "x"
            )
            s.add(TeamMember(team_id=team.id, user_id=user.id, role="captain"))
            register_demo_user(s, user)
            teams.append((team, user, noise))
        s.commit()

        made = 0
        for t in all_tasks():
            store = TaskStore(t.id, settings.home)
            # a split the import left out (TRoTR's cv under the held-out protocol) gets no runs
            splits = set(store.manifest().get("splits", ())) if store.exists() else set()
            for phase in s.execute(select(Phase).where(Phase.task_id == t.id)).scalars().all():
                if phase.split not in splits:
                    continue
                for k, (team, user, noise) in enumerate(teams):
                    runs = (
                        (("baseline: noisy gold", noise),)
                        if team.is_baseline
                        else (
                            ("primary system", noise),
                            ("contrastive variant", min(0.9, noise + 0.1)),
                        )
                    )
                    first = None
                    for r, (method, nz) in enumerate(runs):
                        data, name = predictions(
                            t.id, phase.split, settings.home, nz, seed=hash((t.id, k, r)) & 0xFFFF
                        )
                        sub = take_file(
                            s,
                            user=user,
                            team=team,
                            task_id=t.id,
                            phase=phase,
                            stream=data,
                            filename=name,
                            method_name=f"{team.name} {method}",
                            description=f"Demo run of {team.name} (synthetic data).",
                            url="",
                            show_publicly=True,
                            settings=settings,
                            exempt=True,  # seeded by the operator: no team's allowance
                            dedupe=False,
                        )
                        jobs(s, settings).score(s, sub.id)  # queued once committed
                        first = first or sub
                        made += 1
                    if first is not None and not team.is_baseline:
                        mark_primary(s, submission_id=first.id, team_id=team.id)
                if phase.name == "dev":  # one broken file, to show every validation message
                    team, user, _ = teams[-2]
                    broken = take_file(
                        s,
                        user=user,
                        team=team,
                        task_id=t.id,
                        phase=phase,
                        stream=b'{"oops": 1}\nnot json\n',
                        filename="broken.jsonl",
                        method_name="a broken file",
                        settings=settings,
                        exempt=True,
                        dedupe=False,
                    )
                    jobs(s, settings).score(s, broken.id)
                    made += 1
                s.commit()  # the phase's runs, queued for scoring once committed
    return {"imported": imported, "submissions": made, "phases": len(phases)}


def register_demo_user(s: Session, user: User) -> None:
    """A demo team's account is registered in the demo competition, its terms accepted."""
    c = s.execute(select(Competition).where(Competition.slug == DEMO_COMPETITION)).scalars().first()
    if c is not None and people.registration(s, user, c.id) is None:
        now = utcnow()
        s.add(
            Registration(
                competition_id=c.id,
                user_id=user.id,
                status="approved",
                terms_version=c.terms_version,
                terms_accepted_at=now,
                decided_at=now,
                reason="a demo team",
            )
        )


def seed_demo_competition(s: Session, home: Path) -> bool:
    """A visible demo competition whose tasks are the imported tasks in no competition (or in
    the placeholder their phases made), with short overview and terms pages, its data behind
    registration (automatic approval); False when it exists already."""
    if any(
        c.id == DEMO_COMPETITION
        for c in comp_actions.list_competitions(s=s, viewer=None, operator=True)
    ):
        return False
    # tasks in a competition of their own making (a placeholder) are taken over
    taken = set(
        s.execute(
            select(CompetitionTask.task_id)
            .join(Competition, Competition.id == CompetitionTask.competition_id)
            .where(Competition.placeholder.is_(False))
        ).scalars()
    )
    tasks = [t.id for t in all_tasks() if TaskStore(t.id, home).exists() and t.id not in taken]
    comp_actions.create_competition(
        s=s,
        actor=None,
        via="demo",
        competition=DEMO_COMPETITION,
        title="Palimpsest demo: text reuse and relatedness",
        state="visible",
        tasks=tasks,
    )
    for slug, title, body in DEMO_PAGES:
        comp_actions.set_page(
            s=s,
            actor=None,
            via="demo",
            competition=DEMO_COMPETITION,
            page=slug,
            title=title,
            body_markdown=body,
        )
    return True
