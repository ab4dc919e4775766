"""A task's public files as a zip, for the web's `/tasks/<task>/data/<area>.zip` and the API's
`GET /tasks/<task>/download`, once `server.domain.download_rule.downloadable` allowed them.

On the data directory alone (the embedded default) the zip is built and sent by the web app, as
always. On a site with an object store it is not: the zip is put into the store once, under
`downloads/<task>/<digest>/<name>.zip` where the digest is the sha256 of its members' names and
contents (the same files give the same object; a changed file a new one), and the answer is a 302
to a presigned GET of it, valid `PALIMPSEST_S3_URL_SECONDS` (default 300). The bytes then go from
the store to the participant, not through the web app.

Hidden gold is never reachable that way: the release rule and the exposure check run first (a
split whose files would expose hidden gold is refused with 409 before anything is built), every
file of such a zip must lie inside the task's `public/` folder (anything else is refused here, so
no gold file can ever land in a zip handed out by URL), and `ObjectStore.presigned_get` signs only
a task's `public/` files and these zips. A store that does not answer falls back to sending the
zip from the web app (the files are in its data directory), logged.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

from flask import Response, redirect

from server import objectstore
from server.exceptions import StoreUnreachable
from server.settings import Settings
from tasks.store import TaskStore

log = logging.getLogger(__name__)

Member = tuple[str, "Path | bytes"]  # (name in the zip, a file or its bytes)

# sha256 of files already hashed, by (path, size, mtime, inode): a download hashes each file once
_HASHED: dict[tuple, str] = {}
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.zip$")


def _file_sha256(p: Path) -> str:
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns, st.st_ino)
    got = _HASHED.get(key)
    if got is None:
        h = hashlib.sha256()
        with p.open("rb") as f:
            while chunk := f.read(1024 * 1024):
                h.update(chunk)
        got = h.hexdigest()
        if len(_HASHED) > 20000:
            _HASHED.clear()
        _HASHED[key] = got
    return got


def digest(members: list[Member]) -> str:
    """The sha256 of a zip's member names and contents (what its object is named by)."""
    h = hashlib.sha256()
    for name, src in members:
        sha = hashlib.sha256(src).hexdigest() if isinstance(src, bytes) else _file_sha256(src)
        h.update(f"{name}\0{sha}\n".encode())
    return h.hexdigest()


def _check_public(settings: Settings, task_id: str, members: list[Member]) -> None:
    """Every file of a zip handed out by URL lies inside the task's public/ folder."""
    public = (TaskStore(task_id, settings.home).root / "public").resolve()
    for name, src in members:
        if isinstance(src, bytes):
            continue
        if public not in Path(src).resolve().parents:
            raise PermissionError(
                f"{task_id}: {name} is not one of the task's public files; "
                "it is never handed out by URL"
            )


def _write_zip(f, members: list[Member], stamp: tuple | None = None) -> None:
    with zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, src in members:
            if isinstance(src, bytes):
                if stamp is None:
                    zf.writestr(name, src)
                else:
                    zf.writestr(zipfile.ZipInfo(name, stamp), src, zipfile.ZIP_DEFLATED)
            elif stamp is None:
                zf.write(src, name)
            else:  # the same files give the same bytes
                info = zipfile.ZipInfo.from_file(src, name)
                info.date_time = stamp
                info.compress_type = zipfile.ZIP_DEFLATED
                with open(src, "rb") as fsrc, zf.open(info, "w") as dst:
                    shutil.copyfileobj(fsrc, dst, 1024 * 1024)


def stored_zip_url(settings: Settings, task_id: str, filename: str, members: list[Member]) -> str:
    """A presigned GET of the zip of `members` in the site's store, put there first when it is
    not there yet. Raises StoreUnreachable, or PermissionError for a file outside public/."""
    store = objectstore.store_for(settings)
    if store is None:
        raise ValueError("this site keeps its files in its data directory only")
    if not _NAME.match(filename):
        raise ValueError(f"bad download name {filename!r}")
    _check_public(settings, task_id, members)
    key = f"downloads/{task_id}/{digest(members)}/{filename}"
    if not store.exists(key):
        fd, tmp = tempfile.mkstemp(prefix="palimpsest-download-", suffix=".zip")
        try:
            with os.fdopen(fd, "wb") as f:
                _write_zip(f, members, stamp=(1980, 1, 1, 0, 0, 0))
            store.put_file(key, Path(tmp))
        finally:
            os.unlink(tmp)
    return store.presigned_get(key, expires=settings.s3_url_seconds, attachment=filename)


def zip_response(
    settings: Settings, task_id: str, filename: str, members: list[Member]
) -> Response:
    """The download: a 302 to a presigned GET of the zip in the site's store, or (no store, or
    one that does not answer) the zip itself."""
    if objectstore.store_for(settings) is not None:
        try:
            url = stored_zip_url(settings, task_id, filename, members)
        except StoreUnreachable as e:
            log.warning("download of %s sent by the web app: %s", filename, e)
        else:
            r = redirect(url, 302)
            r.headers["Cache-Control"] = "no-store"  # the URL expires; never cache the redirect
            return r
    buf = io.BytesIO()
    _write_zip(buf, members)
    return Response(
        buf.getvalue(),
        mimetype="application/zip",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )
