"""the file of an invalid submission is deleted after a retention period: Submission.file_purged_at

Revision ID: 9a1b2c3d4e5f
Revises: 7c3d9e1f2a4b
"""

import sqlalchemy as sa
from alembic import op

revision = "9a1b2c3d4e5f"
down_revision = "7c3d9e1f2a4b"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("submission") as batch:
        batch.add_column(sa.Column("file_purged_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("submission") as batch:
        batch.drop_column("file_purged_at")
