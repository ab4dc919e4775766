"""what a phase's published ranking is computed on: Phase.published_on, "private" (the private
part, as before) or "whole" (the whole split, scored as a part of its own)

Revision ID: c8e2a4b6d0f1
Revises: b5a0c2e4f6a8
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "c8e2a4b6d0f1"
down_revision = "b5a0c2e4f6a8"
branch_labels = None
depends_on = None

S = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("phase") as b:
        b.add_column(
            sa.Column("published_on", S(length=16), nullable=False, server_default="private")
        )


def downgrade() -> None:
    with op.batch_alter_table("phase") as b:
        b.drop_column("published_on")
