"""phase.stats_seed: the recorded seed of a board's bootstrap resamples (phases without a partition)

Revision ID: a4e2b6c8d0f1
Revises: b7e8f9a0c1d2
"""

import sqlalchemy as sa
from alembic import op

revision = "a4e2b6c8d0f1"
down_revision = "b7e8f9a0c1d2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("phase") as batch:
        batch.add_column(sa.Column("stats_seed", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("phase") as batch:
        batch.drop_column("stats_seed")
