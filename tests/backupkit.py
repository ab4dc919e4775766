"""The backup tests' steps: the command line run in-process, an archive rewritten (and signed again
as one holding the key could)."""

from __future__ import annotations

import io
import json
import tarfile

from click.testing import CliRunner


def _cli(*args, env=None):
    from cli.main import main

    return CliRunner().invoke(main, list(args), env=env or {}, catch_exceptions=False)


def _rewrite(src, dst, change, key=None):
    """A copy of an archive with `change(name, data, manifest) -> data or None (dropped)`; its
    manifest signed again with `key` when given (as one who holds the key could)."""
    from server.backup.common import sign

    with tarfile.open(src) as tin:
        m = json.loads(tin.extractfile("manifest.json").read())
        members = [(i, tin.extractfile(i).read()) for i in tin.getmembers() if i.isfile()]
    with tarfile.open(dst, "w") as tout:
        for info, data in members:
            if info.name == "manifest.json":
                continue
            data = change(info.name, data, m)
            if data is None:
                continue
            info.size = len(data)
            tout.addfile(info, io.BytesIO(data))
        if key is not None:
            m = sign({k: v for k, v in m.items() if k != "signature"}, key)
        data = json.dumps(m).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(data)
        tout.addfile(info, io.BytesIO(data))


def _with_member(src, dst, member, data, key):
    """A copy of an archive with one more member `member` (bytes `data`) listed in its manifest,
    signed again with `key` (as a `backup` that wrote such a member would have signed it)."""
    import hashlib

    from server.backup.common import sign

    with tarfile.open(src) as tin:
        m = json.loads(tin.extractfile("manifest.json").read())
        members = [(i, tin.extractfile(i).read()) for i in tin.getmembers() if i.isfile()]
    m["members"][member] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    m = sign({k: v for k, v in m.items() if k != "signature"}, key)
    with tarfile.open(dst, "w") as tout:
        for info, body in members:
            if info.name != "manifest.json":
                tout.addfile(info, io.BytesIO(body))
        info = tarfile.TarInfo(member)
        info.size = len(data)
        tout.addfile(info, io.BytesIO(data))
        body = json.dumps(m).encode()
        info = tarfile.TarInfo("manifest.json")
        info.size = len(body)
        tout.addfile(info, io.BytesIO(body))
