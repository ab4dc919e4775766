"""The declared shapes of `/api/v1`: every request body and every answer is one of these pydantic
models, and the OpenAPI 3.1 description (server/api/openapi.py) is generated from them.

Answers are built by validating into these models (`out(Model, ...)`), so an answer that strays
from its declaration fails in the server, not in a client. Leaderboards and published snapshots are
served byte for byte from their render cache and snapshot rows; their models are the board's own
(server.boards.board_model), and the tests check every served board against them.
"""

from __future__ import annotations

import importlib

# one namespace for the declared models (`from server import api_models as m`; `m.PhaseOut`),
# written in the modules below by subject. The namespace fills on the first name asked of it, with
# every public name of every module (as `from module import *` in this order would); a module
# imported by itself (`from server.api_models import competitions`) loads alone: a local command
# that lists competitions does not build the other hundred models.
SUBJECTS = (
    "base",
    "boards",
    "campaigns",
    "competitions",
    "people",
    "submissions",
    "tasks",
    "uploads",
)


def _fill() -> None:
    for subject in SUBJECTS:
        module = importlib.import_module(f"{__name__}.{subject}")
        globals().update((k, v) for k, v in vars(module).items() if not k.startswith("_"))
    globals()["_FILLED"] = True


def __getattr__(name: str):
    if name in SUBJECTS:  # a module of its own (the import system asks before importing it)
        return importlib.import_module(f"{__name__}.{name}")
    if not globals().get("_FILLED"):
        _fill()
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    if not globals().get("_FILLED"):
        _fill()
    return sorted(globals())
