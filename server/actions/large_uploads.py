"""Large uploads straight into the object store through presigned multipart URLs.

A client starts one (`start`): the server checks who may submit and the size against the limit,
opens a multipart upload under `incoming/<uuid>` in the store and answers with a signed ticket and
one presigned PUT URL per part. The client sends the parts to the store (never through the web
app), asks which parts the store already holds (`parts`) to resume after a dropped connection,
and finishes (`complete`): the server completes the multipart upload, checks the size again,
streams the object into the site's uploads (content-addressed, the limit enforced while reading)
and takes the submission as the plain upload does (`server.actions.submissions.submit`); the
incoming object is deleted after. Nothing is scored before that.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timedelta, timezone

from itsdangerous import BadSignature, URLSafeSerializer
from sqlmodel import Session

from server import api_models as m
from server import objectstore
from server.actions import common
from server.actions.common import action
from server.actions.submissions import submit
from server.exceptions import LifecycleRefused, NotFound, PhaseClosed, UploadTooLarge
from server.models import User, utcnow
from server.storage import safe_suffix

MIN_PART = 8 * 1024 * 1024  # S3's floor is 5 MiB; EvalAI's CLI sends 20 MB parts
MAX_PARTS = 10_000
URL_SECONDS = 24 * 3600


def _store(settings):
    store = objectstore.store_for(settings)
    if store is None:
        raise LifecycleRefused(
            "this site keeps no object store: send the file as a plain upload", "no_store"
        )
    return store


def _ticket(settings) -> URLSafeSerializer:
    return URLSafeSerializer(settings.secret_key, salt="palimpsest-large-upload")


def _read(settings, user: User, ticket: str) -> dict:
    try:
        t = _ticket(settings).loads(ticket)
    except BadSignature:
        raise NotFound(
            "no such large upload (the ticket is not this site's)", "no_upload"
        ) from None
    if t.get("user") != user.id:
        raise NotFound("no such large upload of yours", "no_upload")
    return t


def _urls(store, t: dict, numbers) -> list[dict]:
    return [
        {
            "number": n,
            "url": store.signer.generate_presigned_url(
                "upload_part",
                Params={
                    "Bucket": store.bucket,
                    "Key": t["key"],
                    "UploadId": t["upload_id"],
                    "PartNumber": n,
                },
                ExpiresIn=URL_SECONDS,
            ),
        }
        for n in numbers
    ]


def _done(store, t: dict) -> dict[int, dict]:
    got = {}
    kw = {"Bucket": store.bucket, "Key": t["key"], "UploadId": t["upload_id"]}
    while True:
        r = store._call("listing the parts", store.client.list_parts, **kw)
        for p in r.get("Parts", []):
            got[int(p["PartNumber"])] = {"ETag": p["ETag"], "size": int(p["Size"])}
        if not r.get("IsTruncated"):
            return got
        kw["PartNumberMarker"] = r["NextPartNumberMarker"]


@action
def start(
    *, s: Session, user: User, task_id: str, phase: str | None, filename: str, size: int, settings
) -> m.LargeUploadOut:
    """Open a multipart upload for a participant's file of `size` bytes (refused above the
    site's limit); no row is written until `complete`."""
    task = common.task(task_id)
    common.require_participant(s, user, task.id)
    ph = common.phase_or_default(s, task.id, phase)
    # a phase that would refuse the run refuses its upload before a byte reaches the store
    now = utcnow()
    if (ph.opens_at and now < ph.opens_at) or (ph.closes_at and now >= ph.closes_at):
        raise PhaseClosed(
            f"the {ph.name} phase of {task.id} takes no runs now (it "
            + (f"opens at {ph.opens_at:%Y-%m-%d %H:%M} UTC)" if ph.opens_at and now < ph.opens_at
               else f"closed at {ph.closes_at:%Y-%m-%d %H:%M} UTC)"),
            None,
        )  # fmt: skip
    if ph.accepts == "code":
        raise LifecycleRefused(
            f"the {ph.name} phase of {task.id} takes systems, run on the server, not prediction "
            f"files: `palimpsest submit {task.id} --code DIR`",
            "code_only",
        )
    if size < 1:
        raise UploadTooLarge("the file is empty")
    if size > settings.max_upload_bytes:
        raise UploadTooLarge(
            f"the file ({size} bytes) is over the limit of {settings.max_upload_bytes} bytes"
        )
    store = _store(settings)
    part = max(MIN_PART, math.ceil(size / MAX_PARTS))
    n = math.ceil(size / part)
    key = f"incoming/{uuid.uuid4().hex}{safe_suffix(filename)}"
    r = store._call(
        "opening a multipart upload",
        store.client.create_multipart_upload,
        Bucket=store.bucket,
        Key=key,
    )
    t = {
        "key": key,
        "upload_id": r["UploadId"],
        "user": user.id,
        "task": task.id,
        "phase": ph.name,
        "filename": filename,
        "size": size,
        "part_size": part,
        "parts": n,
    }
    return m.LargeUploadOut(
        upload=_ticket(settings).dumps(t),
        part_size=part,
        size=size,
        parts=[m.LargeUploadPart(**p) for p in _urls(store, t, range(1, n + 1))],
        done=[],
    )


def parts(*, user: User, ticket: str, settings) -> m.LargeUploadOut:
    """Which parts the store holds already, with fresh URLs for the others (to resume)."""
    t = _read(settings, user, ticket)
    store = _store(settings)
    done = _done(store, t)
    missing = [n for n in range(1, t["parts"] + 1) if n not in done]
    return m.LargeUploadOut(
        upload=ticket,
        part_size=t["part_size"],
        size=t["size"],
        parts=[m.LargeUploadPart(**p) for p in _urls(store, t, missing)],
        done=sorted(done),
    )


@action
def complete(*, s: Session, user: User, ticket: str, fields: m.UploadFields, settings):
    """Complete the multipart upload and take it as a submission (see the module docstring);
    returns what `submit` returns."""
    t = _read(settings, user, ticket)
    store = _store(settings)
    done = _done(store, t)
    missing = [n for n in range(1, t["parts"] + 1) if n not in done]
    if missing:
        raise LifecycleRefused(
            f"{len(missing)} part(s) of the upload are not in the store yet (first: "
            f"{missing[0]}); send them, then complete",
            "parts_missing",
        )
    # each part the size announced: a larger one is refused, and its space freed
    for n in sorted(done):
        want = t["part_size"] if n < t["parts"] else t["size"] - t["part_size"] * (t["parts"] - 1)
        if n > t["parts"] or done[n]["size"] != want:
            abort(store, t["key"], t["upload_id"])
            raise UploadTooLarge(
                f"part {n} of the upload holds {done[n]['size']} bytes, not the "
                f"{want if n <= t['parts'] else 0} announced: the upload is aborted; start again"
            )
    store._call(
        "completing the multipart upload",
        store.client.complete_multipart_upload,
        Bucket=store.bucket,
        Key=t["key"],
        UploadId=t["upload_id"],
        MultipartUpload={
            "Parts": [{"PartNumber": n, "ETag": done[n]["ETag"]} for n in sorted(done)]
        },
    )
    try:
        size = store.size(t["key"])
        if size != t["size"] or size > settings.max_upload_bytes:
            raise UploadTooLarge(
                f"the store holds {size} bytes, not the {t['size']} announced (limit "
                f"{settings.max_upload_bytes})"
            )
        fields = fields.model_copy(update={"phase": t["phase"]})
        # streamed from the store into a temporary file (the upload path reads a seekable file)
        tmpdir = settings.home / "uploads" / "tmp"
        tmpdir.mkdir(parents=True, exist_ok=True)
        local = store.download(t["key"], tmpdir / f"large-{uuid.uuid4().hex}")
        try:
            with open(local, "rb") as body:
                return submit(
                    s=s,
                    user=user,
                    task_id=t["task"],
                    fields=fields,
                    stream=body,
                    filename=t["filename"],
                    settings=settings,
                )
        finally:
            local.unlink(missing_ok=True)
    finally:
        try:
            store._call("removing the incoming file", store.client.delete_object,
                        Bucket=store.bucket, Key=t["key"])  # fmt: skip
        except Exception:  # noqa: BLE001 - a leftover incoming object is only space
            pass


def abort(store, key: str, upload_id: str) -> None:
    """Abort a multipart upload: the store drops its parts."""
    try:
        store._call(
            "aborting a multipart upload",
            store.client.abort_multipart_upload,
            Bucket=store.bucket,
            Key=key,
            UploadId=upload_id,
        )
    except FileNotFoundError:  # gone already
        pass


def abort_stale(settings, older_than: float = URL_SECONDS) -> int:
    """Abort the multipart uploads under `incoming/` started more than `older_than` seconds ago
    (their part URLs have expired: nobody can finish them); how many. The reconciler's step."""
    store = objectstore.store_for(settings)
    if store is None:
        return 0
    cutoff = datetime.now(timezone.utc) - timedelta(seconds=older_than)
    n = 0
    kw = {"Bucket": store.bucket, "Prefix": "incoming/"}
    while True:
        r = store._call("listing multipart uploads", store.client.list_multipart_uploads, **kw)
        for u in r.get("Uploads", []):
            started = u.get("Initiated")
            if started is not None and started.tzinfo is None:
                started = started.replace(tzinfo=timezone.utc)
            if started is not None and started < cutoff:
                abort(store, u["Key"], u["UploadId"])
                n += 1
        if not r.get("IsTruncated"):
            return n
        kw["KeyMarker"] = r.get("NextKeyMarker", "")
        kw["UploadIdMarker"] = r.get("NextUploadIdMarker", "")
