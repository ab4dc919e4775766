"""a team deletes its own run (soft, an organizer may restore it): Submission.removed_by_team

Revision ID: e2a4c6e8f0b2
Revises: e2d4f6a8c0b2
"""

import sqlalchemy as sa
from alembic import op

revision = "e2a4c6e8f0b2"
down_revision = "e2d4f6a8c0b2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submission") as batch:
        batch.add_column(
            sa.Column("removed_by_team", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("submission") as batch:
        batch.drop_column("removed_by_team")
