"""a phase's release rule for its live public scores (scorer.release: exact, ladder or
rounded); null: exact

Revision ID: a61b3d5f7c9e
Revises: c7e1a3b5d9f2
"""

import sqlalchemy as sa
from alembic import op

revision = "a61b3d5f7c9e"
down_revision = "c7e1a3b5d9f2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("phase") as b:
        b.add_column(sa.Column("release_rule", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("phase") as b:
        b.drop_column("release_rule")
