"""Shared fixtures: the official releases in ../shared/data, imported once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("PALIMPSEST_SHARED_DATA", REPO.parent / "shared" / "data"))
TROTR = SHARED / "trotr" / "TRoTR"
SWISSGOV = SHARED / "swissgov-rsd"
LOCI = SHARED / "loci-similes"


def need(path: Path) -> Path:
    """Skip the test, saying why, when an official release is absent."""
    if not path.exists():
        pytest.skip(f"official release not found at {path} (set PALIMPSEST_SHARED_DATA)")
    return path


@pytest.fixture(scope="session")
def home(tmp_path_factory) -> Path:
    """A data directory with every task imported from the official releases."""
    from tasks.importers import import_task

    h = tmp_path_factory.mktemp("palimpsest-home")
    need(TROTR)
    need(SWISSGOV)
    need(LOCI)
    for tid in ("tric-binary", "tric-ranking", "trac"):
        import_task(tid, h, source=TROTR, fold=1)
    import_task("swissgov-rsd", h, source=SWISSGOV)
    import_task("loci-similes", h, query=LOCI / "hieronymus_samples.csv",
                source=LOCI / "vergil_samples.csv", gold=LOCI / "ground_truth.csv")
    return h
