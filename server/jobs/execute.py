"""Run this system on these inputs: the one step that the site's code worker
(server.jobs.run_jobs) and an attached worker (server.jobs.attached) share.

Given a run's stored archive and a folder of its inputs, `execute` unpacks the archive, runs the
manifest's command in the sandbox (server.jobs.sandbox) under `limits`, and says how it ended:
the sandbox's own failure (`infra`, never the team's), the system's (a limit, an exit, no output
file) or its output file, with the kernel's counters and the log as the site keeps them. It knows
nothing of the database, Redis or the object store: where the archive and the inputs come from
and where the result goes is its caller's.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from server.domain.system_archive import SystemInvalid, SystemManifest, unpack
from server.jobs.sandbox import Limits, SandboxUnavailable, run

# the counters of a run's record (`CodeRun.outcome`), the sandbox's and the attempt's
COUNTERS = ("status", "exit_code", "wall_seconds", "cpu_seconds", "peak_rss_mb")


def limits_for(manifest: dict, settings) -> Limits:
    """The manifest's resources, each capped by the site's setting."""
    res = manifest.get("resources") or {}
    return Limits(
        wall_seconds=min(float(res.get("wall_seconds", 600)), settings.run_wall_seconds),
        cpu_seconds=min(int(res.get("cpu_seconds", 600)), settings.run_cpu_seconds),
        memory_mb=min(int(res.get("memory_mb", 2048)), settings.run_memory_mb),
        processes=settings.run_processes,
        output_mb=settings.run_output_mb,
        output_file=manifest.get("output") or "predictions.jsonl",  # the one file copied out
    )


def read_output(out_dir: Path, name: str) -> tuple[Path | None, str]:
    """The run's output file, if it is a regular file (never a link the system planted)."""
    p = out_dir / name
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return None, f"the system wrote no /output/{name}"
    if not stat.S_ISREG(st.st_mode):
        return None, f"/output/{name} is not a regular file"
    if st.st_size == 0:
        return None, f"/output/{name} is empty"
    return p, ""


@dataclass
class Ran:
    """How a run ended. `kind`: `ok` (its output file at `output`), `code` (the system's failure:
    a limit, an exit, no output; counted), `infra` (the sandbox itself failed: not counted),
    `unreadable` (the stored archive cannot be unpacked: the server's fault)."""

    kind: str
    reason: str = ""
    status: str = ""  # the sandbox's status, or `no_output`
    log: str = ""
    used: dict = field(default_factory=dict)  # the run's record of what it used
    cpu_seconds: float = 0.0
    output: Path | None = None
    manifest: SystemManifest | None = None


def execute(
    archive: Path,
    inputs: Path,
    work: Path,
    *,
    limits: Limits,
    attempt: int,
    models=(),
    runtime: str = "bwrap",
) -> Ran:
    """Unpack `archive` under `work`, run its command on `inputs` in the sandbox under `limits`
    (the GPU's device nodes when the manifest asks for it, the container image of an `image`
    runtime), and say how it ended. Raises RuntimeError when this machine cannot run systems at
    all (no bwrap): the worker's failure, not the run's."""
    try:
        m = unpack(archive, work / "code")
    except SystemInvalid as e:  # checked at upload; a changed archive is the server's fault
        return Ran("unreadable", reason=f"the stored archive cannot be read: {e}")
    try:
        outcome = run(
            m.command,
            code=work / "code",
            inputs=inputs,
            output=work / "output",
            limits=limits,
            models=[Path(p) for p in models],
            gpu=m.resources.gpu,
            image=m.image if m.runtime == "image" else None,
            runtime=runtime,
        )
    except SandboxUnavailable as e:
        raise RuntimeError(f"this worker cannot run systems: {e}") from None
    if outcome.status == "infra":  # the sandbox itself failed: not charged, its budget back
        return Ran(
            "infra",
            reason=outcome.reason,
            status="infra",
            log=outcome.stderr[-2000:],
            manifest=m,
        )
    logtext = (
        f"--- stdout ---\n{outcome.stdout}\n--- stderr ---\n{outcome.stderr}"
        f"\n--- {outcome.status}: {outcome.reason or 'finished'} ---\n"
    )
    used = {k: getattr(outcome, k) for k in COUNTERS} | {
        "output_bytes": outcome.output_bytes,
        "attempt": attempt,
        "cgroup": outcome.cgroup,
    }
    done = dict(log=logtext, used=used, cpu_seconds=outcome.cpu_seconds, manifest=m)
    if not outcome.ok:
        return Ran("code", reason=outcome.reason, status=outcome.status, **done)
    path, problem = read_output(work / "output", m.output)
    if path is None:
        return Ran("code", reason=problem, status="no_output", **done)
    return Ran("ok", status="ok", output=path, **done)
