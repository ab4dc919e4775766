"""blind runs: a phase may take code and be blind; code runs

Revision ID: a1b3c5d7e9f0
Revises: e2a4c6e8f0b2
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "a1b3c5d7e9f0"
down_revision = "e2a4c6e8f0b2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("phase") as b:
        b.add_column(
            sa.Column(
                "accepts",
                sqlmodel.sql.sqltypes.AutoString(length=16),
                nullable=False,
                server_default="predictions",
            )
        )
        b.add_column(sa.Column("blind", sa.Boolean(), nullable=False, server_default=sa.false()))
        b.add_column(sa.Column("compute_budget_seconds", sa.Integer(), nullable=True))
    op.create_table(
        "coderun",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("task_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("stage", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("failure_kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True),
        sa.Column("reason", sqlmodel.sql.sqltypes.AutoString(length=500), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("archive_sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("storage_key", sqlmodel.sql.sqltypes.AutoString(length=120), nullable=False),
        sa.Column("file_name", sqlmodel.sql.sqltypes.AutoString(length=255), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("manifest", sa.JSON(), nullable=True),
        sa.Column("fields", sa.JSON(), nullable=True),
        sa.Column("outcome", sa.JSON(), nullable=True),
        sa.Column("log", sa.Text(), nullable=True),
        sa.Column("cpu_seconds", sa.Float(), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=True),
        sa.Column("is_baseline", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.Column("reviewed_at", sa.DateTime(), nullable=True),
        sa.Column("reviewed_by", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["team_id"], ["team.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.ForeignKeyConstraint(["phase_id"], ["phase.id"]),
        sa.ForeignKeyConstraint(["submission_id"], ["submission.id"]),
        sa.ForeignKeyConstraint(["reviewed_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_coderun_team_id"), "coderun", ["team_id"])
    op.create_index(op.f("ix_coderun_task_id"), "coderun", ["task_id"])
    op.create_index(op.f("ix_coderun_phase_id"), "coderun", ["phase_id"])
    op.create_index(op.f("ix_coderun_stage"), "coderun", ["stage"])
    op.create_index(op.f("ix_coderun_created_at"), "coderun", ["created_at"])
    op.create_index(op.f("ix_coderun_submission_id"), "coderun", ["submission_id"])


def downgrade() -> None:
    op.drop_table("coderun")
    with op.batch_alter_table("phase") as b:
        b.drop_column("compute_budget_seconds")
        b.drop_column("blind")
        b.drop_column("accepts")
