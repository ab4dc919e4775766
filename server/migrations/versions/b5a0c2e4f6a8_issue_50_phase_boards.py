"""several boards per phase: Phase.boards (the declared boards) and BoardRanking (the published
final ranking of each declared board, beside the phase's RankingVersion)

Revision ID: b5a0c2e4f6a8
Revises: d2f4a6c8e0b3
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "b5a0c2e4f6a8"
down_revision = "d2f4a6c8e0b3"
branch_labels = None
depends_on = None

S = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("phase") as b:
        b.add_column(sa.Column("boards", sa.JSON(), nullable=True))
    op.create_table(
        "boardranking",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("ranking_id", sa.Integer(), nullable=False),
        sa.Column("board", S(length=32), nullable=False),
        sa.Column("sha256", S(length=64), nullable=False),
        sa.Column("body_json", sa.Text(), nullable=False),
        sa.Column("body_csv", sa.Text(), nullable=False),
        sa.Column("body_latex", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["ranking_id"], ["rankingversion.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("ranking_id", "board"),
    )
    op.create_index(
        op.f("ix_boardranking_ranking_id"), "boardranking", ["ranking_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_boardranking_ranking_id"), table_name="boardranking")
    op.drop_table("boardranking")
    with op.batch_alter_table("phase") as b:
        b.drop_column("boards")
