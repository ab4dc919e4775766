"""sessions end with logout, a password change or "sign out everywhere": User.session_epoch

Revision ID: b7e8f9a0c1d2
Revises: 9a1b2c3d4e5f
"""

import sqlalchemy as sa
from alembic import op

revision = "b7e8f9a0c1d2"
down_revision = "9a1b2c3d4e5f"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("user") as batch:
        batch.add_column(
            sa.Column("session_epoch", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("user") as batch:
        batch.drop_column("session_epoch")
