"""an index on a submission's phase, status and id: a scoring job claims its phase's first queued
run (server.domain.lifecycle.claim_queued) from the index, not from every run of the phase

Revision ID: c7e1a3b5d9f2
Revises: c8e2a4b6d0f1
"""

from alembic import op

revision = "c7e1a3b5d9f2"
down_revision = "c8e2a4b6d0f1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_submission_queue", "submission", ["phase_id", "status", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_submission_queue", table_name="submission")
