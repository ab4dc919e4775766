"""blind runs: the review's decision (release, redact, withhold) and the CPU reserved per run

Revision ID: d2f4a6c8e0b3
Revises: c4e6a8b0d2f4
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "d2f4a6c8e0b3"
down_revision = "c4e6a8b0d2f4"
branch_labels = None
depends_on = None

S = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("coderun") as b:
        b.add_column(sa.Column("release", S(length=16), nullable=True))
        b.add_column(sa.Column("released_log", sa.Text(), nullable=True))
        b.add_column(sa.Column("review_note", S(length=2000), nullable=False, server_default=""))
        b.add_column(sa.Column("reserved_cpu", sa.Float(), nullable=False, server_default="0"))
    # a run reviewed before the decision existed had its log released as it is
    op.execute("UPDATE coderun SET release = 'release' WHERE reviewed_at IS NOT NULL")


def downgrade() -> None:
    with op.batch_alter_table("coderun") as b:
        b.drop_column("reserved_cpu")
        b.drop_column("review_note")
        b.drop_column("released_log")
        b.drop_column("release")
