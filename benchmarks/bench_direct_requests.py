"""CPU of the store's direct requests in a forked child, as a scoring job makes them: a process
builds the store and warms it (`ObjectStore.warm`, as a worker's parent does), then forks children
that each GET a small object (their first request) and PUT 2 KiB (their second), timed on the
process clock. SeaweedFS's `weed mini` on loopback, started as the tests start it.

    python3 benchmarks/bench_direct_requests.py [--children 30]

Run it from a checkout of each commit to compare them; it measures the checkout it is in.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # seaweed: the store as the tests start it


def child(store, i: int, w: int) -> None:
    t0 = time.process_time()
    store.get_bytes("tasks/t/task.json")
    t1 = time.process_time()
    store.put_bytes(f"runs/{i}.jsonl", b"x" * 2048)
    t2 = time.process_time()
    os.write(w, json.dumps([t1 - t0, t2 - t1]).encode())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--children", type=int, default=30)
    args = ap.parse_args()

    import boto3
    from seaweed import start_weed, stop_weed

    from server.objectstore import ObjectStore

    proc, info = start_weed(Path(tempfile.mkdtemp(prefix="bench-direct-")) / "weed")
    try:
        ep, ak, sk = info["endpoint"], info["access_key"], info["secret_key"]
        boto3.client(
            "s3",
            endpoint_url=ep,
            aws_access_key_id=ak,
            aws_secret_access_key=sk,
            region_name="us-east-1",
        ).create_bucket(Bucket="bench")
        store = ObjectStore("bench", ep, "us-east-1", ak, sk)
        assert store.direct is not None
        store.put_bytes("tasks/t/task.json", b"{}" * 500)
        store.warm()
        got = []
        for i in range(args.children):
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(r)
                child(store, i, w)
                os._exit(0)
            os.close(w)
            got.append(json.loads(os.read(r, 1000)))
            os.close(r)
            os.waitpid(pid, 0)
    finally:
        stop_weed(proc)
    out = {"children": args.children, "load": os.getloadavg()[0]}
    for n, name in enumerate(("get_first_ms", "put_second_ms")):
        ms = sorted(x[n] * 1e3 for x in got)
        out[name] = {
            "median": round(statistics.median(ms), 2),
            "p10": round(ms[len(ms) // 10], 2),
            "p90": round(ms[len(ms) * 9 // 10], 2),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
