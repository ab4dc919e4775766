"""a code run's `shown_at`: when a blind run's result (its team's view, its board row) becomes
visible, fixed when the run is submitted (server.domain.code_runs.shown_from), indexed by phase
for the boards' version

Revision ID: a58b1d3f5e7c
Revises: c7e1a3b5d9f2
"""

import sqlalchemy as sa
from alembic import op

revision = "a58b1d3f5e7c"
down_revision = "c7e1a3b5d9f2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("coderun") as b:
        b.add_column(sa.Column("shown_at", sa.DateTime(), nullable=True))
    op.create_index("ix_coderun_shown", "coderun", ["phase_id", "shown_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_coderun_shown", table_name="coderun")
    with op.batch_alter_table("coderun") as b:
        b.drop_column("shown_at")
