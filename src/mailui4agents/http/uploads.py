"""Reading a multipart upload as a stream, straight into the blob store.

Starlette's form parser would first spool the whole file to a temp file of its
own, whatever its size; the limit could only be checked afterwards. Here the
bytes go to the blob writer as they arrive, so an upload over the limit is
refused at the first byte too many and never fills the disk.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import Request
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from mailui4agents.domain.errors import invalid_value
from mailui4agents.errors import ApiError
from mailui4agents.services.blobs import too_large

if TYPE_CHECKING:  # a typing-only name in python_multipart
    from python_multipart.multipart import MultipartCallbacks

FIELD = "file"
# The routes that read their body as a stream, after authentication (api/body_guard.py
# gives them the attachment limit instead of the JSON one).
UPLOAD_PATHS = ("/api/v1/attachments", "/api/v1/agent/attachments", "/attachments")
# Room for the multipart framing around the file (boundaries, part headers).
FRAMING_SLACK = 64 * 1024

# The multipart schema for OpenAPI (the route reads the body itself).
OPENAPI = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {FIELD: {"type": "string", "format": "binary"}},
                    "required": [FIELD],
                    "additionalProperties": False,
                }
            }
        },
    }
}


@dataclass
class FilePart:
    """What the client said about the file; the bytes went to the writer."""

    filename: str | None = None
    content_type: str | None = None


@dataclass
class _State:
    header_name: bytes = b""
    header_value: bytes = b""
    headers: dict[bytes, bytes] = field(default_factory=dict)
    in_file: bool = False
    file: FilePart | None = None
    unknown: str | None = None
    twice: bool = False
    ended: bool = False  # the closing boundary was read
    chunks: list[bytes] = field(default_factory=list)


def _missing() -> ApiError:
    return ApiError(
        400,
        "missing_field",
        f"send the file as multipart/form-data in a part named '{FIELD}'",
        field=FIELD,
        accepted_fields=[FIELD],
    )


async def receive_file(
    request: Request, write: Callable[[bytes], Awaitable[None]], max_bytes: int
) -> FilePart:
    """Stream the one part named `file` to `write`. Any other part is refused
    (strict input: a misspelt field must not be silently dropped)."""
    ctype, params = parse_options_header(request.headers.get("content-type"))
    boundary = params.get(b"boundary")
    if ctype != b"multipart/form-data" or not boundary:
        raise _missing()
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > max_bytes + FRAMING_SLACK:
        raise too_large(max_bytes)  # cannot fit: refuse before reading a byte
    st = _State()

    def on_part_begin() -> None:
        st.headers, st.in_file = {}, False

    def on_header_field(data: bytes, start: int, end: int) -> None:
        st.header_name += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        st.header_value += data[start:end]

    def on_header_end() -> None:
        st.headers[st.header_name.strip().lower()] = st.header_value.strip()
        st.header_name, st.header_value = b"", b""

    def on_headers_finished() -> None:
        _, opts = parse_options_header(st.headers.get(b"content-disposition"))
        name = opts.get(b"name", b"").decode("utf-8", "replace")
        if name != FIELD:
            st.unknown = st.unknown if st.unknown is not None else name
        elif st.file is not None:
            st.twice = True
        else:
            # Header bytes travel as latin-1; browsers and httpx send UTF-8 in them.
            raw = opts.get(b"filename")
            ctype = st.headers.get(b"content-type")
            st.file = FilePart(
                filename=None if raw is None else raw.decode("utf-8", "replace"),
                content_type=None if ctype is None else ctype.decode("latin-1"),
            )
            st.in_file = True

    def on_part_data(data: bytes, start: int, end: int) -> None:
        if st.in_file:
            st.chunks.append(data[start:end])

    def on_part_end() -> None:
        st.in_file = False

    def on_end() -> None:
        st.ended = True

    callbacks: MultipartCallbacks = {
        "on_part_begin": on_part_begin,
        "on_header_field": on_header_field,
        "on_header_value": on_header_value,
        "on_header_end": on_header_end,
        "on_headers_finished": on_headers_finished,
        "on_part_data": on_part_data,
        "on_part_end": on_part_end,
        "on_end": on_end,
    }
    try:
        parser = MultipartParser(boundary, callbacks)  # refuses an absurd boundary
        async for chunk in request.stream():
            parser.write(chunk)
            _refuse(st)
            for data in st.chunks:
                await write(data)
            st.chunks.clear()
        parser.finalize()
    except FormParserError:
        raise invalid_value(FIELD, "the multipart body is malformed") from None
    _refuse(st)
    if not st.ended:  # cut short: the file would be kept truncated
        raise invalid_value(FIELD, "the multipart body ends before its closing boundary")
    if st.file is None:
        raise _missing()
    return st.file


def _refuse(st: _State) -> None:
    if st.unknown is not None:
        raise ApiError(
            400,
            "unknown_field",
            f'field "{st.unknown}" is not accepted here',
            field=st.unknown,
            accepted_fields=[FIELD],
        )
    if st.twice:
        raise invalid_value(FIELD, f"one file per upload: '{FIELD}' was sent twice")
