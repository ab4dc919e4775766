"""Large uploads through the object store's presigned multipart URLs."""

from __future__ import annotations

from pydantic import (
    Field,
)

from server.api_models.base import Model, Out
from server.api_models.submissions import UploadFields

# ----------------------------------------------------------------------------- large uploads


class LargeUploadIn(Model):
    """A large file to send straight to the object store in parts."""

    phase: str | None = Field(None, description="Default: the open test phase, else dev.")
    filename: str = Field("", max_length=255, description="The file's name (its suffix counts).")
    size: int = Field(ge=1, description="Bytes; refused above the site's upload limit.")


class LargeUploadPart(Model):
    number: int
    url: str = Field(description="Presigned PUT URL of the part (valid 24 hours).")


class LargeUploadOut(Out):
    upload: str = Field(description="The signed ticket of this upload (resume and complete it).")
    part_size: int = Field(description="Bytes of every part but the last.")
    size: int
    parts: list[LargeUploadPart] = Field(description="The parts still to send, with their URLs.")
    done: list[int] = Field(description="Numbers of the parts the store holds already.")


class LargeUploadTicket(Model):
    upload: str


class LargeUploadComplete(UploadFields):
    """Finish a large upload: the ticket and the submission's fields (as a plain upload's)."""

    upload: str
