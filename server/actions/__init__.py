"""The action layer: every participant and organizer action, written once.

Each action is a keyword-only function that resolves what it acts on, checks that the actor may
do it, changes state through `server.domain.lifecycle` (which audits each change), enqueues what
needs a
worker, and returns a declared pydantic model. The web views, the REST API, the remote CLI (over
the API) and the local CLI (`palimpsest phases ...` on the server machine, against the local
database) only translate to and from these functions.

`actor` is the signed-in `User`, or None for the operator at the server's own shell (the local
CLI), who may do everything an organizer may.
"""
