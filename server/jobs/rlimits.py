"""Bounded work per file: a scoring job validates and scores under a CPU-time and an
address-space limit (`resource.setrlimit`), so that no file, however made, can hold a worker for
long or take its machine's memory. Running out is the file's fault, never the server's.
"""

from __future__ import annotations

import resource
import signal
from contextlib import contextmanager


class TooCostly(Exception):
    """The file needed more CPU time or memory than one file may use."""


def _vm_size() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * resource.getpagesize()
    except OSError:
        return 0


def _raise_cpu(signum, frame):
    raise TooCostly("cpu")


@contextmanager
def bounded(cpu_seconds: int | None, memory_bytes: int | None):
    """Run the block with at most `cpu_seconds` more CPU time and `memory_bytes` more address
    space; raises TooCostly when either runs out. Soft limits only, restored afterwards, so the
    same process (an in-process worker) goes on unbounded as before."""
    saved = {}
    old_handler = None
    try:
        if cpu_seconds:
            used = resource.getrusage(resource.RUSAGE_SELF)
            now = int(used.ru_utime + used.ru_stime) + 1
            soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
            want = now + int(cpu_seconds)
            if hard == resource.RLIM_INFINITY or want < hard:
                saved[resource.RLIMIT_CPU] = (soft, hard)
                old_handler = signal.signal(signal.SIGXCPU, _raise_cpu)
                resource.setrlimit(resource.RLIMIT_CPU, (want, hard))
        if memory_bytes:
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            want = _vm_size() + int(memory_bytes)
            if hard == resource.RLIM_INFINITY or want < hard:
                saved[resource.RLIMIT_AS] = (soft, hard)
                resource.setrlimit(resource.RLIMIT_AS, (want, hard))
    except (ValueError, OSError):  # a platform without these limits: run unbounded
        pass
    try:
        yield
    except MemoryError:
        raise TooCostly("memory") from None
    finally:
        for which, lim in saved.items():
            try:
                resource.setrlimit(which, lim)
            except (ValueError, OSError):
                pass
        if old_handler is not None:
            signal.signal(signal.SIGXCPU, old_handler)
