"""The OpenAPI 3 description of `/api/v1`, served at `/api/v1/openapi.json`.

The tests walk every operation here against the running app and check each response against
the schema declared for its status, and check that every API route is described.
"""

from __future__ import annotations

NULLABLE_STR = {"type": ["string", "null"]}
NULLABLE_INT = {"type": ["integer", "null"]}

PROBLEM = {"type": "object", "required": ["message"],
           "properties": {"line": NULLABLE_INT, "id": NULLABLE_STR, "message": {"type": "string"}}}

ERROR = {
    "type": "object", "required": ["error"],
    "properties": {"error": {
        "type": "object", "required": ["code", "message"],
        "properties": {
            "code": {"type": "string"}, "message": {"type": "string"},
            "problems": {"type": "array", "items": {"$ref": "#/components/schemas/Problem"}},
            "total": {"type": "integer"},
            "next_allowed_at": NULLABLE_STR,
            "limit": NULLABLE_STR,
        }}},
}

QUOTA = {"type": "object", "additionalProperties": True}

PHASE = {
    "type": "object", "required": ["name", "split", "is_open", "limits"],
    "properties": {
        "name": {"type": "string"}, "split": {"type": "string"},
        "opens_at": NULLABLE_STR, "closes_at": NULLABLE_STR, "is_open": {"type": "boolean"},
        "published": {"type": "boolean"},
        "limits": {"type": "object", "properties": {"daily": NULLABLE_INT, "total": NULLABLE_INT,
                                                    "concurrent": NULLABLE_INT}},
        "quota": {"$ref": "#/components/schemas/Quota"},
    },
}

PRIMARY = {"type": "object", "required": ["metric", "subset", "greater_is_better"],
           "properties": {"metric": {"type": "string"}, "subset": {"type": "string"},
                          "greater_is_better": {"type": "boolean"}}}

TASK_SUMMARY = {
    "type": "object", "required": ["id", "title", "primary", "imported", "phases"],
    "properties": {"id": {"type": "string"}, "title": {"type": "string"},
                   "primary": {"$ref": "#/components/schemas/Primary"}, "imported": {"type": "boolean"},
                   "phases": {"type": "array", "items": {"$ref": "#/components/schemas/Phase"}}},
}

TASK = {
    "type": "object",
    "required": ["id", "version", "title", "description", "citation", "licence", "primary", "metrics",
                 "subsets", "splits", "format", "imported", "phases"],
    "properties": {
        "id": {"type": "string"}, "version": {"type": "integer"}, "title": {"type": "string"},
        "description": {"type": "string"}, "citation": {"type": "string"}, "licence": {"type": "string"},
        "source": {"type": "string"}, "primary": {"$ref": "#/components/schemas/Primary"},
        "metrics": {"type": "array", "items": {"type": "string"}},
        "subsets": {"type": "array", "items": {"type": "string"}},
        "splits": {"type": "array", "items": {"type": "string"}},
        "format": {"type": "object", "required": ["native", "fields", "example"],
                   "properties": {"native": {"type": "string"}, "example": {"type": "string"},
                                  "also": {"type": "array", "items": {"type": "string"}},
                                  "fields": {"type": "array", "items": {
                                      "type": "object", "required": ["name", "kind"],
                                      "properties": {"name": {"type": "string"}, "kind": {"type": "string"},
                                                     "description": {"type": "string"},
                                                     "optional": {"type": "boolean"}}}}}},
        "imported": {"type": "boolean"},
        "phases": {"type": "array", "items": {"$ref": "#/components/schemas/Phase"}},
    },
}

SCORES = {
    "description": "The scorer's JSON contract for the part of the gold the caller may see "
                   "(`part`: public, private or all); `parts` holds each visible part when several are.",
    "type": ["object", "null"],
    "required": ["task", "split", "primary", "metrics"],
    "properties": {
        "task": {"type": "string"}, "split": {"type": "string"}, "part": {"type": "string"},
        "primary": {"type": "object", "required": ["name", "subset", "value"],
                    "properties": {"name": {"type": "string"}, "subset": {"type": "string"},
                                   "value": {"type": ["number", "null"]},
                                   "greater_is_better": {"type": "boolean"}}},
        "metrics": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": {"type": ["number", "null"]}}},
        "notes": {"type": "array", "items": {"type": "string"}},
        "signature": {"type": "string"},
        "parts": {"type": "object"},
    },
}

SUBMISSION = {
    "type": "object",
    "required": ["id", "task", "phase", "status", "created", "errors", "scores"],
    "properties": {
        "id": {"type": "integer"}, "task": {"type": "string"}, "phase": NULLABLE_STR,
        "status": {"type": "string", "enum": ["queued", "running", "scored", "failed"]},
        "created": {"type": "string"}, "started": NULLABLE_STR, "finished": NULLABLE_STR,
        "method_name": {"type": "string"}, "description": {"type": "string"}, "url": {"type": "string"},
        "show_publicly": {"type": "boolean"}, "is_primary": {"type": "boolean"},
        "is_baseline": {"type": "boolean"},
        "file_name": {"type": "string"}, "size": {"type": "integer"}, "sha256": {"type": "string"},
        "hidden": {"type": "boolean"}, "hidden_reason": NULLABLE_STR, "failure_kind": NULLABLE_STR,
        "errors": {"type": "array", "items": {"$ref": "#/components/schemas/Problem"}},
        "scores": {"$ref": "#/components/schemas/Scores"},
        "duplicate": {"type": "boolean"},
    },
}

_INTERVAL = {"type": ["array", "null"], "minItems": 2, "maxItems": 2, "items": {"type": ["number", "null"]}}
_RANK_RANGE = {"type": ["array", "null"], "minItems": 2, "maxItems": 2, "items": {"type": "integer"}}
# issue 12: the board's bootstrap statistics (server.stats), per row and for the board
LEADERBOARD_ROW = {
    # ci, rank_range and cluster are on every row since issue 12 (null with `ci_note` saying why);
    # snapshots published before it lack them
    "type": "object", "required": ["rank", "row_type", "team", "submission_id", "metrics"],
    "properties": {
        "rank": {"type": ["integer", "null"]}, "row_type": {"type": "string", "enum": ["team", "baseline"]},
        "team": {"type": "string"}, "submission_id": {"type": ["integer", "null"]},
        "metrics": {"type": "object"},
        "ci": {**_INTERVAL, "description": "95 % bootstrap percentile interval of the primary score"},
        "rank_range": {**_RANK_RANGE, "description": "95 % rank interval [best, worst]"},
        "cluster": {"type": ["integer", "null"],
                    "description": "rows sharing a cluster are not significantly different from its best"},
        "ci_note": {"type": "string", "description": "why a row has no interval"},
        "public_ci": _INTERVAL,
    },
    "additionalProperties": True,
}
LEADERBOARD_STATS = {
    "type": "object", "required": ["status"],
    "properties": {"status": {"type": "string", "enum": ["ready", "pending"]},
                   "part": {"type": "string"}, "method": {"type": "string"}, "unit": {"type": "string"},
                   "B": {"type": "integer"}, "seed": {"type": "integer"}, "alpha": {"type": "number"},
                   "metric": {"type": "string"},
                   "order": {"type": "array", "items": {"type": "integer"}},
                   "teams": {"type": "array", "items": {"type": "string"}},
                   "p": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
                   "p_holm": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}}},
    "additionalProperties": True,
}
LEADERBOARD = {"type": "object", "required": ["task", "phase", "rows"],
               "properties": {"task": {"type": "string"}, "phase": {"type": "string"},
                              "rows": {"type": "array", "items": LEADERBOARD_ROW},
                              "statistics": LEADERBOARD_STATS, "public_statistics": LEADERBOARD_STATS},
               "additionalProperties": True}

PHASE_STATE = {"type": "object", "required": ["name", "split", "state", "frozen", "published_at"],
               "properties": {"name": {"type": "string"}, "split": {"type": "string"},
                              "state": {"type": "array", "items": {"type": "string"}},
                              "frozen": {"type": "boolean"}, "leaderboard_open": {"type": "boolean"},
                              "published_at": NULLABLE_STR, "public_fraction": {"type": "number"}},
               "additionalProperties": True}

RANKING_VERSION = {"type": "object", "required": ["version", "published_at", "reason", "sha256"],
                   "properties": {"version": {"type": "integer"}, "published_at": {"type": "string"},
                                  "reason": {"type": "string"}, "sha256": {"type": "string"}}}

RANKING = {"description": "A published final ranking: the leaderboard's shape plus `ranking` (version, time, "
                          "organizer, reason, rule) and, per row, `chosen_by` and every part's scores "
                          "with their signatures.",
           "type": "object", "required": ["task", "phase", "rows", "ranking"],
           "properties": {"task": {"type": "string"}, "phase": {"type": "string"},
                          "ranking": {"type": "object", "required": ["version", "published_at", "rule"]},
                          "rows": {"type": "array", "items": {"type": "object", "required": [
                              "rank", "team", "submission_id", "metrics", "chosen_by", "parts"]}}},
           "additionalProperties": True}

ME = {"type": "object", "required": ["id", "email", "is_organizer", "team"],
      "properties": {"id": {"type": "integer"}, "email": {"type": "string"},
                     "is_organizer": {"type": "boolean"},
                     "team": {"type": ["object", "null"],
                              "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}}}


def _json(schema_ref: str) -> dict:
    return {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_ref}"}}}}


def _err(description: str) -> dict:
    return {"description": description, **_json("Error")}


TASK_ID = {"name": "task_id", "in": "path", "required": True, "schema": {"type": "string"},
           "example": "tric-binary"}
PHASE_NAME = {"name": "phase_name", "in": "path", "required": True, "schema": {"type": "string"},
              "example": "test"}
AUTH_ERRORS = {"401": _err("missing, invalid or revoked token")}


def spec() -> dict:
    """The OpenAPI 3.1 document."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Palimpsest API", "version": "1",
                 "description": "Submit predictions, follow their scoring and read leaderboards. "
                                "Authenticate with `Authorization: Bearer <token>`; cookies are refused."},
        "servers": [{"url": "/api/v1"}],
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Error": ERROR, "Problem": PROBLEM, "Quota": QUOTA, "Phase": PHASE, "Primary": PRIMARY,
                        "TaskSummary": TASK_SUMMARY, "Task": TASK, "Scores": SCORES,
                        "Submission": SUBMISSION, "Leaderboard": LEADERBOARD, "Me": ME,
                        "PhaseState": PHASE_STATE, "RankingVersion": RANKING_VERSION, "Ranking": RANKING},
        },
        "paths": {
            "/me": {"get": {"operationId": "me", "summary": "Who the token belongs to",
                            "responses": {"200": {"description": "the caller", **_json("Me")}, **AUTH_ERRORS}}},
            "/tasks": {"get": {
                "operationId": "listTasks", "summary": "Tasks and phases, with what remains of the caller's quota",
                "responses": {"200": {"description": "tasks", "content": {"application/json": {"schema": {
                    "type": "array", "items": {"$ref": "#/components/schemas/TaskSummary"}}}}}, **AUTH_ERRORS}}},
            "/tasks/{task_id}": {"get": {
                "operationId": "getTask", "summary": "A task with its submission format",
                "parameters": [TASK_ID],
                "responses": {"200": {"description": "the task", **_json("Task")}, **AUTH_ERRORS,
                              "404": _err("unknown task")}}},
            "/tasks/{task_id}/download": {"get": {
                "operationId": "downloadInputs", "summary": "The task's public inputs as a zip",
                "parameters": [TASK_ID, {"name": "split", "in": "query", "required": False,
                                         "schema": {"type": "string"}}],
                "responses": {"200": {"description": "zip archive",
                                      "content": {"application/zip": {"schema": {"type": "string",
                                                                                  "format": "binary"}}}},
                              **AUTH_ERRORS, "404": _err("unknown task or split, or no data imported")}}},
            "/tasks/{task_id}/submissions": {"post": {
                "operationId": "createSubmission",
                "summary": "Upload a prediction file (idempotent by content hash per team and phase)",
                "parameters": [TASK_ID],
                "requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
                    "type": "object", "required": ["file"],
                    "properties": {"file": {"type": "string", "format": "binary"},
                                   "phase": {"type": "string"}, "method_name": {"type": "string"},
                                   "description": {"type": "string"}, "url": {"type": "string"},
                                   "show_publicly": {"type": "string", "enum": ["true", "false"]},
                                   "baseline": {"type": "string", "enum": ["true", "false"],
                                                "description": "organizers only: record the file as a "
                                                               "baseline entry (the baselines team)"}}}}}},
                "responses": {"201": {"description": "created and queued", **_json("Submission")},
                              "200": {"description": "the same file was submitted before: that submission",
                                      **_json("Submission")},
                              "400": _err("no file"), **AUTH_ERRORS,
                              "403": _err("no team, the phase is closed, or baseline=true "
                                          "from a non-organizer"),
                              "404": _err("unknown task or phase"),
                              "409": _err("the task has no data yet"),
                              "413": _err("the upload is over the size limit"),
                              "422": _err("the file was refused"),
                              "429": _err("a submission limit is reached; next_allowed_at says when")}}},
            "/submissions": {"get": {
                "operationId": "listSubmissions", "summary": "The caller's team's submissions",
                "parameters": [{"name": "task", "in": "query", "required": False, "schema": {"type": "string"}}],
                "responses": {"200": {"description": "submissions, newest first", "content": {
                    "application/json": {"schema": {"type": "array",
                                                    "items": {"$ref": "#/components/schemas/Submission"}}}}},
                    **AUTH_ERRORS}}},
            "/submissions/{submission_id}": {"get": {
                "operationId": "getSubmission", "summary": "Status, validation messages and visible scores",
                "parameters": [{"name": "submission_id", "in": "path", "required": True,
                                "schema": {"type": "integer"}, "example": 1}],
                "responses": {"200": {"description": "the submission", **_json("Submission")}, **AUTH_ERRORS,
                              "404": _err("no such submission visible to the caller")}}},
            "/tasks/{task_id}/leaderboard": {"get": {
                "operationId": "getLeaderboard", "summary": "The leaderboard, as the page shows it",
                "parameters": [TASK_ID, {"name": "phase", "in": "query", "required": False,
                                         "schema": {"type": "string"}, "example": "test"}],
                "responses": {"200": {"description": "the leaderboard", **_json("Leaderboard")}, **AUTH_ERRORS,
                              "404": _err("unknown task or phase")}}},
            "/tasks/{task_id}/phases/{phase_name}/{action}": {"post": {
                "operationId": "phaseAction",
                "summary": "Organizers: close, freeze, unfreeze or publish a phase (publish: only a closed "
                           "phase, or with close=true; a correction needs a reason)",
                "parameters": [TASK_ID, PHASE_NAME,
                               {"name": "action", "in": "path", "required": True, "example": "freeze",
                                "schema": {"type": "string", "enum": ["close", "freeze", "unfreeze", "publish"]}}],
                "requestBody": {"required": False, "content": {"application/json": {"schema": {
                    "type": "object", "properties": {"reason": {"type": "string"},
                                                     "close": {"type": "boolean"}}}}}},
                "responses": {"200": {"description": "the phase's new state", "content": {"application/json": {
                    "schema": {"type": "object", "required": ["phase"], "properties": {
                        "phase": {"$ref": "#/components/schemas/PhaseState"}}}}}},
                              "201": {"description": "published", "content": {"application/json": {"schema": {
                                  "type": "object", "required": ["phase", "ranking"], "properties": {
                                      "phase": {"$ref": "#/components/schemas/PhaseState"},
                                      "ranking": {"$ref": "#/components/schemas/RankingVersion"}}}}}},
                              **AUTH_ERRORS, "403": _err("not an organizer's token"),
                              "404": _err("unknown task, phase or action"),
                              "409": _err("refused by the phase's state (e.g. publishing an open phase)")}}},
            "/tasks/{task_id}/phases/{phase_name}/rankings": {"get": {
                "operationId": "listRankings", "summary": "Organizers: the published versions of a final ranking",
                "parameters": [TASK_ID, PHASE_NAME],
                "responses": {"200": {"description": "versions, oldest first", "content": {"application/json": {
                    "schema": {"type": "object", "required": ["phase", "versions"], "properties": {
                        "phase": {"$ref": "#/components/schemas/PhaseState"},
                        "versions": {"type": "array", "items": {"$ref": "#/components/schemas/RankingVersion"}}}}}}},
                    **AUTH_ERRORS, "403": _err("not an organizer's token"), "404": _err("unknown task or phase")}}},
            "/tasks/{task_id}/phases/{phase_name}/rankings/{version}": {"get": {
                "operationId": "getRanking", "summary": "One published version of the final ranking, byte for byte",
                "parameters": [TASK_ID, PHASE_NAME, {"name": "version", "in": "path", "required": True,
                                                     "schema": {"type": "integer"}, "example": 1}],
                "responses": {"200": {"description": "the snapshot", **_json("Ranking")}, **AUTH_ERRORS,
                              "404": _err("unknown task or phase, or no such version")}}},
            "/openapi.json": {"get": {"operationId": "openapi", "summary": "This document", "security": [],
                                      "responses": {"200": {"description": "OpenAPI 3.1",
                                                            "content": {"application/json": {}}}}}},
        },
    }
