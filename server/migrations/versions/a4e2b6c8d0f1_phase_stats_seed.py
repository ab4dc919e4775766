"""phase.stats_seed: the recorded seed of a board's bootstrap resamples (phases without a partition)

Revision ID: a4e2b6c8d0f1
Revises: 7c3d9e1f2a4b
"""

from alembic import op
import sqlalchemy as sa


revision = 'a4e2b6c8d0f1'
down_revision = '7c3d9e1f2a4b'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('phase') as batch:
        batch.add_column(sa.Column('stats_seed', sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('phase') as batch:
        batch.drop_column('stats_seed')
