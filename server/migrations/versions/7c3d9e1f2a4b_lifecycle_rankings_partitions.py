"""the lifecycle: published rankings as immutable versions, shared gold partitions, stale scores;
the leaderboard trigger goes (the lifecycle bumps the board's revision itself)

Every phase that already has a seed keeps its own partition (method "legacy", its seed and its
public fraction); an organizer may move it onto its split's shared, stratified partition before
its first scored submission.

Revision ID: 7c3d9e1f2a4b
Revises: 5b1f0c2a9d3e
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "7c3d9e1f2a4b"
down_revision = "5b1f0c2a9d3e"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS palimpsest_board_revision")
    elif bind.dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS palimpsest_board_revision ON submission")
        op.execute("DROP FUNCTION IF EXISTS palimpsest_board_revision()")

    op.create_table(
        "goldpartition",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=120), nullable=False),
        sa.Column("task_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("split", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("public_fraction", sa.Float(), nullable=False),
        sa.Column("method", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_goldpartition_key"), "goldpartition", ["key"], unique=True)

    op.create_table(
        "rankingversion",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("task_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("phase_name", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("published_by", sa.Integer(), nullable=True),
        sa.Column("published_at", sa.DateTime(), nullable=False),
        sa.Column("sha256", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("body_json", sa.Text(), nullable=False),
        sa.Column("body_csv", sa.Text(), nullable=False),
        sa.Column("body_latex", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["phase_id"], ["phase.id"]),
        sa.ForeignKeyConstraint(["published_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("phase_id", "version"),
    )
    op.create_index(
        op.f("ix_rankingversion_phase_id"), "rankingversion", ["phase_id"], unique=False
    )

    with op.batch_alter_table("phase") as batch:
        batch.add_column(sa.Column("partition_id", sa.Integer(), nullable=True))
        batch.create_foreign_key(
            "fk_phase_partition_id_goldpartition", "goldpartition", ["partition_id"], ["id"]
        )
    with op.batch_alter_table("submission") as batch:
        batch.add_column(
            sa.Column("stale", sa.Boolean(), nullable=False, server_default=sa.false())
        )

    # every phase with a hidden part and a seed keeps the partition it had
    phases = bind.execute(
        sa.text(
            "SELECT id, task_id, split, partition_seed, public_fraction FROM phase "
            "WHERE partition_seed IS NOT NULL AND public_fraction < 1 AND split = 'test'"
        )
    ).all()
    for pid, task_id, split, seed, frac in phases:
        bind.execute(
            sa.text(
                "INSERT INTO goldpartition (key, task_id, split, seed, public_fraction, method, "
                "created_at) VALUES (:key, :task, :split, :seed, :frac, 'legacy', "
                "CURRENT_TIMESTAMP)"
            ),
            {"key": f"phase:{pid}", "task": task_id, "split": split, "seed": seed, "frac": frac},
        )
        part = bind.execute(
            sa.text("SELECT id FROM goldpartition WHERE key = :key"), {"key": f"phase:{pid}"}
        ).scalar_one()
        bind.execute(
            sa.text("UPDATE phase SET partition_id = :part WHERE id = :pid"),
            {"part": part, "pid": pid},
        )


def downgrade() -> None:
    with op.batch_alter_table("submission") as batch:
        batch.drop_column("stale")
    with op.batch_alter_table("phase") as batch:
        batch.drop_constraint("fk_phase_partition_id_goldpartition", type_="foreignkey")
        batch.drop_column("partition_id")
    op.drop_index(op.f("ix_rankingversion_phase_id"), table_name="rankingversion")
    op.drop_table("rankingversion")
    op.drop_index(op.f("ix_goldpartition_key"), table_name="goldpartition")
    op.drop_table("goldpartition")
