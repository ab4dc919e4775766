"""Hostile uploads, measured: mutated files of every task and the known bombs, sent through the
real REST API to a real `palimpsest serve` (embedded SQLite + Redis, its own workers), then a
login flood.

    python benchmarks/hostile_uploads.py [--per-task 2000] [--seed 1] [--json out.json]

Prints the HTTP statuses, the scored/invalid/infra outcomes, each bomb's time from upload to a
final status and its peak memory (the same job re-run alone in a child process, whose maximum
resident size is what one worker's horse needs), the longest stored report, whether any message
holds a gold value, and after how many attempts a login flood is throttled. Everything is seeded.
The goals: 0 HTTP 500, 0 infra outcomes caused by a file, every bomb within 10 s and
600 MB, no stored report over 64 KB, no gold value in any message, a login flood throttled within
10 attempts.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import io
import json
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

MiB = 1024 * 1024


# ----------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_for(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env.update(
        PALIMPSEST_HOME=str(home),
        PYTHONPATH=str(REPO),
        PALIMPSEST_INVALID_DAILY_LIMIT="none",
        PALIMPSEST_RECONCILE_EVERY="2",
        PALIMPSEST_STALE_AFTER="10",
    )
    return env


def palimpsest(home: Path, *args, input: str | None = None) -> str:
    r = subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env_for(home),
        cwd=REPO,
        input=input,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        raise RuntimeError(f"palimpsest {' '.join(args)}: {r.stderr or r.stdout}")
    return r.stdout


def set_up(home: Path) -> dict:
    """Demo tasks, phases without limits, an organizer and a participant team with tokens."""
    from sqlmodel import Session

    from server.db import get_engine
    from server.demo import import_demo_tasks
    from server.domain.accounts import create_token, create_user
    from server.models import Team, TeamMember
    from server.settings import Settings

    import_demo_tasks(home, only_missing=False)
    palimpsest(home, "db", "upgrade")
    from server.actions.phases import ensure_phases, set_phase
    from tasks import all_tasks

    os.environ["PALIMPSEST_HOME"] = str(home)
    engine = get_engine(Settings(home=home).sqlalchemy_url())
    # what `palimpsest phases set TASK SPLIT --daily-limit none --total-limit none
    # --concurrent-limit none` does for each task's dev and test phase, in this process (a command
    # line each was eleven processes starting the app)
    unlimited = {"daily_limit": None, "total_limit": None, "concurrent_limit": None}
    with Session(engine, expire_on_commit=False) as s:
        ensure_phases(s=s, home=home)
    for t in all_tasks():
        for split in t.splits:
            if split in ("dev", "test"):
                with Session(engine, expire_on_commit=False) as s:
                    set_phase(
                        s=s,
                        task_id=t.id,
                        phase=split,
                        changes=dict(unlimited),
                        actor=None,
                        home=home,
                        via="cli",
                    )
    with Session(engine, expire_on_commit=False) as s:
        team = Team(name="fuzzers", invite_code="fuzz-invite")
        s.add(team)
        s.commit()
        u = create_user(s, email="fuzz@example.org", password="correct horse battery")
        s.add(TeamMember(team_id=team.id, user_id=u.id))
        s.commit()
        _, token = create_token(s, user=u)
        s.commit()
        create_user(s, email="victim@example.org", password="correct horse battery")
        s.commit()
    engine.dispose()
    return {"token": token}


def start_serve(home: Path, port: int, workers: int, log: Path) -> subprocess.Popen:
    p = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--port", str(port), "--workers", str(workers)],
        env=env_for(home),
        cwd=REPO,
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
            return p
        except Exception:  # noqa: BLE001 — not up yet
            if p.poll() is not None:
                raise RuntimeError(f"serve exited: {log.read_text()[-2000:]}") from None
            time.sleep(0.5)
    raise RuntimeError("serve did not come up")


def multipart(fields: dict, file_name: str, data: bytes) -> tuple[bytes, str]:
    boundary = "palimpsest" + os.urandom(8).hex()
    out = io.BytesIO()
    for k, v in fields.items():
        out.write(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        )
    out.write(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{file_name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
    )
    out.write(data)
    out.write(f"\r\n--{boundary}--\r\n".encode())
    return out.getvalue(), f"multipart/form-data; boundary={boundary}"


def upload(
    base: str, token: str, task: str, phase: str, name: str, data: bytes
) -> tuple[int, dict]:
    body, ctype = multipart({"phase": phase, "method_name": "fuzz"}, name, data)
    req = urllib.request.Request(
        f"{base}/api/v1/tasks/{task}/submissions",
        data=body,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": ctype},
    )
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw or b"{}")
        except ValueError:
            return e.code, {"raw": raw[:200].decode("utf-8", "replace")}


def get(base: str, token: str, path: str) -> dict:
    req = urllib.request.Request(f"{base}{path}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


# ----------------------------------------------------------------------------- files


def valid_file(task_id: str, split: str, home: Path, rng: random.Random) -> tuple[bytes, str]:
    from server.demo import predictions

    return predictions(task_id, split, home, rng.choice((0.0, 0.1, 0.3)), seed=rng.randrange(10**6))


HOSTILE_VALUES = [
    None,
    "",
    "x",
    [],
    {},
    True,
    -1,
    1e309,
    "NaN",
    "1e999",
    10**30,
    "é" * 300,
    [1, [2, [3]]],
    {"a": 1},
    "\u0000",
    "💥" * 50,
    -0.0,
    0.5,
    2,
    "1",
    " 1 ",
]


def mutate(data: bytes, name: str, rng: random.Random) -> tuple[bytes, str]:
    """One seeded mutation of a valid file: lines, fields, values, encodings or containers."""
    text = data.decode("utf-8")
    lines = text.split("\n")
    kind = rng.randrange(14)
    body = [ln for ln in lines if ln.strip()]
    head = body[0] if name.endswith(".csv") else None
    rows = body[1:] if head is not None else body
    if kind == 0 and rows:  # drop lines
        for _ in range(rng.randint(1, max(1, len(rows) // 4))):
            rows.pop(rng.randrange(len(rows)))
    elif kind == 1 and rows:  # duplicate lines
        for _ in range(rng.randint(1, 5)):
            rows.insert(rng.randrange(len(rows) + 1), rng.choice(rows))
    elif kind == 2 and rows:  # truncate a line
        i = rng.randrange(len(rows))
        rows[i] = rows[i][: rng.randrange(max(1, len(rows[i])))]
    elif kind == 3 and rows and head is None:  # a hostile value in a field
        for _ in range(rng.randint(1, 10)):
            i = rng.randrange(len(rows))
            try:
                obj = json.loads(rows[i])
            except ValueError:
                continue
            if obj:
                obj[rng.choice(list(obj))] = rng.choice(HOSTILE_VALUES)
                rows[i] = json.dumps(obj)
    elif kind == 4 and rows and head is None:  # renamed or extra fields
        i = rng.randrange(len(rows))
        try:
            obj = json.loads(rows[i])
            k = rng.choice(list(obj))
            obj[k + "_x"] = obj.pop(k)
            rows[i] = json.dumps(obj)
        except (ValueError, IndexError):
            pass
    elif kind == 5:  # random bytes
        raw = bytearray(data)
        for _ in range(rng.randint(1, 20)):
            if raw:
                raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw), name
    elif kind == 6:  # a BOM and CRLF line ends
        return b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n"), name
    elif kind == 7:  # gzip, maybe cut short
        gz = gzip.compress(data)
        return (gz[: rng.randrange(10, len(gz))] if rng.random() < 0.5 else gz), name + ".gz"
    elif kind == 8:  # a zip of one or two members
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr(name, data)
            if rng.random() < 0.3:
                z.writestr("../evil.txt", b"x")
        return buf.getvalue(), name + ".zip"
    elif kind == 9 and head is not None:  # a CSV header changed
        cols = head.split(",")
        cols[rng.randrange(len(cols))] = rng.choice(["", "id", "score ", "label", "query"])
        head = ",".join(cols)
    elif kind == 10 and rows:  # a very long id or value
        i = rng.randrange(len(rows))
        rows[i] = rows[i].replace('"', '"' + "Z" * rng.choice((100, 10_000, 1_000_000)), 1)
    elif kind == 11:  # the wrong format altogether
        return rng.choice(
            [b"<html></html>", b"\x00\x01\x02", b"a,b\n1,2\n", b"[]", b'{"a": 1}']
        ), name
    elif kind == 12 and rows:  # shuffled lines: still valid
        rng.shuffle(rows)
    elif kind == 13:  # an empty file or one blank line
        return rng.choice([b"", b"\n", b"   \n"]), name
    out = ([head] if head is not None else []) + rows
    return ("\n".join(out) + "\n").encode("utf-8"), name


def bombs(task_id: str, valid: bytes, name: str) -> dict[str, tuple[bytes, str]]:
    """The hostile files, sized to the task's limits."""
    out = {}
    out["gzip of 1 GiB '{}' lines"] = (gzip_bomb(), "p.jsonl.gz")
    out["one 60 MB line"] = (
        json.dumps({"instanceID": "A" * (60 * MiB), "label": 1}).encode() + b"\n",
        "p.jsonl",
    )
    out["JSON nested 100,000 deep"] = (
        b'{"instanceID": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
        "p.jsonl",
    )
    out["an integer of 50,000 digits"] = (
        b'{"instanceID": "x", "label": ' + b"9" * 50_000 + b"}\n",
        "p.jsonl",
    )
    out["zip whose header lies about its size"] = (_lying_zip(name, valid), name + ".zip")
    out["10,000 columns"] = (
        (",".join(f"c{i}" for i in range(10_000)) + "\n").encode() * 50,
        "p.csv",
    )
    out["a million blank lines and one bad"] = (b"\n" * 1_000_000 + b"{\n", "p.jsonl")
    return out


@functools.cache
def gzip_bomb() -> bytes:
    """1 GiB of '{}' lines, gzipped at level 9 (about 1 MB): 64 gzip members of 16 MiB each, one
    member compressed and repeated (a gzip file may hold several members, read as one stream, RFC
    1952), made once per process. Compressing the whole GiB as one member took 5 s of CPU, most of
    the bombs' making."""
    member = gzip.compress(b"{}\n" * (16 * MiB // 3), compresslevel=9, mtime=0)
    return member * 64


@functools.cache
def _deflated_zeros() -> bytes:
    """200 MB of zeros, raw deflate at level 9: made once per process."""
    payload = zlib.compressobj(9, zlib.DEFLATED, -15)
    return b"".join([payload.compress(b"0" * MiB) for _ in range(200)]) + payload.flush()


def _lying_zip(name: str, data: bytes) -> bytes:
    """A zip whose member says it holds 1 KB while 200 MB of zeros deflate inside."""
    comp = _deflated_zeros()
    crc = zlib.crc32(b"0" * 1024)
    fname = name.encode()
    local = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(comp), 1024, len(fname), 0
    )
    central = struct.pack(
        "<IHHHHHHIIIHHHHHII",
        0x02014B50,
        20,
        20,
        0,
        8,
        0,
        0,
        crc,
        len(comp),
        1024,
        len(fname),
        0,
        0,
        0,
        0,
        0,
        0,
    )
    body = local + fname + comp
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central) + len(fname), len(body), 0)
    return body + central + fname + end


# ----------------------------------------------------------------------------- measuring


def wait_final(base: str, token: str, ids: list[int], timeout: float) -> dict[int, dict]:
    out, deadline = {}, time.monotonic() + timeout
    pending = set(ids)
    while pending and time.monotonic() < deadline:
        for sid in list(pending):
            d = get(base, token, f"/api/v1/submissions/{sid}")
            if d["status"] in ("scored", "failed"):
                out[sid] = d
                pending.discard(sid)
        if pending:
            time.sleep(0.3)
    for sid in pending:
        out[sid] = get(base, token, f"/api/v1/submissions/{sid}")
    return out


def peak_of_job(home: Path, submission_file: Path, task_id: str, split: str) -> dict:
    """Validate and score the stored file alone, in a child process under the worker's own limits:
    (seconds, maximum resident MB)."""
    code = f"""
import json, resource, sys, time
sys.path.insert(0, {str(REPO)!r})
from scorer import SubmissionInvalid, score_validated, validate_file
from server.jobs.rlimits import TooCostly, bounded
from server.settings import Settings
s = Settings.from_env()
t = time.perf_counter()
outcome = "valid"
try:
    with bounded(s.file_cpu_seconds, s.file_memory_bytes):
        v = validate_file({task_id!r}, {str(submission_file)!r}, {split!r}, {str(home)!r})
        score_validated(v, {str(home)!r})
except SubmissionInvalid:
    outcome = "invalid"
except TooCostly:
    outcome = "too costly"
print(json.dumps({{"seconds": time.perf_counter() - t, "outcome": outcome,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""
    r = subprocess.run(
        [sys.executable, "-c", code], env=env_for(home), capture_output=True, text=True, timeout=600
    )
    return (
        json.loads(r.stdout.strip().splitlines()[-1])
        if r.returncode == 0
        else {"error": r.stderr[-500:]}
    )


def gold_values(home: Path) -> dict[str, dict[str, str]]:
    """Per task, id -> the gold value as a string, for golds whose values are distinctive (floats
    with decimals, label lists); a message naming that id must not show it."""
    from tasks import all_tasks
    from tasks.store import TaskStore

    out = {}
    for t in all_tasks():
        g = TaskStore(t.id, home).gold("test", "gold.jsonl")
        if not g.is_file():
            continue
        vals = {}
        for line in g.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            key = row.get(t.format.key[0]) if t.format.key else None
            for k, v in row.items():
                if k == t.format.key[0]:
                    continue
                if isinstance(v, float) and v != int(v):
                    vals[str(key)] = repr(v)
                elif isinstance(v, list) and len(v) > 3:
                    vals[str(key)] = json.dumps(v[:4])[:-1]
        out[t.id] = vals
    return out


def login_flood(base: str, n: int = 20) -> int | None:
    """Wrong passwords on one account: the attempt at which the server first answers 429."""
    import http.cookiejar
    import re

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    for i in range(1, n + 1):
        page = opener.open(f"{base}/auth/login", timeout=30).read().decode()
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        data = urllib.parse.urlencode(
            {"csrf_token": token, "email": "victim@example.org", "password": f"wrong-{i}"}
        ).encode()
        try:
            opener.open(
                urllib.request.Request(f"{base}/auth/login", data=data, method="POST"), timeout=30
            )
        except urllib.error.HTTPError as e:
            if e.code == 429:
                return i
    return None


def run(
    per_task: int, seed: int, workers: int = 2, bombs_too: bool = True, alone: bool = True
) -> dict:
    """The sweep; `alone` also validates and scores each stored bomb again in a child process of
    its own, for its time and peak memory (the report's figures, not a check)."""
    import urllib.parse  # noqa: F401  (login_flood)

    from tasks import all_tasks

    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="palimpsest-hostile-"))
    home = tmp / "home"
    home.mkdir()
    creds = set_up(home)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    serve = start_serve(home, port, workers, tmp / "serve.log")
    report: dict = {
        "seed": seed,
        "per_task": per_task,
        "http": Counter(),
        "outcomes": Counter(),
        "bombs": {},
        "longest_report_bytes": 0,
        "gold_in_messages": [],
        "infra": [],
        "http_500": [],
    }
    try:
        golds = gold_values(home)
        started = time.monotonic()
        for t in all_tasks():
            split = "test" if "test" in t.splits else t.splits[0]
            ids = []
            for i in range(per_task):
                data, name = valid_file(t.id, split, home, rng)
                data, name = mutate(data, name, rng) if rng.random() < 0.9 else (data, name)
                status, body = upload(base, creds["token"], t.id, split, name, data)
                report["http"][status] += 1
                if status >= 500:
                    report["http_500"].append({"task": t.id, "i": i, "body": str(body)[:300]})
                if status in (200, 201) and "id" in body:
                    ids.append(body["id"])
            print(
                f"{t.id}: {per_task} uploaded ({time.monotonic() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
            for sid, d in wait_final(base, creds["token"], ids, timeout=600 + per_task).items():
                report["outcomes"][
                    d["status"] if d["status"] != "failed" else f"failed:{d['failure_kind']}"
                ] += 1
                if d.get("failure_kind") == "infra":
                    report["infra"].append({"task": t.id, "id": sid, "errors": d["errors"][:2]})
                size = len(json.dumps(d["errors"], ensure_ascii=False).encode())
                report["longest_report_bytes"] = max(report["longest_report_bytes"], size)
                for p in d["errors"]:
                    want = golds.get(t.id, {}).get(str(p.get("id")))
                    if want and want in (p.get("message") or ""):
                        report["gold_in_messages"].append(
                            {"task": t.id, "id": p["id"], "message": p["message"]}
                        )
        if bombs_too:
            for t in [x for x in all_tasks() if x.id in ("tric-binary", "loci-similes")]:
                split = "test"
                data, name = valid_file(t.id, split, home, rng)
                for label, (bomb, bname) in bombs(t.id, data, name).items():
                    t0 = time.monotonic()
                    status, body = upload(base, creds["token"], t.id, split, bname, bomb)
                    entry = {"http": status, "bytes": len(bomb)}
                    report["http"][status] += 1
                    if status in (200, 201) and "id" in body:
                        d = wait_final(base, creds["token"], [body["id"]], timeout=120)[body["id"]]
                        entry.update(
                            seconds=round(time.monotonic() - t0, 2),
                            status=d["status"],
                            failure_kind=d.get("failure_kind"),
                            first_problem=(d["errors"] or [{}])[0].get("message", "")[:120],
                        )
                        stored = next((home / "uploads").glob(f"*/{d['sha256']}*"), None)
                        if alone and stored is not None:
                            entry["alone"] = peak_of_job(home, stored, t.id, split)
                        if d.get("failure_kind") == "infra":
                            report["infra"].append(
                                {"task": t.id, "bomb": label, "errors": d["errors"][:2]}
                            )
                        size = len(json.dumps(d["errors"], ensure_ascii=False).encode())
                        report["longest_report_bytes"] = max(report["longest_report_bytes"], size)
                    else:
                        entry.update(
                            seconds=round(time.monotonic() - t0, 2),
                            refused=str(body.get("error", {}).get("message", ""))[:120],
                        )
                    report["bombs"][f"{t.id}: {label}"] = entry
        report["login_throttled_at"] = login_flood(base)
    finally:
        serve.terminate()
        try:
            serve.wait(30)
        except subprocess.TimeoutExpired:
            serve.kill()
    report["http"] = dict(report["http"])
    report["outcomes"] = dict(report["outcomes"])
    report["load_average"] = os.getloadavg()
    return report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-task", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--no-bombs", action="store_true")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    r = run(a.per_task, a.seed, a.workers, bombs_too=not a.no_bombs)
    if a.json:
        a.json.write_text(json.dumps(r, indent=2))
    print(json.dumps({k: v for k, v in r.items() if k != "bombs"}, indent=1))
    for k, v in r["bombs"].items():
        print(f"{k:<60} {json.dumps(v)}")


if __name__ == "__main__":
    main()
