"""archived systems re-run on a phase: CodeRun.rerun_of and Submission.rerun_of, the code run first
uploaded whose archive an organizer's re-run runs (server.actions.reruns)

Revision ID: a63e7c1d5f9b
Revises: a58b1d3f5e7c
"""

import sqlalchemy as sa
from alembic import op

revision = "a63e7c1d5f9b"
down_revision = "a58b1d3f5e7c"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("coderun") as b:
        b.add_column(sa.Column("rerun_of", sa.Integer(), nullable=True))
        b.create_foreign_key("fk_coderun_rerun_of", "coderun", ["rerun_of"], ["id"])
        b.create_index("ix_coderun_rerun_of", ["rerun_of"], unique=False)
    # an id, not a foreign key: coderun already refers to submission (one order for a restore)
    with op.batch_alter_table("submission") as b:
        b.add_column(sa.Column("rerun_of", sa.Integer(), nullable=True))
        b.create_index("ix_submission_rerun_of", ["rerun_of"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("submission") as b:
        b.drop_index("ix_submission_rerun_of")
        b.drop_column("rerun_of")
    with op.batch_alter_table("coderun") as b:
        b.drop_index("ix_coderun_rerun_of")
        b.drop_constraint("fk_coderun_rerun_of", type_="foreignkey")
        b.drop_column("rerun_of")
