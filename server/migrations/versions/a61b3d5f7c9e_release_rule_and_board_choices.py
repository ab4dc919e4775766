"""a phase's release rule for its live public scores (scorer.release: exact, ladder or rounded;
null: exact), and each team's ranked run per declared board (BoardChoice)

Revision ID: a61b3d5f7c9e
Revises: a63e7c1d5f9b
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "a61b3d5f7c9e"
down_revision = "a63e7c1d5f9b"
branch_labels = None
depends_on = None

S = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("phase") as b:
        b.add_column(sa.Column("release_rule", sa.JSON(), nullable=True))
    op.create_table(
        "boardchoice",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("board", S(length=32), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=False),
        sa.Column("chosen_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["phase_id"], ["phase.id"]),
        sa.ForeignKeyConstraint(["team_id"], ["team.id"]),
        sa.ForeignKeyConstraint(["submission_id"], ["submission.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("phase_id", "team_id", "board"),
    )
    op.create_index(op.f("ix_boardchoice_phase_id"), "boardchoice", ["phase_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_boardchoice_phase_id"), table_name="boardchoice")
    op.drop_table("boardchoice")
    with op.batch_alter_table("phase") as b:
        b.drop_column("release_rule")
