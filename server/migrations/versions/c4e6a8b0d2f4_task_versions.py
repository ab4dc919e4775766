"""tasks that change: the versions of a bundle task's declaration, and archived tasks

Revision ID: c4e6a8b0d2f4
Revises: b3e5a7c9d1f2
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "c4e6a8b0d2f4"
down_revision = "b3e5a7c9d1f2"
branch_labels = None
depends_on = None

S = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    op.create_table(
        "taskversion",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", S(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("changes", sa.JSON(), nullable=False),
        sa.Column("effect", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["created_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task_id", "version"),
    )
    op.create_index(op.f("ix_taskversion_task_id"), "taskversion", ["task_id"], unique=False)
    op.create_table(
        "taskarchive",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", S(length=64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("archived_by", sa.Integer(), nullable=True),
        sa.Column("archived_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["archived_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task_id"),
    )


def downgrade() -> None:
    op.drop_table("taskarchive")
    op.drop_index(op.f("ix_taskversion_task_id"), table_name="taskversion")
    op.drop_table("taskversion")
