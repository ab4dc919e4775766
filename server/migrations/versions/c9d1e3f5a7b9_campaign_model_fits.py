"""assessment campaigns: the Bayesian agreement model's fits, requested by an organizer and run
by a worker

Revision ID: c9d1e3f5a7b9
Revises: a8c0e2f4b6d8
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "c9d1e3f5a7b9"
down_revision = "a8c0e2f4b6d8"
branch_labels = None
depends_on = None

S = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    op.create_table(
        "campaignmodelfit",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("state", S(length=16), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("judgments", sa.Integer(), nullable=True),
        sa.Column("digest", S(length=64), nullable=True),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("requested_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["campaign_id"], ["assessmentcampaign.id"]),
        sa.ForeignKeyConstraint(["requested_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        op.f("ix_campaignmodelfit_campaign_id"), "campaignmodelfit", ["campaign_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_campaignmodelfit_campaign_id"), table_name="campaignmodelfit")
    op.drop_table("campaignmodelfit")
