"""What backup, restore and verify share: the archive's format and what it leaves out, the
report, database and file helpers, and the check of gold files against their versions."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import sqlite3
import subprocess
import tarfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.metadata import version
from pathlib import Path, PurePosixPath

from sqlalchemy import inspect, select, text
from sqlalchemy.engine import make_url
from sqlmodel import Session

from server import migrate
from server.models import GoldVersion
from server.settings import SECRET_FILE
from tasks.store import TaskStore, tree_sha256

FORMAT = "palimpsest-backup"
FORMAT_VERSION = 2  # 2: the manifest carries a signature (an HMAC under the backup key)
MANIFEST = "manifest.json"
SIGNATURE = "signature"
CHUNK = 1024 * 1024

# What of the data directory an archive leaves out, and why (the manifest lists them).
LEFT_OUT = {
    SECRET_FILE: "a secret (the key that signs sessions and names gold by keyed id): keep it in "
    "your secrets store and put it back, or set PALIMPSEST_SECRET_KEY, on the restored site",
    "palimpsest.db": "the SQLite database itself: the archive holds its copy from the online "
    "backup API under database/",
    "palimpsest.db-wal": "the SQLite database's write-ahead log (in the copy under database/)",
    "palimpsest.db-shm": "the SQLite database's shared memory (in the copy under database/)",
    "palimpsest.db-journal": "the SQLite database's journal (in the copy under database/)",
    "redis": "the embedded Redis (the queue): the restored site's reconciler enqueues again every "
    "run left unscored",
    "run": "process ids of the running site",
    "stats": "derived caches (units, bootstrap samples, board statistics), recomputed on demand "
    "from the uploads and the gold",
}
# Of what is left out, the caches made again from the uploads and the gold: an archive that holds
# some (one made before a backup of a site on an object store left them out of the store too) is
# restored without them, and says so; every other name left out is refused in an archive.
DERIVED = ("stats",)
SECRET_SETTINGS = (
    "PALIMPSEST_SECRET_KEY",
    "PALIMPSEST_BACKUP_KEY",
    "DATABASE_URL (its password)",
    "REDIS_URL (its password)",
    "PALIMPSEST_SMTP_PASSWORD",
)


class BackupError(RuntimeError):
    """A backup, verification or restore that cannot go on; the message says what and where."""


class TargetNotEmpty(BackupError):
    pass


class BadSignature(BackupError):
    """An archive whose manifest is not signed by the key it is checked under."""


# ----------------------------------------------------------------------------- the signature
#
# The manifest holds the sha256 of every member, so a MAC over the manifest authenticates the
# whole archive: an HMAC-SHA256 under a key the archive never holds (PALIMPSEST_BACKUP_KEY, else
# one derived from the site's secret key). Whoever can write where archives are kept cannot
# change a member, recompute its checksum and have the archive restored.


def backup_key(settings, key: str | None = None) -> str:
    """The key archives are signed and checked with: `key` (an operator's --key-file), else the
    backup key setting, else the site's secret key."""
    k = key or settings.backup_key or settings.secret_key
    if not k:
        raise BackupError(
            "no key to sign or check archives with: set PALIMPSEST_BACKUP_KEY or the site's "
            "secret key (PALIMPSEST_SECRET_KEY), or pass --key-file"
        )
    return k


def _mac_key(key: str) -> bytes:
    # a key of its own, derived: the secret key also signs sessions
    return hmac.new(key.encode(), b"palimpsest-backup-manifest", hashlib.sha256).digest()


def key_id(key: str) -> str:
    """A short name of a key that reveals nothing of it: which key signed an archive."""
    return hmac.new(_mac_key(key), b"key-id", hashlib.sha256).hexdigest()[:16]


def _canonical(m: dict) -> bytes:
    body = {k: v for k, v in m.items() if k not in (SIGNATURE, "archive")}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(m: dict, key: str) -> dict:
    """`m` with its signature: an HMAC-SHA256 of its canonical JSON (all but the signature)."""
    mac = hmac.new(_mac_key(key), _canonical(m), hashlib.sha256).hexdigest()
    return {**m, SIGNATURE: {"alg": "HMAC-SHA256", "key_id": key_id(key), "mac": mac}}


def check_signature(m: dict, key: str, *, trust_unsigned: bool = False) -> str:
    """Refuse a manifest not signed by `key`, saying why; returns what was found ("signed",
    "unsigned")."""
    sig = m.get(SIGNATURE)
    if not isinstance(sig, dict):
        version = m.get("format_version", 1)
        if not isinstance(version, int) or version >= 2:  # made signed: its signature stripped
            raise BadSignature(
                f"the archive is not signed, yet of format {version} (made signed: its signature "
                "was removed): it is refused, --trust-unsigned or not (that reads archives of "
                "format 1, made before signatures)"
            )
        if trust_unsigned:
            return "unsigned"
        raise BadSignature(
            "the archive is not signed (made by a Palimpsest older than signed archives, or its "
            "signature was removed): nothing proves it was not changed; pass --trust-unsigned to "
            "use it anyway"
        )
    if sig.get("alg") != "HMAC-SHA256" or not isinstance(sig.get("mac"), str):
        raise BadSignature(f"the archive's signature is of an unknown kind ({sig.get('alg')!r})")
    want = hmac.new(_mac_key(key), _canonical(m), hashlib.sha256).hexdigest()
    if hmac.compare_digest(want, sig["mac"]):
        return "signed"
    if sig.get("key_id") != key_id(key):
        raise BadSignature(
            f"the archive is signed with another key (key id {sig.get('key_id')}; this site's is "
            f"{key_id(key)}): an archive of another site, or made before the key changed; pass "
            "the key it was made with (--key-file, holding that site's PALIMPSEST_BACKUP_KEY or "
            "secret key)"
        )
    raise BadSignature(
        "the archive's manifest does not match its signature: the manifest (and with it the "
        "checksums of the database or the files) was changed after the backup; nothing restored"
    )


@dataclass
class Report:
    """What a verify or a restore found: `problems` empty means every check passed."""

    archive: str
    checks: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    timings: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {
            "archive": self.archive,
            "ok": self.ok,
            "checks": self.checks,
            "problems": self.problems,
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
        }


# ----------------------------------------------------------------------------- member names


def member_path(name: str) -> tuple[str | None, str | None]:
    """What a restore does with the archive member `name` (`files/...`): (its path relative to the
    data directory, None) when it is restored; (None, why) when it is skipped (a derived cache) or
    refused. `refused(why)` tells the two apart. Backup, verify and restore judge every member by
    this one function, so that `backup` never writes an archive its restore refuses."""
    rel = name[len("files/") :] if name.startswith("files/") else name
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or ".." in p.parts:
        return None, f"{name}: a path outside the data directory"
    if "" in rel.split("/") or "\\" in rel or "." in rel.split("/"):
        return None, f"{name}: not a path an archive writes (empty, '.' or backslashed parts)"
    top = p.parts[0]
    if top in DERIVED:
        return None, SKIPPED + f"{name}: {LEFT_OUT[top]}"
    if top == SECRET_FILE:
        return None, f"{name}: the site's secret key, which an archive never holds"
    if top in LEFT_OUT:
        return None, (
            f"{name}: {top} is left out of every archive ({LEFT_OUT[top]}), so an archive never "
            "holds it"
        )
    if any(x.startswith(".") for x in p.parts):
        return None, (
            f"{name}: a staging or temporary name (a part starting with a dot), which an archive "
            "never holds"
        )
    return p.as_posix(), None


SKIPPED = "skipped, "


def refused(why: str | None) -> bool:
    """Whether `member_path`'s answer refuses the archive (rather than skips the member)."""
    return why is not None and not why.startswith(SKIPPED)


# ----------------------------------------------------------------------------- helpers


def now_text() -> str:
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def code_version() -> str:
    try:
        return version("palimpsest")
    except Exception:  # noqa: BLE001 - a checkout without the package installed
        return "0+unknown"


def sqlite_path(url: str) -> Path | None:
    u = make_url(url)
    if not u.drivername.startswith("sqlite"):
        return None
    return Path(u.database or "")


def pg_args(url: str) -> tuple[list[str], dict]:
    """libpq options for pg_dump / pg_restore / psql, and the environment carrying the password
    (never on a command line others can read)."""
    u = make_url(url)
    args = []
    if u.host:
        args += ["-h", u.host]
    if u.port:
        args += ["-p", str(u.port)]
    if u.username:
        args += ["-U", u.username]
    env = dict(os.environ)
    if u.password is not None:
        env["PGPASSWORD"] = str(u.password)
    return args, env


def tool_path(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        raise BackupError(f"{name} is not installed (PostgreSQL's client programs are needed)")
    return exe


def run_tool(cmd: list[str], env: dict, what: str) -> None:
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        err = (r.stderr or r.stdout).strip().splitlines()
        raise BackupError(f"{what} failed (exit {r.returncode}): {' / '.join(err[-3:])}")


def sqlite_counts(path: Path) -> tuple[dict[str, int], tuple[str, ...]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
                "ORDER BY name"
            )
        ]
        counts = {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
        revs = ()
        if "alembic_version" in names:
            revs = tuple(
                sorted(r[0] for r in con.execute("SELECT version_num FROM alembic_version"))
            )
        return counts, revs
    finally:
        con.close()


def engine_counts(conn) -> tuple[dict[str, int], tuple[str, ...]]:
    names = sorted(inspect(conn).get_table_names())
    counts = {n: conn.execute(text(f'SELECT count(*) FROM "{n}"')).scalar_one() for n in names}
    revs = ()
    if "alembic_version" in names:
        revs = tuple(
            sorted(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())
        )
    return counts, revs


class _Hashing:
    """A read-only stream that hashes what is read through it."""

    def __init__(self, f):
        self.f = f
        self.h = hashlib.sha256()
        self.n = 0

    def read(self, size=-1):
        b = self.f.read(size)
        self.h.update(b)
        self.n += len(b)
        return b


def add_file(tar: tarfile.TarFile, src: Path, arcname: str) -> dict:
    with open(src, "rb") as f:
        st = os.fstat(f.fileno())
        info = tarfile.TarInfo(arcname)
        info.size = st.st_size
        info.mtime = int(st.st_mtime)
        info.mode = 0o644
        hf = _Hashing(f)
        tar.addfile(info, hf)
    return {"sha256": hf.h.hexdigest(), "size": st.st_size}


def add_stream(tar: tarfile.TarFile, stream, size: int, arcname: str) -> dict:
    info = tarfile.TarInfo(arcname)
    info.size = size
    info.mtime = int(time.time())
    info.mode = 0o644
    hf = _Hashing(stream)
    tar.addfile(info, hf)
    return {"sha256": hf.h.hexdigest(), "size": size}


def data_files(home: Path, skip: set[Path]) -> list[tuple[Path, str]]:
    """(path, path relative to home) of every file an archive holds: all but LEFT_OUT, hidden
    names (staging directories and temporary files) and uploads/tmp; symlinked directories are
    followed (their files are the site's)."""
    out = []
    for root, dirs, files in os.walk(home, followlinks=True):
        rel_root = Path(root).relative_to(home)
        keep = []
        for d in sorted(dirs):
            rel = rel_root / d
            if d.startswith(".") or (rel_root == Path(".") and d in LEFT_OUT):
                continue
            if rel.as_posix() == "uploads/tmp" or (Path(root) / d).resolve() in skip:
                continue
            keep.append(d)
        dirs[:] = keep
        for name in sorted(files):
            rel = rel_root / name
            p = Path(root) / name
            if name.startswith(".") or (rel_root == Path(".") and name in LEFT_OUT):
                continue
            if p.resolve() in skip or ".partial-" in name:
                continue
            out.append((p, rel.as_posix()))
    return out


# ----------------------------------------------------------------------------- the gold check


def gold_problems(engine, home: Path) -> list[str]:
    """Where the gold files disagree with the gold versions in the database: the newest version
    of each split must be the gold in place (the task's manifest checksum) and every older one
    must be kept under gold-history with its checksum."""
    out = []
    with Session(engine) as s:
        rows = s.execute(
            select(GoldVersion).order_by(
                GoldVersion.task_id, GoldVersion.split, GoldVersion.version
            )
        ).scalars()
        newest: dict[tuple[str, str], object] = {}
        for v in rows:
            newest[(v.task_id, v.split)] = v
            store = TaskStore(v.task_id, home)
            kept = store.root / "gold-history" / v.split / f"v{v.version}"
            if kept.is_dir() and tree_sha256(kept) != v.sha256:
                out.append(
                    f"gold version {v.version} of {v.task_id}/{v.split}: the files kept under "
                    f"{kept.relative_to(home)} do not have its checksum"
                )
        for (task_id, split), v in newest.items():
            store = TaskStore(task_id, home)
            if not store.exists():
                out.append(f"gold of {task_id}/{split}: the task's files are missing")
                continue
            if store.gold_checksum(split) != v.sha256:
                out.append(
                    f"gold of {task_id}/{split}: the files are not gold version {v.version} "
                    "(the database's newest)"
                )
            elif tree_sha256(store.root / "gold" / split) != v.sha256:
                out.append(
                    f"gold of {task_id}/{split}: the files' bytes do not match gold version "
                    f"{v.version}"
                )
            for older in range(1, v.version):
                kept = store.root / "gold-history" / split / f"v{older}"
                if not kept.is_dir():
                    out.append(
                        f"gold version {older} of {task_id}/{split}: "
                        f"{kept.relative_to(home)} is missing"
                    )
    return out


def read_manifest(archive: Path) -> dict:
    archive = Path(archive)
    if not archive.is_file():
        raise BackupError(f"{archive}: no such archive")
    try:
        with tarfile.open(archive, "r:") as tar:
            try:
                f = tar.extractfile(MANIFEST)
            except KeyError:
                raise BackupError(f"{archive}: no {MANIFEST} (not a complete archive)") from None
            m = json.loads(f.read())
    except (tarfile.TarError, OSError, ValueError) as e:
        raise BackupError(f"{archive}: not a readable archive ({e})") from None
    if m.get("format") != FORMAT:
        raise BackupError(f"{archive}: not a Palimpsest backup")
    if int(m.get("format_version", 0)) > FORMAT_VERSION:
        raise BackupError(
            f"{archive}: archive format {m['format_version']} is newer than this version of "
            f"Palimpsest reads ({FORMAT_VERSION}); restore it with a newer Palimpsest"
        )
    return m


def check_revision(m: dict) -> None:
    unknown = [r for r in m.get("alembic_revision", []) if migrate.known(r) is None]
    if unknown:
        raise BackupError(
            f"the archive's database is at revision {', '.join(unknown)}, which this version of "
            f"Palimpsest does not know (its newest is {', '.join(migrate.heads())}): the archive "
            "is newer than the code; restore it with the version that made it"
        )
