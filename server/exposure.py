"""The exposure rule as the server asks it. The rule lives beside the task declarations
(tasks/exposure.py), since an import checks it before its files replace the old; the server checks
every phase and every download with it, and a data directory as a whole."""

from __future__ import annotations

from tasks.exposure import (  # noqa: F401 - the server's names for the rule
    Exposure,
    ExposureRefused,
    check_download,
    check_home,
    check_phase,
    check_tree,
    exposure,
    exposure_of_tree,
)
