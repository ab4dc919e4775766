"""The baselines' errors, apart so that every baselines module can raise them without a circle."""

from __future__ import annotations

from scorer.errors import PalimpsestError


class ModelNotFound(PalimpsestError):
    """A model given by name or path that cannot be found on this machine."""


class BaselineError(PalimpsestError):
    """A baseline that cannot run as asked (wrong system for a task, wrong kind of model)."""
