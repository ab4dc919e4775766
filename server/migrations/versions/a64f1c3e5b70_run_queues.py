"""code runs queued per competition and pool, served round-robin, held under a lease:
CodeRun.competition_id, pool, held_by, lease_until, the index a claim reads (ix_code_run_queue),
the round-robin's turns (runqueueturn), and the run workers' tokens (runworkertoken). Existing
runs join their task's competition's queue in the "cpu" pool.

Revision ID: a64f1c3e5b70
Revises: a61b3d5f7c9e
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "a64f1c3e5b70"
down_revision = "a61b3d5f7c9e"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("coderun") as batch:
        batch.add_column(
            sa.Column("competition_id", sa.Integer(), nullable=False, server_default="0")
        )
        batch.add_column(
            sa.Column(
                "pool",
                sqlmodel.sql.sqltypes.AutoString(length=32),
                nullable=False,
                server_default="cpu",
            )
        )
        batch.add_column(
            sa.Column(
                "held_by",
                sqlmodel.sql.sqltypes.AutoString(length=64),
                nullable=False,
                server_default="",
            )
        )
        batch.add_column(sa.Column("lease_until", sa.DateTime(), nullable=True))
    op.create_index(
        "ix_code_run_queue", "coderun", ["stage", "pool", "competition_id", "id"], unique=False
    )
    op.create_table(
        "runqueueturn",
        sa.Column("pool", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("served", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("pool", "competition_id"),
    )
    op.create_table(
        "runworkertoken",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("token_sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("prefix", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("name", sqlmodel.sql.sqltypes.AutoString(length=120), nullable=False),
        sa.Column("competition_ids", sa.JSON(), nullable=True),
        sa.Column("pools", sa.JSON(), nullable=True),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["created_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_runworkertoken_token_sha256"), "runworkertoken", ["token_sha256"], unique=True
    )
    op.execute(
        "UPDATE coderun SET competition_id = COALESCE((SELECT ct.competition_id FROM "
        "competitiontask ct WHERE ct.task_id = coderun.task_id), 0)"
    )
    op.execute(
        "INSERT INTO runqueueturn (pool, competition_id, served) "
        "SELECT DISTINCT pool, competition_id, 0 FROM coderun"
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_runworkertoken_token_sha256"), table_name="runworkertoken")
    op.drop_table("runworkertoken")
    op.drop_table("runqueueturn")
    op.drop_index("ix_code_run_queue", table_name="coderun")
    with op.batch_alter_table("coderun") as batch:
        batch.drop_column("lease_until")
        batch.drop_column("held_by")
        batch.drop_column("pool")
        batch.drop_column("competition_id")
