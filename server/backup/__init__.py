"""Backup and restore of a whole site: one archive (`palimpsest backup OUT`), checked by restoring
it into a scratch database and directory (`palimpsest backup verify OUT`), and restored in one
command (`palimpsest restore OUT`).

The archive is an uncompressed tar (uploads are often compressed already, and a tar can be read
member by member without unpacking it):

    database/palimpsest.sqlite3   SQLite, copied through the online backup API, or
    database/palimpsest.pgdump    PostgreSQL, `pg_dump -Fc` of the snapshot the counts were taken in
    files/<path>                  every file of the data directory but the ones left out
    manifest.json                 last: version, Alembic revision, time, row counts per table,
                                  sha256 and size of every member, what was left out and why

Consistency while the site serves: the database is copied first, in one snapshot; the files
after it. Every file a row of that snapshot names was written before the row was committed
(an upload is stored before its submission; a task's files are swapped in whole before it is
used; a gold version's files are written before its row commits), and none of them is rewritten
in place afterwards (uploads are content-addressed, a task's import replaces its directory by a
rename, the previous gold is kept under gold-history before a new version is written). Files
written after the snapshot are in the archive too but no row names them. The one exception, a
campaign closing while the files are copied, is caught: the gold in the files is checked against
the gold versions of the copied database, and the backup is taken again when they disagree.

Nothing here deletes an archive: a backup writes `OUT.partial-<pid>` and renames it when complete;
verify and restore only read it.
"""

from __future__ import annotations

# the commands' entry points, one name each (`from server import backup as bk`; `bk.backup`)
from server.backup.archive import backup, default_name
from server.backup.common import BackupError, Report, TargetNotEmpty, gold_problems, read_manifest
from server.backup.restore import restore
from server.backup.verify import check_rankings, verify

__all__ = [
    "BackupError",
    "Report",
    "TargetNotEmpty",
    "backup",
    "check_rankings",
    "default_name",
    "gold_problems",
    "read_manifest",
    "restore",
    "verify",
]
