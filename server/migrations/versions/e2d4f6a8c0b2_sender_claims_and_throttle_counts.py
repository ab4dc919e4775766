"""the mail queue's rows name the sender that claimed them; the sign-in throttle's counters in the
database while Redis is away

Revision ID: e2d4f6a8c0b2
Revises: c9d1e3f5a7b9
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "e2d4f6a8c0b2"
down_revision = "c9d1e3f5a7b9"
branch_labels = None
depends_on = None

S = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("outgoingmail") as b:
        b.add_column(sa.Column("claimed_by", S(length=200), nullable=False, server_default=""))
    op.create_table(
        "throttlecount",
        sa.Column("key", S(length=255), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    op.create_index(
        op.f("ix_throttlecount_expires_at"), "throttlecount", ["expires_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_throttlecount_expires_at"), table_name="throttlecount")
    op.drop_table("throttlecount")
    with op.batch_alter_table("outgoingmail") as b:
        b.drop_column("claimed_by")
