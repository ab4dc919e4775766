"""a rescore opens a new round of scoring attempts: Submission.attempt_ceiling

Revision ID: 5b1f0c2a9d3e
Revises: e168383d1033
"""

import sqlalchemy as sa
from alembic import op

revision = "5b1f0c2a9d3e"
down_revision = "e168383d1033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submission") as batch:
        batch.add_column(sa.Column("attempt_ceiling", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submission") as batch:
        batch.drop_column("attempt_ceiling")
