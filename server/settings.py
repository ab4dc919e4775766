"""Every setting of an installation, declared once: its type, default and meaning.

Each field is read from `PALIMPSEST_<NAME>` (the database and Redis from `DATABASE_URL` and
`REDIS_URL`); `palimpsest settings --markdown` prints the table of docs/settings.md from this
declaration. The secret key comes from `PALIMPSEST_SECRET_KEY`, else from the file `secret_key` in
the data directory, which `palimpsest serve` writes on first start (outside production, whichever
process first needs a key); production never makes one up.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args, get_origin

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from tasks.store import default_home

if TYPE_CHECKING:  # the scorer (numpy) loads when a file is read, not with the settings
    from scorer.reader import Limits

GiB = 1024**3
SECRET_FILE = "secret_key"


class SettingsError(RuntimeError):
    """A setting is missing or wrong; the message names it and says what to do."""


ENV_PREFIX = "PALIMPSEST_"


def _environment(fields: dict) -> dict:
    """The values the environment sets, by field name: each field from `PALIMPSEST_<NAME>`, or
    from the names its alias lists (`DATABASE_URL`); case does not matter. (pydantic-settings'
    environment source, read the same way, without loading its other sources: 0.015 s of every
    local command.)"""
    env = {k.lower(): v for k, v in os.environ.items()}
    values = {}
    for name, f in fields.items():
        alias = f.validation_alias
        names = alias.choices if isinstance(alias, AliasChoices) else [f"{ENV_PREFIX}{name}"]
        for var in names:
            if isinstance(var, str) and var.lower() in env:
                values[name] = env[var.lower()]
                break
    return values


class Settings(BaseModel):
    """The settings of one installation, from the environment (and keyword overrides, which
    win)."""

    model_config = ConfigDict(extra="ignore", validate_default=True, populate_by_name=True)

    def __init__(self, **overrides):
        super().__init__(**{**_environment(type(self).model_fields), **overrides})

    home: Path = Field(
        default_factory=default_home,
        description="Data directory: imported tasks, uploads, the embedded database and Redis "
        "(default `$XDG_DATA_HOME/palimpsest`, i.e. `~/.local/share/palimpsest`).",
    )
    database_url: str | None = Field(
        None,
        validation_alias=AliasChoices("DATABASE_URL", "database_url"),
        description="SQLAlchemy URL of the database, e.g. `postgresql+psycopg://user:pw@db/palimpsest`"
        " (read from `DATABASE_URL`); unset: SQLite in the data directory.",
    )
    redis_url: str | None = Field(
        None,
        validation_alias=AliasChoices("REDIS_URL", "redis_url"),
        description="Redis of the queues and rate limits, e.g. `redis://redis:6379/0` (read from "
        "`REDIS_URL`); unset: an embedded Redis on a unix socket in the data directory.",
    )
    secret_key: str | None = Field(
        None,
        repr=False,
        description="Signs sessions, mail links and keyed gold ids; unset: the data directory's "
        "`secret_key` file, written with mode 600 on first start; required in production.",
    )
    backup_key: str | None = Field(
        None,
        repr=False,
        description="Signs backup archives (an HMAC over the manifest) and is needed to verify "
        "or restore them; unset: a key derived from the secret key. Keep it apart from the "
        "archives.",
    )
    env: Literal["development", "testing", "production"] = Field(
        "development",
        description="What the installation is: `production` requires a secret key and sends "
        "session cookies over HTTPS only.",
    )
    max_upload_bytes: int = Field(
        GiB,
        description="Largest submission file, on disk: the upload limit of the web app and the "
        "API and the limit the worker reads it under (1 GiB admits a Loci Similes top-100 run).",
    )
    max_uncompressed_bytes: int = Field(
        GiB, description="Largest submission once decompressed (`.gz` or `.zip`)."
    )
    job_timeout: int = Field(600, description="Seconds a scoring job may run.")
    score_batch: int = Field(
        8,
        ge=1,
        description="The most runs one scoring job scores: when more runs of its phase wait, the "
        "job claims them in the database and scores them one after the other, each in its own "
        "transactions with its own outcome (1: one run per job).",
    )
    baseline_timeout: int = Field(
        3600, description="Seconds a queued baseline run may take, model loading included."
    )
    run_wall_seconds: float = Field(
        1800, description="The most wall-clock seconds a participant's system may run (blind runs)."
    )
    run_release_seconds: float = Field(
        60,
        description="A blind run's result is shown to its team this many seconds after its wall "
        "limit, counted from its submission (never sooner, so that when it appears says nothing "
        "of how long it ran).",
    )
    run_cpu_seconds: int = Field(
        3600, description="The most CPU seconds a participant's system may use in one run."
    )
    run_memory_mb: int = Field(
        8192, description="The most memory (address space, MB) of each process of a system's run."
    )
    run_processes: int = Field(64, description="Processes and threads a system's run may have.")
    run_output_mb: int = Field(256, description="The most a system's run may write, in MB.")
    sandbox: Literal["bwrap", "runc", "crun"] = Field(
        "bwrap",
        description="What runs a blind system: `bwrap` (bubblewrap, with the worker's own cgroup "
        "per run where the host offers one), or the OCI runtime `runc` or `crun` in the same "
        "sandbox, whose cgroup driver makes each run's cgroup on cgroup v1 or v2 (root only; "
        "for a host on cgroup v2 alone whose worker cannot be delegated the controllers).",
    )
    run_pools: str = Field(
        "cpu,gpu",
        description="The pools of code runs this site's own code workers serve (comma-separated): "
        "`cpu`, `gpu` and any organizer's own pool named here; the runs of each pool are taken "
        "round-robin across competitions.",
    )
    run_images: bool = Field(
        False,
        description="Accept systems in container images (`runtime: image`, by digest); code "
        "workers then need podman or docker.",
    )
    run_models: str = Field(
        "",
        description="Folders of models the site provides to systems, read-only "
        "(separated by `:`); the runtime's own packages are always there.",
    )
    reconcile_every: float = Field(5.0, description="Seconds between reconciler passes.")
    closing_reminder_hours: float = Field(
        48.0,
        ge=0,
        description="Hours before a phase closes when its competition's participants are mailed "
        "a reminder (0: none).",
    )
    max_attempts: int = Field(
        3, description="Scoring attempts before a submission fails for the server's reasons."
    )
    stale_after: float = Field(
        15.0, description="Seconds without a job heartbeat before its worker counts as dead."
    )
    heartbeat_every: int = Field(3, description="Seconds between a busy worker's heartbeats.")
    file_cpu_seconds: int = Field(
        120, description="CPU seconds one file may cost to validate and score."
    )
    file_memory_bytes: int = Field(
        3 * GiB, description="Address space one file may add to the worker that scores it."
    )
    invalid_daily_limit: int | None = Field(
        50, description="Invalid files per team, phase and UTC day (`none`: no limit)."
    )
    invalid_retention_days: float = Field(
        7.0, description="Days before the file of an invalid submission is deleted."
    )
    session_hours: float = Field(
        12.0, description="Hours without a request after which a signed-in session ends."
    )
    login_limit_account: str = Field(
        "5 per minute; 20 per hour", description="Sign-in attempts on one email."
    )
    login_limit_address: str = Field(
        "10 per minute; 100 per hour", description="Sign-in attempts from one address."
    )
    account_limit_address: str = Field(
        "20 per hour", description="Registrations and reset requests from one address."
    )
    account_limit_email: str = Field(
        "3 per hour", description="Registration and reset mails to one email."
    )
    ratelimit_storage: str | None = Field(
        None,
        description="Storage URI of the rate-limit counters; unset: the Redis of `REDIS_URL` or "
        "the embedded one.",
    )
    proxy_hops: int = Field(
        0, description="Reverse proxies in front whose `X-Forwarded-For` is trusted."
    )
    base_url: str | None = Field(
        None,
        description="The site's address, e.g. `https://palimpsest.example.org`, which links in "
        "mails start with; unset: the address `palimpsest serve` binds.",
    )
    reset_minutes: int = Field(
        60, description="Minutes a password-reset or registration link stays valid."
    )
    smtp_host: str | None = Field(
        None, description="SMTP server; unset: no mail (organizers hand out reset links by CLI)."
    )
    smtp_port: int = Field(587, description="SMTP port.")
    smtp_user: str | None = Field(None, description="SMTP user name, if the server wants one.")
    smtp_password: str | None = Field(None, repr=False, description="SMTP password.")
    smtp_security: Literal["starttls", "ssl", "none"] = Field(
        "starttls", description="`starttls`, `ssl` or `none`."
    )
    mail_from: str = Field("palimpsest@localhost", description="Sender address of mails.")
    mail_max_attempts: int = Field(
        6,
        ge=1,
        description="Delivery attempts of one queued mail (retried with a growing delay: 1, 2, "
        "4, ... minutes) before it is marked failed.",
    )
    board_refresh_seconds: float = Field(
        5.0,
        ge=0,
        description="A board (each format, audience and declared board) is rendered at most once "
        "per this many seconds across the site; a view in between, or while the next render is "
        "built, is served the last one (a change reaches the board within this time). A "
        "publication, a freeze or a new gold is never served stale. 0: every change at once.",
    )
    bootstrap_samples: int = Field(
        1000, description="Bootstrap resamples behind each board's intervals and clusters."
    )
    s3_bucket: str | None = Field(
        None,
        description="Bucket of an S3-compatible object store (SeaweedFS, MinIO, AWS S3); set: "
        "uploads and task files are kept there, and the data directory is a cache of it; unset: "
        "the data directory only.",
    )
    s3_endpoint: str | None = Field(
        None, description="Endpoint URL of the object store, e.g. `http://seaweedfs:8333`."
    )
    s3_region: str = Field("us-east-1", description="Region of the object store.")
    s3_access_key: str | None = Field(None, description="Access key id of the object store.")
    s3_secret_key: str | None = Field(
        None, repr=False, description="Secret access key of the object store."
    )
    s3_path_style: bool = Field(
        True,
        description="Path-style addressing (`endpoint/bucket/key`), as SeaweedFS and MinIO use.",
    )
    s3_public_endpoint: str | None = Field(
        None,
        description="Endpoint URL that participants reach the object store at, when it differs "
        "from `PALIMPSEST_S3_ENDPOINT` (a store known inside the site's network by another name): "
        "presigned URLs (downloads, large uploads) are signed for it; unset: the endpoint.",
    )
    s3_url_seconds: int = Field(
        300,
        ge=1,
        le=7 * 24 * 3600,
        description="Seconds a download's presigned URL stays valid (a released public download "
        "on a site with an object store answers with a redirect to one).",
    )

    @field_validator(
        "database_url",
        "redis_url",
        "secret_key",
        "backup_key",
        "ratelimit_storage",
        "smtp_host",
        "smtp_user",
        "smtp_password",
        "s3_bucket",
        "s3_endpoint",
        "s3_public_endpoint",
        "s3_access_key",
        "s3_secret_key",
        mode="before",
    )
    @classmethod
    def _empty_is_unset(cls, v):
        return None if isinstance(v, str) and not v.strip() else v

    @field_validator("invalid_daily_limit", mode="before")
    @classmethod
    def _none_is_unlimited(cls, v):
        return None if isinstance(v, str) and v.strip().lower() in ("", "none") else v

    @field_validator("base_url", mode="before")
    @classmethod
    def _no_trailing_slash(cls, v):
        return (v.rstrip("/") or None) if isinstance(v, str) else v

    @field_validator("smtp_security", mode="before")
    @classmethod
    def _lower(cls, v):
        return v.lower() if isinstance(v, str) else v

    @field_validator("home", mode="after")
    @classmethod
    def _expand(cls, v: Path) -> Path:
        return Path(v).expanduser()

    @classmethod
    def from_env(cls, **overrides) -> Settings:
        """The settings from the environment, with keyword overrides (e.g. `home=`) winning, and
        the secret key resolved (see the module docstring)."""
        s = cls(**overrides)
        if s.secret_key is None:
            # outside production a missing key is generated into the home; production refuses
            # in check(), since its machines must share one key
            s.secret_key = read_secret(s.home) if s.env == "production" else ensure_secret(s.home)
        return s

    def check(self) -> None:
        """Refuse a production installation without a secret key, or one mailing without its
        own address; outside production, a missing secret key is generated into the home."""
        if self.secret_key is None:
            if self.env == "production":
                raise SettingsError(
                    "no secret key: set PALIMPSEST_SECRET_KEY (the same value on every web app and "
                    f"worker), or write one into {self.home / SECRET_FILE} with mode 600 "
                    "(`palimpsest serve` does so on first start)"
                )
            self.secret_key = ensure_secret(self.home)
        if self.smtp_host and not self.base_url:
            # links in mails must not be built from the request's Host header, which anyone can set
            raise SettingsError(
                "PALIMPSEST_BASE_URL must be set when mail is configured: the site's address, "
                "which links in mails start with (`palimpsest serve` sets it to its own address)"
            )

    def pools(self) -> tuple[str, ...]:
        """`run_pools` as a tuple of names."""
        return tuple(p.strip() for p in self.run_pools.split(",") if p.strip())

    def mail_configured(self) -> bool:
        """True when an SMTP host is set."""
        return bool(self.smtp_host)

    def embedded_redis(self) -> bool:
        """True when no REDIS_URL is set: the server runs its own Redis in the data directory."""
        return not self.redis_url

    def limits(self) -> Limits:
        """What a submission file may weigh, for the scorer."""
        from scorer.reader import Limits  # the scorer (numpy) loads when a file is read

        return Limits(
            max_bytes=self.max_upload_bytes, max_uncompressed_bytes=self.max_uncompressed_bytes
        )

    def sqlalchemy_url(self) -> str:
        """The database URL, SQLite in the data directory by default."""
        if self.database_url:
            url = self.database_url
            if url.startswith("postgres://"):
                url = "postgresql://" + url[len("postgres://") :]
            return url
        self.home.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{self.home / 'palimpsest.db'}"


def get_settings(home: Path | None = None) -> Settings:
    """The settings: the running app's inside a request or app context, else the environment's
    (with `home` as the data directory when given)."""
    # no app can be running where Flask was never imported, and the CLI must not load it
    flask = sys.modules.get("flask")
    if home is None and flask is not None and flask.has_app_context():
        return flask.current_app.extensions["palimpsest.settings"]
    return Settings.from_env(home=home) if home is not None else Settings.from_env()


def read_secret(home: Path) -> str | None:
    """The secret key kept in the data directory, or None when there is none yet."""
    try:
        key = (Path(home) / SECRET_FILE).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    return key or None


def ensure_secret(home: Path) -> str:
    """The data directory's secret key, generated (random, 256 bits, mode 600) when absent."""
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    path = home / SECRET_FILE
    if not path.exists():
        # written whole under a private name, then linked into place: of two processes starting
        # at once one key wins, and neither ever reads a half-written file
        tmp = home / f".{SECRET_FILE}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(secrets.token_urlsafe(32) + "\n")
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    key = read_secret(home)
    if key is None:
        raise SettingsError(f"{path} is empty: delete it to have a new secret key generated")
    return key


def settings_markdown() -> str:
    """The settings page of the docs: one row per setting, from the declaration above."""
    aliases = {"database_url": "DATABASE_URL", "redis_url": "REDIS_URL"}
    rows = [
        "# Settings",
        "",
        "<!-- generated from server/settings.py by `palimpsest settings --markdown` -->",
        "",
        "Every setting of an installation is read from the environment. `palimpsest settings`",
        "prints the values in force (secrets masked), `--json` as one JSON object.",
        "",
        "**The secret key.** `PALIMPSEST_SECRET_KEY` when set; else the file `secret_key` in the",
        "data directory, which `palimpsest serve` writes on its first start (256 random bits,",
        "mode 600) and every later start, worker and local command reads. A development or test",
        "app writes it too; a production app (`PALIMPSEST_ENV=production`) without either refuses",
        "to start, saying so: its web app and workers may run on several machines, which must",
        "share one key, so it is never made up behind the operator's back.",
        "",
        "**Mail links** (registration, password reset) start with `PALIMPSEST_BASE_URL`;",
        "`palimpsest serve` sets it to the address it binds when it is unset, and an app with",
        "mail but without it refuses to start. They are never built from the request's `Host`",
        "header, which is the visitor's to choose.",
        "",
        "| variable | type | default | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for name, f in Settings.model_fields.items():
        var = aliases.get(name, f"PALIMPSEST_{name.upper()}")
        if f.default_factory is not None:
            default = "see meaning"
        elif f.default is None:
            default = "unset"
        elif isinstance(f.default, int) and f.default >= GiB and f.default % GiB == 0:
            default = f"`{f.default}` ({f.default // GiB} GiB)"
        else:
            default = f"`{f.default}`"
        rows.append(f"| `{var}` | {_type_name(f.annotation)} | {default} | {f.description} |")
    return "\n".join(rows) + "\n"


def _type_name(annotation) -> str:
    """A reader's name for a field's type: `integer`, `text or unset`, `one of a, b`."""
    names = {int: "integer", float: "number", str: "text", Path: "path", bool: "yes or no"}
    args = get_args(annotation)
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if args and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return " or ".join(_type_name(a) for a in inner) + " (optional)"
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))
