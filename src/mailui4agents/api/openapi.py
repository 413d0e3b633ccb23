"""The OpenAPI document tells the statuses the gateway really sends.

FastAPI documents a 422 for every route with parameters; the gateway never sends
one (api/validation.py turns validation failures into 400s). Each operation here
documents instead the error statuses it can answer, all in the one error shape
(wire/errors.py), by these rules:

- 400 every operation with a parameter or a body (validation);
- 401 and 403 every operation behind a token (no token; a token of the wrong kind),
  and 401 for a failed login;
- 404 every operation that names something (a path parameter, `session_id`, or
  an address or session in its body: NAMES_IN_BODY);
- 413 every operation with a request body (the body guard);
- 409 and 429 where a rule can refuse (CONFLICTS, RATE_LIMITED below).

Event streams answer `text/event-stream`, not JSON: their 200 documents the
frame model (wire.models.EventFrame) under that media type (STREAMS).

Every operation behind a token names its kind in `security` (SECURITY_SCHEMES):
an agent key (`am_agent_`) under /api/v1/agent/, a person's token (`am_user_`)
elsewhere; the public ones have `security: []`.
"""

from __future__ import annotations

from fastapi import FastAPI

from mailui4agents.wire.errors import ErrorBody
from mailui4agents.wire.models import JsonObject

DESCRIPTIONS = {
    400: "Bad input: the field is named in `error.field`",
    401: "No token, or an unknown, expired or revoked one (do not retry)",
    403: "The token may not use this route, or lacks the power",
    404: "Not found, or not visible to you",
    409: "Refused by the state of things (`error.reason` or `error.code` says which rule)",
    413: "Too large: `error.limit` is the limit in bytes",
    429: "Too many: retry after `Retry-After` seconds (`error.retry_after`)",
}

# Operations where a rule can refuse with 409 (archived, hop limit, budget,
# mode, already decided, a name or alias taken, an owner kept).
CONFLICTS = {
    ("POST", "/api/v1/mail"),
    ("POST", "/api/v1/agent/mail"),
    ("POST", "/api/v1/mail/{mail_id}/forward"),
    ("POST", "/api/v1/agent/mail/{mail_id}/forward"),
    ("POST", "/api/v1/agent/permissions"),
    ("POST", "/api/v1/permissions/{request_id}/decision"),
    ("PATCH", "/api/v1/sessions/{session_id}"),
    ("DELETE", "/api/v1/sessions/{session_id}/deciders/{name}"),
    ("POST", "/api/v1/sessions/{session_id}/deciders"),
    ("POST", "/api/v1/admin/users"),
    ("POST", "/api/v1/admin/agents"),
    ("POST", "/api/v1/agent/sessions/interactive"),
}

# Operations that can answer 429: logins, and whatever may create a session.
RATE_LIMITED = {
    ("POST", "/api/v1/auth/login"),
    ("POST", "/api/v1/mail"),
    ("POST", "/api/v1/agent/mail"),
    ("POST", "/api/v1/mail/{mail_id}/forward"),
    ("POST", "/api/v1/agent/mail/{mail_id}/forward"),
    ("POST", "/api/v1/agent/sessions/interactive"),
}


# Operations whose body (not path) names something that may not exist for you.
NAMES_IN_BODY = {
    ("POST", "/api/v1/mail"),
    ("POST", "/api/v1/agent/mail"),
    ("POST", "/api/v1/agent/permissions"),
}

# Operations that answer a stream of server-sent events.
STREAMS = {"/api/v1/events", "/api/v1/agent/events"}

# Operations anyone may call, without a token.
PUBLIC = {"/api/v1/auth/login", "/healthz", "/readyz"}


SECURITY_SCHEMES = {
    "agentKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "An agent key (am_agent_…), from POST /api/v1/admin/agents",
    },
    "userToken": {
        "type": "http",
        "scheme": "bearer",
        "description": "A person's token (am_user_…), from POST /api/v1/auth/login",
    },
}


def security_of(path: str) -> list[dict[str, list[str]]]:
    """The `security` of the operations on `path` (module docstring)."""
    if path in PUBLIC:
        return []
    return [{"agentKey" if path.startswith("/api/v1/agent/") else "userToken": []}]


def error_statuses(method: str, path: str, op: JsonObject) -> set[int]:
    """The error statuses `method path` can answer (module docstring)."""
    params = op.get("parameters", [])
    has_body = "requestBody" in op or method in ("POST", "PATCH", "PUT")
    codes: set[int] = set()
    if has_body or params or path in STREAMS:  # streams: a bad Last-Event-ID
        codes.add(400)
    if path not in PUBLIC:
        codes |= {401, 403}
    elif path == "/api/v1/auth/login":
        codes.add(401)  # a wrong username or password
    named = any(p.get("in") == "path" or p.get("name") == "session_id" for p in params)
    if named or (method, path) in NAMES_IN_BODY:
        codes.add(404)
    if has_body:
        codes.add(413)
    if (method, path) in CONFLICTS:
        codes.add(409)
    if (method, path) in RATE_LIMITED:
        codes.add(429)
    return codes


def _error_schemas() -> JsonObject:
    schema = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}")
    found: JsonObject = dict(schema.pop("$defs", {}))
    found["ErrorBody"] = schema
    return found


def document_errors(app: FastAPI) -> None:
    """Document each operation's error statuses (ErrorBody) instead of FastAPI's 422."""
    original = app.openapi
    ref = {"$ref": "#/components/schemas/ErrorBody"}

    def openapi() -> JsonObject:
        if app.openapi_schema is None:
            schema = original()
            for path, item in schema.get("paths", {}).items():
                for method, op in item.items():
                    op["security"] = security_of(path)
                    responses = op.setdefault("responses", {})
                    responses.pop("422", None)
                    if path in STREAMS:
                        content = responses["200"]["content"]
                        content["text/event-stream"] = content.pop("application/json")
                    for code in sorted(error_statuses(method.upper(), path, op)):
                        responses[str(code)] = {
                            "description": DESCRIPTIONS[code],
                            "content": {"application/json": {"schema": ref}},
                        }
            schema.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            components.pop("HTTPValidationError", None)
            components.pop("ValidationError", None)
            components.update(_error_schemas())
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
