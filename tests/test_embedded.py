"""The embedded Redis of a data directory (server/jobs/embedded.py), with a real redis-server."""

from __future__ import annotations

from server.jobs.embedded import EmbeddedRedis
from server.jobs.procs import pid_alive


def test_stop_a_redis_found_by_its_pid_file(tmp_path):
    """Another process's handle (no child of its own) stops the server named in the pid file."""
    starter = EmbeddedRedis(tmp_path)
    starter.start()
    try:
        other = EmbeddedRedis(tmp_path)  # as `palimpsest` finds a server it did not start
        pid = other.running_pid()
        assert pid and other.proc is None
        other.stop(timeout=10)
        assert not pid_alive(pid)
        assert not other.alive()
    finally:
        starter.stop()
