"""Backup, the object store and restore: `backup OUT`, `backup verify OUT`, `store push`,
`restore`."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import click

from server.cli.common import Refused, home_option, local_settings, report


def key_options(f):
    """--key-file and --trust-unsigned: the key an archive is checked with."""
    f = click.option(
        "--trust-unsigned",
        is_flag=True,
        help="Accept an archive without a signature (made before archives were signed).",
    )(f)
    return click.option(
        "--key-file",
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        default=None,
        help="A file holding the key the archive was signed with (the PALIMPSEST_BACKUP_KEY, or "
        "else the secret key, of the site that made it); default: this site's.",
    )(f)


def _read_key(path: Path | None) -> str | None:
    if path is None:
        return None
    key = path.read_text().strip()
    if not key:
        raise Refused(f"{path} is empty: it should hold the key the archive was signed with")
    return key


def register(main: click.Group) -> None:
    """Add these commands to the `palimpsest` group."""

    @main.command("backup", context_settings={"ignore_unknown_options": False})
    @click.argument("args", nargs=-1, required=True, metavar="[verify] OUT")
    @click.option(
        "--database-url",
        default=None,
        help="verify: the PostgreSQL server to restore a PostgreSQL archive into (a scratch "
        "database, dropped after; default: DATABASE_URL).",
    )
    @key_options
    @click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
    @home_option
    def backup_(args, database_url, key_file, trust_unsigned, as_json):
        """Back up the site into one archive (`backup OUT`), or check one (`backup verify OUT`).

        The database first, then every file of the data directory, into the archive OUT (a
        directory: a dated archive inside it), while the site serves; `backup verify OUT`
        restores an archive into a scratch database and directory and checks every checksum,
        count and published ranking, exiting 1 on any mismatch."""
        from server import backup as bk  # the archive's machinery loads when the command runs

        if len(args) == 2 and args[0] == "verify":
            try:
                rep = bk.verify(
                    local_settings(),
                    Path(args[1]),
                    database_url=database_url,
                    key=_read_key(key_file),
                    trust_unsigned=trust_unsigned,
                )
            except bk.BackupError as e:
                raise Refused(str(e)) from None
            report(rep, "verified", as_json)
            return
        if len(args) != 1:
            raise Refused("usage: palimpsest backup OUT, or palimpsest backup verify OUT")
        t = datetime.now(timezone.utc)
        try:
            m = bk.backup(local_settings(), Path(args[0]))
        except bk.BackupError as e:
            raise Refused(str(e)) from None
        size = Path(m["archive"]).stat().st_size
        seconds = round((datetime.now(timezone.utc) - t).total_seconds(), 3)
        if as_json:
            summary = {k: m[k] for k in ("archive", "alembic_revision", "created_at", "row_counts")}
            summary.update(
                size=size,
                seconds=seconds,
                files=sum(1 for k in m["members"] if k.startswith("files/")),
                database=m["database"],
                left_out=m["left_out"],
                published_rankings=len(m["published_rankings"]),
            )
            click.echo(json.dumps(summary, indent=2))
            return
        click.echo(
            f"{m['archive']}: {size} bytes, {sum(m['row_counts'].values())} rows in "
            f"{len(m['row_counts'])} tables, "
            f"{sum(1 for k in m['members'] if k.startswith('files/'))} files, "
            f"{len(m['published_rankings'])} published ranking(s), in {seconds} s"
        )
        click.echo("left out: " + ", ".join([*m["left_out"]["files"], *m["left_out"]["settings"]]))

    @main.group("store")
    def store_group():
        """The object store (PALIMPSEST_S3_*): push the data directory's files into it."""

    @store_group.command("push")
    @click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
    @home_option
    def store_push(as_json):
        """Put every file of uploads/, tasks/, baselines/ and rankings/ that the store lacks (or
        holds different) into it: after importing tasks into a site on a store."""
        # boto3 and the store load when the command runs
        from server import objectstore
        from server.exceptions import StoreUnreachable

        settings = local_settings()
        if objectstore.store_for(settings) is None:
            raise Refused("no object store configured (set PALIMPSEST_S3_BUCKET and its settings)")
        try:
            put = {a: objectstore.push_tree(settings, a) for a in objectstore.STORED_AREAS}
        except StoreUnreachable as e:
            raise Refused(e.message) from None
        if as_json:
            click.echo(json.dumps({"put": put}))
        else:
            click.echo(", ".join(f"{a}: {n} file(s) put" for a, n in put.items()))

    @main.command("restore")
    @click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
    @click.option(
        "--force",
        is_flag=True,
        help="Restore over a non-empty site (its files are moved aside under the data "
        "directory's .before-restore-<time>/, its database replaced).",
    )
    @key_options
    @click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
    @home_option
    def restore_(archive, force, key_file, trust_unsigned, as_json):
        """Restore the site from an archive of `palimpsest backup` (into an empty site).

        ARCHIVE goes into this site's database (DATABASE_URL, or SQLite in the data directory)
        and data directory, then the database is migrated forward. Refuses a
        non-empty target without --force and an archive newer than this version; exits 1 on any
        mismatch. The archive is only read."""
        from server import backup as bk  # the archive's machinery loads when the command runs

        try:
            rep = bk.restore(
                local_settings(),
                archive,
                force=force,
                key=_read_key(key_file),
                trust_unsigned=trust_unsigned,
            )
        except bk.BackupError as e:
            raise Refused(str(e)) from None
        report(rep, "restored", as_json)
