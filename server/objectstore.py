"""Where a site's files live: the data directory alone (the embedded default), or an S3-compatible
object store (SeaweedFS, MinIO, AWS S3) through boto3, with the data directory as its cache.

With `PALIMPSEST_S3_BUCKET` set, the store holds the truth under the same paths as the data
directory (`uploads/<sha256[:2]>/<sha256><suffix>`, `tasks/<id>/...`):

- an upload is put into the store before its submission row is committed; a store that does not
  take it refuses the upload (503, `store_unreachable`) and leaves nothing behind (no row, no
  local file);
- a task's files (public files, hidden gold, gold history, `task.json`) are pushed by every import
  (a bundle's before its competition's rows are written; `palimpsest tasks import` and the demo's
  tasks right after their files are in place: `push_tasks`) and after an assessment campaign
  writes a new gold version; `palimpsest store push` puts whatever is still missing;
- a worker on another machine, with an empty data directory of its own, fetches a run's upload and
  its task's files from the store before scoring (`local_upload`, `ensure_task`); it needs nothing
  but the database, Redis and the store.

Reads stream (`download_fileobj` into a temporary file renamed into place): no file is read whole
into memory because it came from the store. Hidden gold is never handed out by URL: `presigned_get`
signs only a task's `public/` files and the zips of them under `downloads/` (server.web.downloads: a
released download answers with a 302 to one).
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import shutil
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import quote, urlsplit

from server.exceptions import StoreUnreachable
from server.settings import Settings
from server.storage import path_for
from tasks.declared import DECLARATION, touch
from tasks.store import TaskStore, tree_sha256

# The data directory's areas the store holds that nothing makes again: what a restore and
# `palimpsest store push` put into it, everything a web process or a worker on an empty data
# directory of its own reads from it (the published pairwise matrices under rankings/ included).
# The store's other keys are made again when asked for: the statistics' caches (stats/), the zips
# of public files (downloads/); incoming/ holds large uploads not completed.
STORED_AREAS = ("uploads", "tasks", "baselines", "rankings")
PUBLIC_PREFIXES = ("tasks/", "downloads/")  # and only their public files: see is_public_key


# a file under this size is put in one request (boto3's multipart threshold, 8 MiB)
SMALL = 8 * 2**20


def into_place(dest: Path, fill) -> Path:
    """Write `dest` through `fill(f)` into a temporary file beside it, renamed into place: a
    reader never sees half a file, and a failed write leaves nothing."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".fetch-")
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return dest


class ObjectStore:
    """One bucket of an S3-compatible store."""

    def __init__(
        self,
        bucket: str,
        endpoint: str | None,
        region: str = "us-east-1",
        access_key: str | None = None,
        secret_key: str | None = None,
        path_style: bool = True,
        public_endpoint: str | None = None,
    ):
        # boto3 loads only on a site with a store
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.endpoint = endpoint

        def client(url):
            return boto3.client(
                "s3",
                endpoint_url=url,
                region_name=region,
                aws_access_key_id=access_key,
                aws_secret_access_key=secret_key,
                config=Config(
                    s3={"addressing_style": "path" if path_style else "auto"},
                    connect_timeout=3,
                    read_timeout=60,
                    retries={"max_attempts": 2, "mode": "standard"},
                    signature_version="s3v4",
                ),
            )

        self.client = client(endpoint)
        # presigned URLs are signed for the address participants reach (it never connects)
        self.signer = client(public_endpoint) if public_endpoint else self.client
        # a store of its own address, path-style, with its keys given: its small objects' GET,
        # PUT and HEAD signed by botocore's signer and sent with http.client, without botocore's
        # client machinery (`Direct`)
        self.direct = (
            Direct(endpoint, bucket, region, access_key, secret_key)
            if endpoint and path_style and access_key and secret_key
            else None
        )

    def __repr__(self) -> str:
        return f"ObjectStore({self.endpoint or 'aws'}/{self.bucket})"

    def _unreachable(self, what: str, e: Exception) -> StoreUnreachable:
        if "NoSuchBucket" in str(e) or "bucket does not exist" in str(e):
            return StoreUnreachable(
                f"the object store {self.endpoint or 'S3'} has no bucket {self.bucket!r} (while "
                f"{what}): create it ({self.how_to_create()}); nothing was recorded",
                code="store_no_bucket",
            )
        return StoreUnreachable(
            f"the object store {self.endpoint or 'S3'} (bucket {self.bucket}) did not answer "
            f"while {what} ({type(e).__name__}: {e}); nothing was recorded, try again later"
        )

    def how_to_create(self) -> str:
        """How an operator creates the bucket: with any S3 client, or SeaweedFS's shell (which
        must be told its master's address and gRPC port unless they are the defaults)."""
        return (
            f"`aws --endpoint-url {self.endpoint} s3 mb s3://{self.bucket}`, or on SeaweedFS "
            f"`s3.bucket.create -name {self.bucket}` in `weed shell -master=HOST:PORT.GRPCPORT` "
            "(the master's address, HTTP and gRPC ports, e.g. `-master=10.0.0.5:9333.19333`)"
        )

    def _call(self, what: str, fn, *a, **kw):
        from boto3.exceptions import Boto3Error  # with boto3, above (an upload's failure)
        from botocore.exceptions import BotoCoreError, ClientError  # with boto3, likewise

        try:
            return fn(*a, **kw)
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code in ("404", "NoSuchKey", "NotFound"):
                raise FileNotFoundError(what) from None
            raise self._unreachable(what, e) from None
        except (BotoCoreError, Boto3Error, OSError) as e:
            raise self._unreachable(what, e) from None

    def put_file(self, key: str, path: Path) -> None:
        """Put a file (multipart above 8 MiB, boto3's default): the object appears whole or not at
        all. A smaller file is one PUT of its bytes (no transfer manager, whose threads a forked
        job would start for each file)."""
        if path.stat().st_size < SMALL:
            self.put_bytes(key, path.read_bytes())
            return
        self._call(f"storing {key}", self.client.upload_file, str(path), self.bucket, key)

    def put_bytes(self, key: str, body: bytes) -> None:
        """Put a small object (under 8 MiB) in one PUT: signed and sent directly where the store
        allows (`Direct`), else through boto3, which also answers any refusal."""
        if self.direct is not None and self.direct.put(key, body):
            return
        self._call(f"storing {key}", self.client.put_object, Bucket=self.bucket, Key=key, Body=body)

    def get_bytes(self, key: str) -> bytes:
        """A small object's bytes (a manifest, a declaration): one GET, direct where the store
        allows; FileNotFoundError when it is not there."""
        if self.direct is not None:
            got = self.direct.get(key)
            if got is not None:
                return got
        return self.open(key).read()

    def warm(self) -> None:
        """Build here what the client builds on its first request and its first use of each
        operation (its endpoint's rules, the signer, the operations' shapes): a worker's parent
        calls this before forking its jobs, which then build none of it. Two requests (the
        bucket, an object that is not there); the connection they opened is closed (a forked job
        opens its own)."""
        model = self.client.meta.service_model
        for name in ("GetObject", "PutObject", "HeadObject", "ListObjectsV2", "DeleteObject"):
            op = model.operation_model(name)
            for shape in (op.input_shape, op.output_shape):
                if shape is not None:
                    for member in shape.members.values():
                        getattr(member, "members", None)
            op.idempotent_members  # noqa: B018 — computed once, kept by the model
        try:
            self.client.head_bucket(Bucket=self.bucket)
            try:  # not there: what a read that finds nothing parses
                self._call("warming", self.client.get_object, Bucket=self.bucket, Key=".warm")
            except FileNotFoundError:
                pass
            if self.direct is not None:
                self.direct.head(".warm")
        finally:
            self.client.close()
            if self.direct is not None:
                self.direct.close()

    def bucket_exists(self) -> bool:
        """Whether the bucket is there (False when the store answers that it is not)."""
        from botocore.exceptions import ClientError  # with boto3, above

        try:
            self._call("looking up the bucket", self.client.head_bucket, Bucket=self.bucket)
            return True
        except FileNotFoundError:
            return False
        except StoreUnreachable as e:
            cause = e.__cause__ or e.__context__
            if isinstance(cause, ClientError) and "NoSuchBucket" in str(cause):
                return False
            raise

    def exists(self, key: str) -> bool:
        try:
            self._call(f"looking up {key}", self.client.head_object, Bucket=self.bucket, Key=key)
            return True
        except FileNotFoundError:
            return False

    def size(self, key: str) -> int | None:
        if self.direct is not None:
            got = self.direct.head(key)
            if got is not None:
                return got if got >= 0 else None
        try:
            h = self._call(
                f"looking up {key}", self.client.head_object, Bucket=self.bucket, Key=key
            )
        except FileNotFoundError:
            return None
        return int(h["ContentLength"])

    def download(self, key: str, dest: Path) -> Path:
        """Stream an object into `dest` (a temporary file renamed into place)."""
        return into_place(dest, lambda f: self._call(f"fetching {key}", self._copy, key, f))

    def _copy(self, key: str, f) -> None:
        """An object's bytes into `f`: one GET, its body read as it comes (checked against its
        length), without boto3's transfer manager and its threads."""
        body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        try:
            shutil.copyfileobj(body, f, 1 << 20)
        finally:
            body.close()

    def open(self, key: str):
        """A stream of an object's bytes (read it in chunks)."""
        r = self._call(f"reading {key}", self.client.get_object, Bucket=self.bucket, Key=key)
        return r["Body"]

    def keys(self, prefix: str) -> Iterator[tuple[str, int]]:
        """(key, size) of every object under `prefix`."""
        for key, size, _ in self.listing(prefix):
            yield key, size

    def listing(self, prefix: str) -> Iterator[tuple[str, int, datetime]]:
        """(key, size, last modified) of every object under `prefix`."""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        )
        it = iter(pages)
        while True:
            try:
                page = self._call(f"listing {prefix}", next, it)
            except StopIteration:
                return
            for o in page.get("Contents", []):
                yield o["Key"], int(o["Size"]), o["LastModified"]

    def delete(self, key: str) -> None:
        """Delete an object (one that is not there is no error: S3 answers a delete the same)."""
        self._call(f"deleting {key}", self.client.delete_object, Bucket=self.bucket, Key=key)

    def presigned_get(self, key: str, expires: int = 3600, attachment: str | None = None) -> str:
        """A URL that reads a public file for `expires` seconds (saved as `attachment` when
        given); refused for anything but a task's public files and the zips of them that
        server.web.downloads puts under `downloads/` (hidden gold never leaves through a URL)."""
        if not is_public_key(key):
            raise PermissionError(f"{key}: only a task's public files are handed out by URL")
        params = {"Bucket": self.bucket, "Key": key}
        if attachment:
            params["ResponseContentDisposition"] = f'attachment; filename="{attachment}"'
        return self.signer.generate_presigned_url("get_object", Params=params, ExpiresIn=expires)


class Direct:
    """GET, PUT and HEAD of small objects on a store of its own address (path-style, its keys
    given), without botocore's events, endpoint rules and response parsing (in a forked scoring
    job, each request through botocore cost 4-9 ms of CPU, much of it copy-on-write faults of the
    objects it touches; profiled). Each request is signed by botocore's own signer
    (`S3SigV4Auth`, AWS Signature Version 4, the payload's sha256 signed too, which the store
    checks), built once with the store (a worker's parent, before it forks its jobs), and sent
    with the standard library's http.client on one kept connection per thread and process.
    Only a plain answer is taken here: anything else (an error status, a refused connection, no
    answer within 3 s) returns None, and the caller asks boto3, which retries and says what went
    wrong as before (a PUT or GET sent again is the same request)."""

    def __init__(
        self,
        endpoint: str,
        bucket: str,
        region: str,
        access_key: str,
        secret_key: str,
        session_token: str | None = None,
    ):
        # botocore loads with boto3, only on a site with a store: its signer and request class
        from botocore.auth import S3SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        self._aws_request = AWSRequest

        u = urlsplit(endpoint)
        self.https = u.scheme == "https"
        self.netloc = u.netloc
        self.base = f"{u.scheme}://{u.netloc}"
        self.prefix = u.path.rstrip("/") + "/" + quote(bucket, safe="") + "/"
        self.signer = S3SigV4Auth(
            Credentials(access_key, secret_key, session_token), "s3", region or "us-east-1"
        )
        # https: the certificates boto3's client checks the store's against (AWS_CA_BUNDLE or a
        # profile's ca_bundle, else REQUESTS_CA_BUNDLE, else certifi's bundle)
        self.ssl = _ssl_context() if self.https else None
        self._local = threading.local()  # a connection per thread (and per process: its pid)
        self.quote = quote

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn[1].close()
        self._local.conn = None

    def path(self, key: str) -> str:
        """The object's path, percent-encoded as S3 signs it (`/` kept, `~` unreserved)."""
        return self.prefix + self.quote(key, safe="/~")

    def headers(self, method: str, key: str, body: bytes) -> dict:
        """The request's signed headers: botocore's SigV4 signer over the method, the path, the
        host, the date and the payload's sha256 (and the session token when there is one)."""
        req = self._aws_request(
            method=method,
            url=self.base + self.path(key),
            data=body,
            headers={"Host": self.netloc},
        )
        self.signer.add_auth(req)
        return dict(req.headers.items())

    def _request(self, method: str, key: str, body: bytes = b""):
        """(status, headers, body) of one request, or None when it did not go through (tried
        twice: a kept connection the store closed meanwhile is opened again)."""
        for _ in range(2):
            kept = getattr(self._local, "conn", None)
            if kept is None or kept[0] != os.getpid():
                if self.https:
                    conn = http.client.HTTPSConnection(self.netloc, timeout=3, context=self.ssl)
                else:
                    conn = http.client.HTTPConnection(self.netloc, timeout=3)
                kept = self._local.conn = (os.getpid(), conn)
                fresh = True
            else:
                fresh = False
            try:
                kept[1].request(
                    method,
                    self.path(key),
                    body=body if method == "PUT" else None,
                    headers=self.headers(method, key, body),
                )
                r = kept[1].getresponse()
                data = r.read()
                if r.will_close:
                    self.close()
                return r.status, r, data
            except (OSError, http.client.HTTPException):
                self.close()
                if fresh:  # not a kept connection gone stale: boto3 says what is wrong
                    return None
        return None

    def get(self, key: str) -> bytes | None:
        got = self._request("GET", key)
        return got[2] if got is not None and got[0] == 200 else None

    def put(self, key: str, body: bytes) -> bool:
        got = self._request("PUT", key, body)
        return got is not None and got[0] == 200

    def head(self, key: str) -> int | None:
        """The object's size, -1 when the store says it is not there, None when unsure."""
        got = self._request("HEAD", key)
        if got is None:
            return None
        if got[0] == 200:
            return int(got[1].getheader("Content-Length", "-1"))
        return -1 if got[0] == 404 else None


def _ssl_context():
    """An SSL context that checks a store's certificate as boto3's client does: the CA bundle of
    the environment's AWS configuration (`AWS_CA_BUNDLE`, a profile's `ca_bundle`), else
    `REQUESTS_CA_BUNDLE`, else the bundle botocore ships with (certifi's)."""
    # botocore loads with boto3, only on a site with a store
    import botocore.session
    from botocore.httpsession import get_cert_path

    verify = botocore.session.get_session().get_config_variable("ca_bundle")
    if verify is None:
        verify = os.environ.get("REQUESTS_CA_BUNDLE") or True
    return ssl.create_default_context(cafile=get_cert_path(verify))


def is_public_key(key: str) -> bool:
    """Whether a key may be handed out by URL: `tasks/<task>/public/...`, or a zip of public
    files `downloads/<task>/<sha256>/<name>.zip` (written only by server.web.downloads, which checks
    that every file of it is under the task's public/)."""
    parts = key.split("/")
    if ".." in parts or "" in parts or "." in parts:
        return False
    if len(parts) >= 4 and parts[0] == "tasks" and parts[2] == "public":
        return True
    return (
        len(parts) == 4
        and parts[0] == "downloads"
        and len(parts[2]) == 64
        and all(c in "0123456789abcdef" for c in parts[2])
        and parts[3].endswith(".zip")
    )


@functools.lru_cache(maxsize=8)
def _store(bucket, endpoint, region, access_key, secret_key, path_style, public) -> ObjectStore:
    return ObjectStore(bucket, endpoint, region, access_key, secret_key, path_style, public)


def store_for(settings: Settings) -> ObjectStore | None:
    """The site's object store, or None (the data directory only)."""
    if not settings.s3_bucket:
        return None
    return _store(
        settings.s3_bucket,
        settings.s3_endpoint,
        settings.s3_region,
        settings.s3_access_key,
        settings.s3_secret_key,
        settings.s3_path_style,
        settings.s3_public_endpoint,
    )


# ----------------------------------------------------------------------------- uploads


# an upload up to this size is put without asking first whether the store has it (a PUT of the
# same content-addressed key is the same object): one request instead of two
ASK_FIRST_ABOVE = 2**20


def push_upload(settings: Settings, key: str, data: bytes | None = None) -> None:
    """Put a stored upload into the store (content-addressed: one already there is the same):
    this machine's file, or `data`, its bytes (a small file's, from memory)."""
    store = store_for(settings)
    if store is None:
        return
    name = f"uploads/{key}"
    if data is not None:
        store.put_bytes(name, data)
        return
    local = path_for(settings.home, key)
    size = local.stat().st_size
    if size > ASK_FIRST_ABOVE and store.size(name) == size:
        return
    store.put_file(name, local)


# the threads that put uploads into the store while their request goes on with its database
# work (`push_upload_soon`), started once per process
PUSH_THREADS = 4
_push_pool: tuple[int, ThreadPoolExecutor] | None = None
_push_lock = threading.Lock()


def _pusher() -> ThreadPoolExecutor:
    global _push_pool
    with _push_lock:
        if _push_pool is None or _push_pool[0] != os.getpid():
            pool = ThreadPoolExecutor(PUSH_THREADS, thread_name_prefix="palimpsest-upload-push")
            _push_pool = (os.getpid(), pool)
        return _push_pool[1]


def push_upload_soon(settings: Settings, key: str, ready) -> Callable[[], None]:
    """`push_upload` in a thread of its own once `ready()` returns (the file is in place): the
    caller's request does its database work meanwhile. Returns what waits for the push and raises
    what it raised (StoreUnreachable): called before the commit of a row that names the upload,
    so that no row names an upload the store lacks."""

    def push() -> None:
        ready()
        push_upload(settings, key)

    return _pusher().submit(push).result


def push_bytes_soon(settings: Settings, key: str, data: bytes) -> Callable[[], None]:
    """A small upload's bytes put into the store in a thread of its own, from memory (while the
    file is made durable on this machine); returns what waits for it, as `push_upload_soon`."""
    return _pusher().submit(lambda: push_upload(settings, key, data)).result


def delete_upload(settings: Settings, key: str) -> None:
    """Delete a stored upload everywhere this machine can: its data directory and, on a site with
    a store, the store (where every other machine fetches it from). Raises StoreUnreachable (the
    local file is gone then, the store's copy not yet: the caller tries again)."""
    path_for(settings.home, key).unlink(missing_ok=True)
    store = store_for(settings)
    if store is not None:
        store.delete(f"uploads/{key}")


def drop_local_copy(settings: Settings, key: str) -> None:
    """On a site with a store, forget this machine's copy of an upload (the store keeps it and
    `local_upload` fetches it again if it is ever needed); without a store, nothing."""
    if store_for(settings) is not None:
        path_for(settings.home, key).unlink(missing_ok=True)


def purge_stale_downloads(settings: Settings, *, grace: timedelta = timedelta(days=1)) -> int:
    """Delete the zips of public files (`downloads/<task>/<digest>/<name>.zip`, written by
    server.web.downloads) that a newer zip of the same name replaced more than `grace` ago (a task
    updated: its files' digest changed). The newest zip of each (task, name) stays; a presigned
    URL of an older one lives `PALIMPSEST_S3_URL_SECONDS` (minutes), far less than the grace.
    Returns how many were deleted (0 without a store)."""
    store = store_for(settings)
    if store is None:
        return 0
    by_name: dict[tuple[str, str], list[tuple[datetime, str]]] = {}
    for key, _, modified in store.listing("downloads/"):
        parts = key.split("/")
        if len(parts) != 4:
            continue
        by_name.setdefault((parts[1], parts[3]), []).append((modified, key))
    now = datetime.now(timezone.utc)
    n = 0
    for versions in by_name.values():
        versions.sort()
        newest = versions[-1][0]
        for _modified, key in versions[:-1]:
            if now - newest > grace:  # replaced long enough ago for every URL of it to expire
                store.delete(key)
                n += 1
    return n


def keep_upload(settings: Settings, key: str, data: bytes) -> Path:
    """Put a stored upload's bytes, had from elsewhere than the store (and checked against the
    sha256 its key names by whoever had them), into this machine's data directory: a temporary
    file renamed into place, as a fetch does."""
    return into_place(path_for(settings.home, key), lambda f: f.write(data))


def local_upload(settings: Settings, key: str) -> Path:
    """The file of a stored upload in this machine's data directory, fetched from the store when
    it is not there yet."""
    p = path_for(settings.home, key)
    store = store_for(settings)
    if store is not None and not p.is_file():
        store.download(f"uploads/{key}", p)
    return p


# ----------------------------------------------------------------------------- task files


def push_tree(settings: Settings, rel: str) -> int:
    """Put every file under `<home>/<rel>` into the store under the same path whose size differs
    or is missing there, `task.json` files last (a reader that sees a new manifest finds the files
    it names); returns how many were put."""
    store = store_for(settings)
    if store is None:
        return 0
    base = settings.home / rel
    if not base.exists():
        return 0
    have = dict(store.keys(rel.rstrip("/") + "/"))
    files = sorted(
        (p for p in base.rglob("*") if p.is_file() and not p.name.startswith(".")),
        key=lambda p: (p.name == "task.json", str(p)),
    )
    n = 0
    for p in files:
        if any(part.startswith(".") for part in p.relative_to(settings.home).parts):
            continue
        key = p.relative_to(settings.home).as_posix()
        if have.get(key) != p.stat().st_size or _changed(store, key, p):
            store.put_file(key, p)
            n += 1
    return n


def push_tasks(settings: Settings, task_ids) -> int:
    """After tasks were imported into the data directory outside a bundle (`palimpsest tasks
    import`, the demo's synthetic tasks): put their files into the site's store, when it has one,
    so that a worker on another machine finds them; returns how many files were put (0 without a
    store). Raises StoreUnreachable: the import stands in the data directory, and `palimpsest
    store push` puts it later."""
    return sum(push_tree(settings, f"tasks/{t}") for t in task_ids)


def push_imported(task_id: str, home: Path | None = None) -> tuple[str, int] | None:
    """`palimpsest tasks import` on a site with a store (the settings of the environment, `home`
    as its data directory): the task's files go into the store too, so that a worker on another
    machine finds them. Returns (bucket, files put), or None without a store; a store that does
    not answer raises StoreUnreachable saying the import stands and what to run later."""
    settings = Settings(**({"home": home} if home is not None else {}))
    if store_for(settings) is None:
        return None
    try:
        return settings.s3_bucket, push_tasks(settings, [task_id])
    except StoreUnreachable as e:
        raise StoreUnreachable(
            f"{task_id} is imported into {settings.home}, but not into the object store: "
            f"{e.message} (run `palimpsest store push` when it answers)"
        ) from None


def _changed(store: ObjectStore, key: str, p: Path) -> bool:
    """Whether a same-sized object differs from the file (gold rewritten in place by a campaign):
    compared by bytes, streamed."""
    if p.stat().st_size > 64 * 1024 * 1024:
        return True  # large files are put again rather than read twice
    body = store.open(key)
    with p.open("rb") as f:
        while True:
            a = body.read(1024 * 1024)
            b = f.read(1024 * 1024)
            if a != b:
                return True
            if not a:
                return False


def ensure_task(settings: Settings, task_id: str) -> bool:
    """Bring a task's files from the store into this machine's data directory when they are
    missing or older than the store's (its `task.json` differs): fetched into a staging directory,
    checked against the manifest's gold checksums, then swapped in. Returns True when fetched."""
    store = store_for(settings)
    if store is None:
        return False
    local = TaskStore(task_id, settings.home)
    prefix = f"tasks/{task_id}/"
    try:
        remote = store.get_bytes(prefix + "task.json")
    except FileNotFoundError:
        return False
    if local.exists() and local.manifest_path.read_bytes() == remote:
        return False
    local.root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{task_id}-fetch-", dir=local.root.parent))
    try:
        for key, _size in store.keys(prefix):
            store.download(key, tmp / key[len(prefix) :])
        manifest = json.loads((tmp / "task.json").read_bytes())
        for split, sha in (manifest.get("gold_sha256") or {}).items():
            if tree_sha256(tmp / "gold" / split) != sha:
                raise StoreUnreachable(
                    f"the store's files of {task_id} are being replaced (gold of {split} does "
                    "not match its manifest yet); try again"
                )
        old = None
        if local.root.exists() or local.root.is_symlink():
            old = local.root.with_name(tmp.name + ".old")
            os.replace(local.root, old)
        os.replace(tmp, local.root)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return True
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ensure_public(settings: Settings, task_id: str) -> bool:
    """A task's manifest and public files from the store, never its gold: what a code worker on
    another machine needs to stage a run's inputs. Returns True when fetched."""
    store = store_for(settings)
    if store is None:
        return False
    local = TaskStore(task_id, settings.home)
    prefix = f"tasks/{task_id}/"
    try:
        remote = store.get_bytes(prefix + "task.json")
    except FileNotFoundError:
        return False
    if local.exists() and local.manifest_path.read_bytes() == remote:
        return False
    for key, _size in store.keys(prefix + "public/"):
        store.download(key, local.root / key[len(prefix) :])
    # a bundle's task travels with its declaration (its format, splits and metrics; no gold):
    # a code worker on an empty data directory then knows the task
    declared = False
    for key, _size in store.keys(prefix + DECLARATION):
        if key == prefix + DECLARATION:
            store.download(key, local.root / DECLARATION)
            declared = True
    local.manifest_path.parent.mkdir(parents=True, exist_ok=True)
    local.manifest_path.write_bytes(remote)  # last: a reader that sees it finds the files
    if declared:
        touch(settings.home)
    return True


def ensure_declared(settings: Settings, task_id: str) -> bool:
    """`ensure_task`, and the task's declaration too when only it changed in the store (a task's
    texts or boards rewritten in place leave its `task.json` as it was): what a web process on a
    data directory of its own calls to know a task another process created or changed
    (server.domain.task_sync). Returns True when anything was fetched."""
    store = store_for(settings)
    if store is None:
        return False
    fetched = ensure_task(settings, task_id)
    local = TaskStore(task_id, settings.home).root / DECLARATION
    key = f"tasks/{task_id}/{DECLARATION}"
    if not fetched:
        try:
            remote = store.get_bytes(key)
        except FileNotFoundError:
            return False
        if local.is_file() and local.read_bytes() == remote:
            return False
        local.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=local.parent, prefix=".fetch-")
        with os.fdopen(fd, "wb") as f:
            f.write(remote)
        os.replace(tmp, local)
    touch(settings.home)
    return True
