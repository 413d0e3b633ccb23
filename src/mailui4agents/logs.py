"""Log output of `agentmail serve` and `agentmail bridge`: `--log-format text`
(one readable line) or `json` (one JSON object a line), docs/api.md, "Request ids and logs".

Every line of a request carries its id (http/observe.py). No line is given a
secret to print: the request line names the route template, not the path or
query string, and uvicorn's own access log (which prints the path with its
query) is off.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# What a request line adds (http/observe.py), in this order.
FIELDS = ("request_id", "method", "route", "status", "duration_ms")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, the request's fields
    and id, and the traceback of an exception as one string."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                out[name] = value
        if "request_id" not in out:
            rid = _current_request_id()
            if rid is not None:
                out["request_id"] = rid
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """The plain line, with ` request_id=…` when written during a request."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        rid = getattr(record, "request_id", None) or _current_request_id()
        return f"{line} request_id={rid}" if rid else line


def _current_request_id() -> str | None:
    from mailui4agents.http.observe import request_id

    return request_id.get()


def config(log_format: str, level: str) -> dict[str, Any]:
    """A logging.config.dictConfig for uvicorn's and our loggers, to stderr."""
    if log_format not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {log_format!r}")
    formatter = JsonFormatter if log_format == "json" else TextFormatter
    handler = {"class": "logging.StreamHandler", "formatter": "main", "stream": "ext://sys.stderr"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"main": {"()": f"{__name__}.{formatter.__name__}"}},
        "handlers": {"main": handler},
        "root": {"handlers": ["main"], "level": level.upper()},
        "loggers": {
            # uvicorn's: through the root's handler, once
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {"handlers": [], "propagate": True},
            "uvicorn.access": {"handlers": [], "propagate": False, "level": "WARNING"},
            "httpx": {"level": "WARNING"},  # it logs every URL it fetches, query included
            "httpcore": {"level": "WARNING"},
        },
    }
