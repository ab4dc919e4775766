"""What the sandbox of blind runs costs: the same system run directly and in the sandbox.

1. The example system (examples/system-sts-latin) on the example bundle's test inputs, `--n` times
   each way, alternating: the median wall time of each and the overhead per run (goal: under
   0.3 s). Also an empty Python program, which shows the sandbox's fixed cost alone.
2. With `--oci runc` (or crun): each program in bubblewrap and through the OCI runtime
   (server.jobs.oci: its bundle, its cgroup, `run` and `delete`), alternating: the median of each
   and the runtime's cost per run over bare bubblewrap (goal: ~26-55 ms).
3. With `--tric DIR` (TRoTR's release): the bi-encoder baseline on TRiC's test split, on the CPU,
   through the whole path of a code run (its archive unpacked, the inputs staged, the system run
   in the sandbox) against the same system run in this process (`baselines run`).

    python benchmarks/bench_sandbox.py --n 20 [--oci runc] [--tric ../shared/data/trotr/TRoTR]
        [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from server.domain.system_archive import unpack  # noqa: E402
from server.jobs import sandbox  # noqa: E402

EXAMPLE = REPO / "examples" / "system-sts-latin"
INPUTS = REPO / "examples" / "bundle-sts-latin" / "sts-latin" / "test" / "inputs.jsonl"


def _readable(d: Path) -> Path:
    os.chmod(d, 0o755)
    for p in d.rglob("*"):
        os.chmod(p, 0o755 if p.is_dir() else 0o644)
    return d


def _outside(arg: str, inputs: Path, out: Path) -> str:
    """A word of the manifest's command as it reads outside the sandbox."""
    if arg == "python3":
        return sys.executable
    for inside, there in (("/input", inputs), ("/output", out)):
        if arg == inside or arg.startswith(inside + "/"):
            return str(there) + arg[len(inside) :]
    return arg


def overhead(n: int, work: Path) -> dict:
    code = work / "code"
    manifest = unpack(EXAMPLE, code)
    inputs = work / "in"
    inputs.mkdir()
    (inputs / "inputs.jsonl").write_bytes(INPUTS.read_bytes())
    _readable(inputs)
    (code / "empty.py").write_text("")
    os.chmod(code / "empty.py", 0o644)
    limits = sandbox.Limits(wall_seconds=120)
    out = {}
    for name, argv in (
        ("example system", manifest.command),
        ("empty program", ["python3", "empty.py"]),
    ):
        direct, boxed = [], []
        for i in range(n):
            o = work / f"out-{name.split()[0]}-{i}"
            o.mkdir()
            cmd = [_outside(a, inputs, o) for a in argv]
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=code, check=True)
            direct.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            r = sandbox.run(
                argv,
                code=code,
                inputs=inputs,
                output=work / f"box-{name.split()[0]}-{i}",
                limits=limits,
            )
            boxed.append(time.perf_counter() - t0)
            assert r.ok, (r.reason, r.stderr)
        md, mb = statistics.median(direct), statistics.median(boxed)
        out[name] = {
            "direct_median_s": round(md, 4),
            "sandbox_median_s": round(mb, 4),
            "overhead_s": round(mb - md, 4),
            "ratio": round(mb / md, 2),
            "runs": n,
        }
        print(
            f"{name}: direct {md:.3f} s, sandbox {mb:.3f} s, overhead {mb - md:.3f} s", flush=True
        )
    return out


def oci_overhead(n: int, work: Path, runtime: str) -> dict:
    """Each program in bubblewrap, then through `runtime`, alternating: medians and the
    difference."""
    code = work / "code"
    manifest = unpack(EXAMPLE, code)
    inputs = work / "in"
    inputs.mkdir()
    (inputs / "inputs.jsonl").write_bytes(INPUTS.read_bytes())
    _readable(inputs)
    (code / "empty.py").write_text("")
    os.chmod(code / "empty.py", 0o644)
    limits = sandbox.Limits(wall_seconds=120)
    out = {}
    for name, argv in (
        ("example system", manifest.command),
        ("empty program", ["python3", "empty.py"]),
    ):
        times: dict[str, list[float]] = {"bwrap": [], runtime: []}
        for i in range(n):
            for rt in times:
                t0 = time.perf_counter()
                r = sandbox.run(
                    argv,
                    code=code,
                    inputs=inputs,
                    output=work / f"{rt}-{name.split()[0]}-{i}",
                    limits=limits,
                    runtime=rt,
                )
                times[rt].append(time.perf_counter() - t0)
                assert r.ok, (rt, r.reason, r.stderr)
        mb, mo = statistics.median(times["bwrap"]), statistics.median(times[runtime])
        out[name] = {
            "bwrap_median_s": round(mb, 4),
            f"{runtime}_median_s": round(mo, 4),
            "difference_s": round(mo - mb, 4),
            "runs": n,
        }
        print(f"{name}: bwrap {mb:.3f} s, {runtime} {mo:.3f} s, {mo - mb:+.3f} s", flush=True)
    return out


def tric(release: Path, work: Path) -> dict:
    from baselines.run import run_baselines
    from baselines.systems import Options
    from server.domain.baselines import baseline_archive
    from server.domain.code_runs import stage_inputs
    from tasks.importers import import_task

    home = work / "home"
    import_task("tric-binary", home, source=release, fold=1)
    opts = Options(device="cpu", progress=False)
    t0 = time.perf_counter()
    (direct,) = run_baselines(["tric-binary"], ["bi-encoder"], opts, work / "direct", home)
    t_direct = time.perf_counter() - t0
    t0 = time.perf_counter()
    archive = baseline_archive("tric-binary", "bi-encoder", opts, work / "bi.zip")
    m = unpack(archive, work / "code")
    stage_inputs(home, "tric-binary", "test", _readable_dir(work / "input"), set())
    r = sandbox.run(
        m.command,
        code=work / "code",
        inputs=work / "input",
        output=work / "output",
        limits=sandbox.Limits(wall_seconds=1800, cpu_seconds=3600, memory_mb=8192),
    )
    t_path = time.perf_counter() - t0
    assert r.ok, (r.reason, r.stderr[-2000:])
    same = (work / "output" / m.output).read_bytes() == Path(direct["file"]).read_bytes()
    print(
        f"TRiC bi-encoder on the CPU: in-process {t_direct:.1f} s, through the path {t_path:.1f} s "
        f"({r.cpu_seconds:.1f} s of CPU, {r.peak_rss_mb:.0f} MB); same file: {same}",
        flush=True,
    )
    return {
        "in_process_s": round(t_direct, 2),
        "path_s": round(t_path, 2),
        "path_cpu_s": r.cpu_seconds,
        "path_peak_rss_mb": r.peak_rss_mb,
        "same_file": same,
    }


def _readable_dir(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    return d


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--oci", default=None, help="an OCI runtime to compare (runc, crun)")
    ap.add_argument("--tric", type=Path, default=None, help="TRoTR's release folder")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    why = sandbox.available()
    if why:
        sys.exit(f"no sandbox here: {why}")
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        if a.oci:
            result["oci"] = oci_overhead(a.n, _readable_dir(work / "c"), a.oci)
        else:
            result["overhead"] = overhead(a.n, _readable_dir(work / "o"))
        if a.tric:
            result["tric_bi_encoder"] = tric(a.tric, _readable_dir(work / "t"))
    result["load_after"] = os.getloadavg()[0]
    text = json.dumps(result, indent=2)
    print(text)
    if a.json:
        a.json.write_text(text)


if __name__ == "__main__":
    main()
