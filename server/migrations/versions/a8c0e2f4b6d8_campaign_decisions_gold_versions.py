"""assessment campaigns, second slice: the decisions on items, the labels that count as a link,
and the versions of a split's gold

Revision ID: a8c0e2f4b6d8
Revises: f3a5c7e9b1d2
"""

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "a8c0e2f4b6d8"
down_revision = "f3a5c7e9b1d2"
branch_labels = None
depends_on = None

S = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    with op.batch_alter_table("assessmentcampaign") as b:
        b.add_column(sa.Column("positive", sa.JSON(), nullable=True))

    op.create_table(
        "campaigndecision",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("item_id", sa.Integer(), nullable=False),
        sa.Column("label", S(length=64), nullable=False),
        sa.Column("rule", S(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("decided_by", sa.Integer(), nullable=True),
        sa.Column("decided_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["campaign_id"], ["assessmentcampaign.id"]),
        sa.ForeignKeyConstraint(["item_id"], ["campaignitem.id"]),
        sa.ForeignKeyConstraint(["decided_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("item_id"),
    )
    op.create_index(
        op.f("ix_campaigndecision_campaign_id"), "campaigndecision", ["campaign_id"], unique=False
    )

    op.create_table(
        "goldversion",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("task_id", S(length=64), nullable=False),
        sa.Column("split", S(length=32), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("sha256", S(length=64), nullable=False),
        sa.Column("parent_sha256", S(length=64), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=True),
        sa.Column("added", sa.Integer(), nullable=False),
        sa.Column("judged_negative", sa.Integer(), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["campaign_id"], ["assessmentcampaign.id"]),
        sa.ForeignKeyConstraint(["created_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("task_id", "split", "version"),
    )
    op.create_index(op.f("ix_goldversion_task_id"), "goldversion", ["task_id"], unique=False)


def downgrade() -> None:
    op.drop_table("goldversion")
    op.drop_table("campaigndecision")
    with op.batch_alter_table("assessmentcampaign") as b:
        b.drop_column("positive")
