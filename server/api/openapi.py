"""The OpenAPI 3.1 description of `/api/v1`, generated: from the routes of the API blueprint, each
declared with `@op(...)` (its request and answer models, server/api_models/), by apispec.

Nothing here describes a shape by hand: the schemas are the pydantic models' own JSON Schema
(OpenAPI 3.1 is JSON Schema 2020-12), registered as components. The tests check that every API
route is declared, send requests generated from this description and check every answer.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from apispec import APISpec
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from server import api_models as m

REF = "#/components/schemas/{model}"
EXAMPLES = {
    "task_id": "tric-binary",
    "phase_name": "test",
    "submission_id": 1,
    "version": 1,
    "competition_id": "text-reuse-2027",
    "page": "overview",
}
TAGS = [
    ("competitions", "Shared tasks: their tasks and pages (anyone may read the visible ones)"),
    ("team", "You and your team"),
    ("tasks", "Tasks, their phases and inputs"),
    ("submissions", "Uploads, their status and scores, the primary run"),
    ("leaderboards", "Boards and published final rankings"),
    (
        "organizers",
        "Phases, publication, rescoring, hiding, exports, the audit log, baselines "
        "(an organizer's token)",
    ),
    (
        "assessment",
        "Assessment campaigns: the pool, assessors' items and judgments, agreement",
    ),
    ("runs", "Systems run blind on a phase's inputs in the sandbox, their stages and logs"),
    ("api", "This description"),
]
ERROR_TEXT = {
    400: "Bad input: a value out of range or holding a control character (`error.field` names it)",
    401: "No valid token",
    403: "Not allowed (organizers only, or not your team's)",
    404: "Not found",
    409: "Refused in the current state (see `error.code`)",
    413: "Upload too large",
    422: "The request or the file is not valid (every problem listed)",
    429: "A submission limit is reached (`next_allowed_at` says when)",
    503: "A queue the action needs is unreachable",
}


def op(
    summary: str,
    *,
    responses: dict[int, Any],
    query: type[BaseModel] | None = None,
    body: type[BaseModel] | None = None,
    form: type[BaseModel] | None = None,
    tags: tuple[str, ...] = (),
    errors: tuple[int, ...] = (),
    public: bool = False,
    description: str | None = None,
    path_enums: dict[str, list[str]] | None = None,
) -> Callable:
    """Declare an API operation: `responses` maps a status to a model, to a media type string for
    a non-JSON body (e.g. "application/zip"), or to None (no body); `path_enums` names the values
    a path parameter takes (an enum in the description)."""

    def deco(fn):
        fn._api = dict(
            summary=summary,
            path_enums=path_enums or {},
            responses=responses,
            query=query,
            body=body,
            form=form,
            tags=tags,
            errors=errors,
            public=public,
            description=description or (fn.__doc__ or "").strip() or None,
        )
        return fn

    return deco


def _openapi_path(rule: str) -> tuple[str, list[tuple[str, str]]]:
    params = []

    def sub(mo):
        conv, name = mo.group(1), mo.group(2)
        params.append((name, "integer" if conv == "int" else "string"))
        return "{" + name + "}"

    return re.sub(r"<(?:(\w+):)?(\w+)>", sub, rule), params


def _refs(schema):
    return {"$ref": REF.format(model=schema)} if isinstance(schema, str) else schema


def spec(app) -> dict:
    ops = []
    for rule in sorted(app.url_map.iter_rules(), key=lambda r: r.rule):
        if not rule.endpoint.startswith("api."):
            continue
        fn = app.view_functions[rule.endpoint]
        meta = getattr(fn, "_api", None)
        if meta is None:
            raise RuntimeError(f"API route {rule.rule} has no @op declaration")
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            ops.append((rule, method.lower(), meta))

    # every model, in the mode it is used in; one JSON Schema document, hoisted into components
    used: dict[tuple[type, str], None] = {(m.Error, "serialization"): None}
    for _, _, meta in ops:
        for model in (meta["query"], meta["body"], meta["form"]):
            if model is not None:
                used[(model, "validation")] = None
        for r in meta["responses"].values():
            if isinstance(r, type) and issubclass(r, BaseModel):
                used[(r, "serialization")] = None
    keys, doc = models_json_schema(list(used), ref_template=REF)
    components = doc.get("$defs", {})

    api = APISpec(
        title="Palimpsest API",
        version="1",
        openapi_version="3.1.0",
        info={
            "description": (
                "The REST API of Palimpsest. Send `Authorization: Bearer <token>` (cookies are "
                'refused). Every failure is `{"error": {"code", "message", ...}}` with the '
                "status the web pages use for it too. Lists are paginated: follow `next`."
            )
        },
        servers=[{"url": "/api/v1"}],
    )
    for name, text in TAGS:
        api.tag({"name": name, "description": text})
    for name, schema in sorted(components.items()):
        api.components.schema(name, schema)
    api.components.security_scheme("bearer", {"type": "http", "scheme": "bearer"})

    def ref(model, mode):
        return keys[(model, mode)]

    paths: dict[str, dict] = {}
    for rule, method, meta in ops:
        path, path_params = _openapi_path(rule.rule[len("/api/v1") :])
        o: dict[str, Any] = {
            "operationId": rule.endpoint.split(".", 1)[1]
            + ("" if method == "get" else f"_{method}"),
            "summary": meta["summary"],
            "tags": list(meta["tags"]) or ["api"],
        }
        if meta["description"]:
            o["description"] = meta["description"]
        params = [
            {
                "name": n,
                "in": "path",
                "required": True,
                "schema": {"type": t}
                | ({"enum": meta["path_enums"][n]} if n in meta["path_enums"] else {}),
                "example": meta["path_enums"][n][0]
                if n in meta["path_enums"]
                else EXAMPLES.get(n, 1 if t == "integer" else "x"),
            }
            for n, t in path_params
        ]
        if meta["query"] is not None:
            qs = meta["query"].model_json_schema(ref_template=REF)
            for n, s in qs.get("properties", {}).items():
                prm = {
                    "name": n,
                    "in": "query",
                    "required": n in qs.get("required", []),
                    "schema": s,
                }
                if s.get("description"):
                    prm["description"] = s["description"]
                params.append(prm)
        if params:
            o["parameters"] = params
        if meta["body"] is not None:
            # a body whose every field has a default may be left out
            o["requestBody"] = {
                "required": bool(meta["body"].model_json_schema().get("required")),
                "content": {"application/json": {"schema": ref(meta["body"], "validation")}},
            }
        elif meta["form"] is not None:
            o["requestBody"] = {
                "required": True,
                "content": {"multipart/form-data": {"schema": ref(meta["form"], "validation")}},
            }
        responses: dict[str, dict] = {}
        for status, r in meta["responses"].items():
            if isinstance(r, tuple):  # one of several media types (a `format` parameter's)
                responses[str(status)] = {
                    "description": "OK",
                    "content": {
                        t: {
                            "schema": {"type": "object"}
                            if t.endswith("json")
                            else {"type": "string", "contentMediaType": t}
                        }
                        for t in r
                    },
                }
            elif isinstance(r, str):
                schema = (
                    {"type": "object"}
                    if r.endswith("json")
                    else {"type": "string", "contentMediaType": r}
                )
                responses[str(status)] = {"description": "OK", "content": {r: {"schema": schema}}}
            elif r is None:
                responses[str(status)] = {"description": "No body"}
            else:
                responses[str(status)] = {
                    "description": (r.__doc__ or "OK").strip().splitlines()[0],
                    "content": {"application/json": {"schema": ref(r, "serialization")}},
                }
        # the input guard (server.domain.bounds) checks every request's query string, form and body
        errs = set(meta["errors"]) | {400}
        if meta["form"] is not None:
            errs.add(413)
        if not meta["public"]:
            errs.add(401)
            o["security"] = [{"bearer": []}]
        else:  # anonymous: no token asked for, whatever the document's default
            o["security"] = []
        if path_params or meta["query"] is not None:
            errs.add(404)
        if meta["query"] is not None or meta["body"] is not None or meta["form"] is not None:
            errs.add(422)
        for status in sorted(errs):
            responses.setdefault(
                str(status),
                {
                    "description": ERROR_TEXT.get(status, "Error"),
                    "content": {"application/json": {"schema": ref(m.Error, "serialization")}},
                },
            )
        o["responses"] = responses
        paths.setdefault(path, {})[method] = o
    for path, operations in paths.items():
        api.path(path=path, operations=operations)
    return api.to_dict()
