"""assessment campaigns: the pool of a phase's ranked runs, its assignment to assessors and their
judgments

Revision ID: f3a5c7e9b1d2
Revises: d8e0f2a4b6c8
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "f3a5c7e9b1d2"
down_revision = "d8e0f2a4b6c8"
branch_labels = None
depends_on = None

S = sqlmodel.sql.sqltypes.AutoString


def _ids(table: str, column: str) -> None:
    op.create_index(op.f(f"ix_{table}_{column}"), table, [column], unique=False)


def upgrade() -> None:
    op.create_table(
        "assessmentcampaign",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("task_id", S(length=64), nullable=False),
        sa.Column("phase_id", sa.Integer(), nullable=False),
        sa.Column("state", S(length=16), nullable=False),
        sa.Column("depth", sa.Integer(), nullable=False),
        sa.Column("assessors_per_item", sa.Integer(), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("guideline", sa.Text(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("runs", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["competition_id"], ["competition.id"]),
        sa.ForeignKeyConstraint(["phase_id"], ["phase.id"]),
        sa.ForeignKeyConstraint(["created_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    _ids("assessmentcampaign", "competition_id")
    _ids("assessmentcampaign", "task_id")
    _ids("assessmentcampaign", "phase_id")

    op.create_table(
        "campaignitem",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("key", S(length=500), nullable=False),
        sa.Column("factors", sa.JSON(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["campaign_id"], ["assessmentcampaign.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("campaign_id", "key"),
    )
    _ids("campaignitem", "campaign_id")

    op.create_table(
        "campaignassignment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["campaign_id"], ["assessmentcampaign.id"]),
        sa.ForeignKeyConstraint(["item_id"], ["campaignitem.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id", "user_id"),
    )
    _ids("campaignassignment", "campaign_id")
    _ids("campaignassignment", "item_id")
    _ids("campaignassignment", "user_id")

    op.create_table(
        "judgment",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("assignment_id", sa.Integer(), nullable=False),
        sa.Column("label", S(length=64), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["assignment_id"], ["campaignassignment.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("assignment_id"),
    )


def downgrade() -> None:
    for table in ("judgment", "campaignassignment", "campaignitem", "assessmentcampaign"):
        op.drop_table(table)
