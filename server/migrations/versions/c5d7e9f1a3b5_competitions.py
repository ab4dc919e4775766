"""competitions: a competition groups tasks (its subtasks) and has Markdown pages

An existing database gets one visible competition per task that has phases, its short id and
title the task's id, with that task as its one subtask; no phase, team or submission row changes.

Revision ID: c5d7e9f1a3b5
Revises: a4e2b6c8d0f1
"""

from datetime import datetime, timezone

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "c5d7e9f1a3b5"
down_revision = "a4e2b6c8d0f1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    competition = op.create_table(
        "competition",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("slug", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("state", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_competition_slug"), "competition", ["slug"], unique=True)
    op.create_table(
        "competitionpage",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("slug", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("title", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("body_markdown", sa.Text(), nullable=False),
        sa.Column("body_html", sa.Text(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["competition_id"], ["competition.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("competition_id", "slug"),
    )
    op.create_index(
        op.f("ix_competitionpage_competition_id"),
        "competitionpage",
        ["competition_id"],
        unique=False,
    )
    competition_task = op.create_table(
        "competitiontask",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("task_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["competition_id"], ["competition.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task_id"),
    )
    op.create_index(
        op.f("ix_competitiontask_competition_id"),
        "competitiontask",
        ["competition_id"],
        unique=False,
    )

    # one visible competition per task that has phases, so that every existing board is reached
    bind = op.get_bind()
    phase = sa.table("phase", sa.column("task_id", sa.String))
    task_ids = [
        r[0] for r in bind.execute(sa.select(phase.c.task_id).distinct().order_by(phase.c.task_id))
    ]
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    for task_id in task_ids:
        bind.execute(
            competition.insert().values(
                slug=task_id, title=task_id, state="visible", created_at=now
            )
        )
        cid = bind.execute(
            sa.select(competition.c.id).where(competition.c.slug == task_id)
        ).scalar_one()
        bind.execute(
            competition_task.insert().values(competition_id=cid, task_id=task_id, position=0)
        )


def downgrade() -> None:
    op.drop_index(op.f("ix_competitiontask_competition_id"), table_name="competitiontask")
    op.drop_table("competitiontask")
    op.drop_index(op.f("ix_competitionpage_competition_id"), table_name="competitionpage")
    op.drop_table("competitionpage")
    op.drop_index(op.f("ix_competition_slug"), table_name="competition")
    op.drop_table("competition")
