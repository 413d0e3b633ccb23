"""http/observe.py and logs.py in process: the request id of an answer, of its log
line and of a crash's traceback; the JSON formatter's fields (docs/api.md,
"Request ids and logs")."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from starlette.types import Message

from mailui4agents.http.observe import Observe, request_id
from mailui4agents.logs import JsonFormatter, config
from mailui4agents.metrics import GatewayMetrics

pytestmark = pytest.mark.anyio


class _Route:
    path = "/api/v1/mail/{mail_id}"


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    scope["route"] = _Route
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


async def _crash(scope: Any, receive: Any, send: Any) -> None:
    raise RuntimeError("boom")


async def _receive() -> Message:
    return {"type": "http.request", "body": b""}


def _scope(**headers: str) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "GET",
        "path": "/api/v1/mail/m-secret-id",
        "query_string": b"token=t-secret",
        "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
    }


@pytest.fixture
def lines() -> Any:
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield lambda: [json.loads(x) for x in out.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)
        root.setLevel(old)


async def test_the_answer_and_its_line_share_a_fresh_id(lines: Any) -> None:
    sent: list[dict[str, Any]] = []

    async def send(message: Message) -> None:
        sent.append(dict(message))

    metrics = GatewayMetrics()
    await Observe(_ok, metrics=metrics)(_scope(**{"x-request-id": "forged"}), _receive, send)
    rid = dict(sent[0]["headers"])[b"x-request-id"].decode()
    assert rid != "forged" and len(rid) == 16
    (line,) = lines()
    assert line["request_id"] == rid
    assert (line["route"], line["method"], line["status"]) == (
        "/api/v1/mail/{mail_id}", "GET", 200,
    )  # fmt: skip
    assert "secret" not in json.dumps(line)
    assert request_id.get() is None  # reset once answered


async def test_a_crash_is_counted_as_500_and_its_traceback_names_the_request(
    lines: Any,
) -> None:
    metrics = GatewayMetrics()

    async def send(message: Message) -> None:
        raise AssertionError("nothing is sent before the crash")

    try:
        await Observe(_crash, metrics=metrics)(_scope(), _receive, send)
    except RuntimeError:  # as uvicorn does, in the request's task
        logging.getLogger("tests.observe").exception("Exception in ASGI application")
    else:
        raise AssertionError("the crash was swallowed")
    request, traceback = lines()
    assert (request["status"], request["route"]) == (500, "unmatched")
    assert traceback["request_id"] == request["request_id"]
    assert "RuntimeError: boom" in traceback["exception"]
    assert metrics.requests.labels("unmatched", "GET", "500")._value.get() == 1


def test_only_text_and_json_are_formats() -> None:
    assert config("json", "info")["formatters"]["main"]["()"].endswith("JsonFormatter")
    with pytest.raises(ValueError, match="log format must be one of text, json"):
        config("yaml", "info")
