"""competitions' people: roles, invitations, registrations, teams per competition, announcements,
a mail queue and fact sheets; the global organizer flag becomes "site administrator"

Every existing team keeps its members and submissions: a member of a team becomes a member of it
in every competition (a membership with no competition), and is registered (approved) in every
existing competition, whose data stays public, so that nothing an account could do before is
refused after.

Revision ID: d8e0f2a4b6c8
Revises: c5d7e9f1a3b5
"""

from datetime import datetime, timezone

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision = "d8e0f2a4b6c8"
down_revision = "c5d7e9f1a3b5"
branch_labels = None
depends_on = None

S = sqlmodel.sql.sqltypes.AutoString


def _ids(table: str, column: str) -> None:
    op.create_index(op.f(f"ix_{table}_{column}"), table, [column], unique=False)


def upgrade() -> None:
    bind = op.get_bind()
    now = datetime.now(timezone.utc).replace(tzinfo=None)

    with op.batch_alter_table("competition") as b:
        b.add_column(sa.Column("approval", S(length=16), nullable=False, server_default="auto"))
        b.add_column(sa.Column("allowed_domains", sa.JSON(), nullable=False, server_default="[]"))
        b.add_column(sa.Column("data_public", sa.Boolean(), nullable=False, server_default="0"))
        b.add_column(sa.Column("terms_version", sa.Integer(), nullable=False, server_default="0"))
        b.add_column(sa.Column("team_size_cap", sa.Integer(), nullable=True))
        b.add_column(
            sa.Column("join_needs_captain", sa.Boolean(), nullable=False, server_default="0")
        )
        b.add_column(sa.Column("anonymous_board", sa.Boolean(), nullable=False, server_default="0"))
        b.add_column(sa.Column("fact_fields", sa.JSON(), nullable=False, server_default="[]"))
        b.add_column(sa.Column("placeholder", sa.Boolean(), nullable=False, server_default="0"))

    op.create_table(
        "competitionrole",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("role", S(length=16), nullable=False),
        sa.Column("granted_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["competition_id"], ["competition.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.ForeignKeyConstraint(["granted_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("competition_id", "user_id"),
    )
    _ids("competitionrole", "competition_id")
    _ids("competitionrole", "user_id")

    op.create_table(
        "competitioninvite",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("email", S(length=320), nullable=False),
        sa.Column("role", S(length=16), nullable=False),
        sa.Column("invited_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("accepted_at", sa.DateTime(), nullable=True),
        sa.Column("accepted_by", sa.Integer(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["competition_id"], ["competition.id"]),
        sa.ForeignKeyConstraint(["invited_by"], ["user.id"]),
        sa.ForeignKeyConstraint(["accepted_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    _ids("competitioninvite", "competition_id")
    _ids("competitioninvite", "email")

    registration = op.create_table(
        "registration",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("status", S(length=16), nullable=False),
        sa.Column("terms_version", sa.Integer(), nullable=False),
        sa.Column("terms_accepted_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("decided_at", sa.DateTime(), nullable=True),
        sa.Column("decided_by", sa.Integer(), nullable=True),
        sa.Column("reason", S(length=500), nullable=False),
        sa.Column("mail_announcements", sa.Boolean(), nullable=False),
        sa.Column("mail_runs", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["competition_id"], ["competition.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.ForeignKeyConstraint(["decided_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("competition_id", "user_id"),
    )
    _ids("registration", "competition_id")
    _ids("registration", "user_id")
    _ids("registration", "status")

    op.create_table(
        "announcement",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=False),
        sa.Column("title", S(length=200), nullable=False),
        sa.Column("body_markdown", sa.Text(), nullable=False),
        sa.Column("body_html", sa.Text(), nullable=False),
        sa.Column("created_by", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("recipients", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["competition_id"], ["competition.id"]),
        sa.ForeignKeyConstraint(["created_by"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    _ids("announcement", "competition_id")
    _ids("announcement", "created_at")

    op.create_table(
        "outgoingmail",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dedup_key", S(length=200), nullable=False),
        sa.Column("to_addr", S(length=320), nullable=False),
        sa.Column("subject", S(length=300), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("kind", S(length=32), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=True),
        sa.Column("status", S(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", S(length=500), nullable=False),
        sa.Column("next_try_at", sa.DateTime(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("sent_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["competition_id"], ["competition.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(op.f("ix_outgoingmail_dedup_key"), "outgoingmail", ["dedup_key"], unique=True)
    _ids("outgoingmail", "competition_id")
    _ids("outgoingmail", "status")

    member = op.create_table(
        "teammember",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("competition_id", sa.Integer(), nullable=True),
        sa.Column("team_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("role", S(length=16), nullable=False),
        sa.Column("status", S(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["competition_id"], ["competition.id"]),
        sa.ForeignKeyConstraint(["team_id"], ["team.id"]),
        sa.ForeignKeyConstraint(["user_id"], ["user.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("competition_id", "user_id"),
    )
    _ids("teammember", "competition_id")
    _ids("teammember", "team_id")
    _ids("teammember", "user_id")

    with op.batch_alter_table("team") as b:
        b.add_column(sa.Column("competition_id", sa.Integer(), nullable=True))
        b.create_index(op.f("ix_team_competition_id"), ["competition_id"], unique=False)
        b.create_foreign_key("fk_team_competition_id", "competition", ["competition_id"], ["id"])

    with op.batch_alter_table("submission") as b:
        b.add_column(sa.Column("facts", sa.JSON(), nullable=True))

    with op.batch_alter_table("auditlog") as b:
        b.add_column(sa.Column("competition_id", sa.Integer(), nullable=True))
        b.create_index(op.f("ix_auditlog_competition_id"), ["competition_id"], unique=False)
        b.create_foreign_key(
            "fk_auditlog_competition_id", "competition", ["competition_id"], ["id"]
        )

    # every team member keeps their team, for every competition, and is registered in each
    user = sa.table("user", sa.column("id", sa.Integer), sa.column("team_id", sa.Integer))
    competition = sa.table(
        "competition",
        sa.column("id", sa.Integer),
        sa.column("data_public", sa.Boolean),
        sa.column("placeholder", sa.Boolean),
    )
    rows = bind.execute(
        sa.select(user.c.id, user.c.team_id).where(user.c.team_id.is_not(None)).order_by(user.c.id)
    ).all()
    captains: set[int] = set()
    for uid, tid in rows:
        bind.execute(
            member.insert().values(
                competition_id=None,
                team_id=tid,
                user_id=uid,
                role="member" if tid in captains else "captain",
                status="active",
                created_at=now,
            )
        )
        captains.add(tid)
    cids = [r[0] for r in bind.execute(sa.select(competition.c.id)).all()]
    for cid in cids:
        for uid, _tid in rows:
            bind.execute(
                registration.insert().values(
                    competition_id=cid,
                    user_id=uid,
                    status="approved",
                    terms_version=0,
                    terms_accepted_at=None,
                    created_at=now,
                    decided_at=now,
                    reason="registered when competitions got registrations",
                    mail_announcements=True,
                    mail_runs=False,
                )
            )
    # the competitions made for each task by the previous revision hold one task each: a
    # competition created with that task takes it over
    bind.execute(competition.update().values(data_public=True, placeholder=True))

    with op.batch_alter_table("user") as b:
        b.alter_column("is_organizer", new_column_name="is_admin")
        b.drop_index("ix_user_team_id")
        b.drop_column("team_id")


def downgrade() -> None:
    bind = op.get_bind()
    with op.batch_alter_table("user") as b:
        b.alter_column("is_admin", new_column_name="is_organizer")
        b.add_column(sa.Column("team_id", sa.Integer(), nullable=True))
        b.create_index("ix_user_team_id", ["team_id"], unique=False)
    member = sa.table(
        "teammember",
        sa.column("user_id", sa.Integer),
        sa.column("team_id", sa.Integer),
        sa.column("competition_id", sa.Integer),
    )
    user = sa.table("user", sa.column("id", sa.Integer), sa.column("team_id", sa.Integer))
    for uid, tid in bind.execute(
        sa.select(member.c.user_id, member.c.team_id).where(member.c.competition_id.is_(None))
    ).all():
        bind.execute(user.update().where(user.c.id == uid).values(team_id=tid))

    with op.batch_alter_table("auditlog") as b:
        b.drop_constraint("fk_auditlog_competition_id", type_="foreignkey")
        b.drop_index(op.f("ix_auditlog_competition_id"))
        b.drop_column("competition_id")
    with op.batch_alter_table("submission") as b:
        b.drop_column("facts")
    with op.batch_alter_table("team") as b:
        b.drop_constraint("fk_team_competition_id", type_="foreignkey")
        b.drop_index(op.f("ix_team_competition_id"))
        b.drop_column("competition_id")
    for table in ("teammember", "outgoingmail", "announcement", "registration"):
        op.drop_table(table)
    op.drop_table("competitioninvite")
    op.drop_table("competitionrole")
    with op.batch_alter_table("competition") as b:
        for col in (
            "placeholder",
            "fact_fields",
            "anonymous_board",
            "join_needs_captain",
            "team_size_cap",
            "terms_version",
            "data_public",
            "allowed_domains",
            "approval",
        ):
            b.drop_column(col)
