"""phases: the time their split's inputs are released for download (default: when they open);
competition roles: the organizers' opt-out of the pending registrations digest

Revision ID: b3e5a7c9d1f2
Revises: a1b3c5d7e9f0
"""

import sqlalchemy as sa
from alembic import op

revision = "b3e5a7c9d1f2"
down_revision = "a1b3c5d7e9f0"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("phase") as batch:
        batch.add_column(sa.Column("inputs_at", sa.DateTime(), nullable=True))
    with op.batch_alter_table("competitionrole") as batch:
        batch.add_column(
            sa.Column("mail_pending", sa.Boolean(), nullable=False, server_default=sa.true())
        )


def downgrade() -> None:
    with op.batch_alter_table("competitionrole") as batch:
        batch.drop_column("mail_pending")
    with op.batch_alter_table("phase") as batch:
        batch.drop_column("inputs_at")
