"""Tests for the incremental event-stream parser."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from mailui4agents.client.sse import SSEEvent, SSEParser

# A recorded stream that exercises every rule at once: a BOM, comments and
# pings, CRLF, CR and LF line ends, multi-line data, ids that persist, an id
# with NUL (ignored), retry, a block without data, and multi-byte UTF-8.
RECORDED = (
    b"\xef\xbb\xbf: welcome\r\n"
    b"retry: 3000\r\n"
    b"id: 1\r\nevent: new_mail\r\n"
    b'data: {"subject": "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x93\xac"}\r\n\r\n'
    b": ping\n\n"
    b"id: 2\nevent: session_update\ndata: line one\ndata: line two\n\n"
    b"data: keeps id 2\r\r"
    b"id: 3\revent: permission_decision\rdata:no space\rretry: 250\r\r"
    b"id: 4\x00x\ndata: nul id ignored\n\n"
    b"event: no-data-no-dispatch\nid: 5\n\n"
    b"unknown: field\nretry: soon\ndata:  two spaces\n\n"
    b"data\n\n"
    b"id\ndata: id cleared\n\n"
    b"data: an unterminated event is never dispatched"
)
EXPECTED = [
    SSEEvent("1", "new_mail", '{"subject": "café € 📬"}', retry=3000),
    SSEEvent("2", "session_update", "line one\nline two"),
    SSEEvent("2", "message", "keeps id 2"),
    SSEEvent("3", "permission_decision", "no space", retry=250),
    SSEEvent("3", "message", "nul id ignored"),
    SSEEvent("5", "message", " two spaces"),
    SSEEvent("5", "message", ""),
    SSEEvent(None, "message", "id cleared"),
]


def feed_all(chunks: list[bytes]) -> list[SSEEvent]:
    parser = SSEParser()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(parser.feed(chunk))
    return events


def test_the_recorded_stream_fed_whole_gives_every_event() -> None:
    assert feed_all([RECORDED]) == EXPECTED


def test_the_recorded_stream_fed_one_byte_at_a_time_gives_the_same_events() -> None:
    assert feed_all([RECORDED[i : i + 1] for i in range(len(RECORDED))]) == EXPECTED


@given(st.sets(st.integers(min_value=1, max_value=len(RECORDED) - 1)))
def test_the_recorded_stream_split_anywhere_gives_the_same_events(cuts: set[int]) -> None:
    bounds = [0, *sorted(cuts), len(RECORDED)]
    chunks = [RECORDED[start:end] for start, end in pairwise(bounds)]
    assert feed_all(chunks) == EXPECTED


def test_an_event_name_and_its_data_split_over_two_reads_is_one_event() -> None:
    parser = SSEParser()
    assert parser.feed(b"id: 7\nevent: new_mail\n") == []
    assert parser.feed(b'data: {"mail_id": "m"}\n\n') == [
        SSEEvent("7", "new_mail", '{"mail_id": "m"}')
    ]


def test_a_cr_ending_one_chunk_and_an_lf_starting_the_next_are_one_line_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: a\r") == []
    assert parser.feed(b"") == []
    # Were the LF a second line end, "a" would be dispatched alone right here.
    assert parser.feed(b"\ndata: b\r") == []
    assert parser.feed(b"\n\r") == [SSEEvent(None, "message", "a\nb")]
    assert parser.feed(b"\ndata: c\n\n") == [SSEEvent(None, "message", "c")]


def test_an_event_ended_by_a_lone_cr_is_dispatched_without_waiting_for_more_bytes() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: now\r\r") == [SSEEvent(None, "message", "now")]


def test_a_utf8_character_split_across_chunks_is_decoded_whole() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: \xf0\x9f") == []
    assert parser.feed(b"\x93\xac\n\n") == [SSEEvent(None, "message", "📬")]


def test_a_bom_split_across_chunks_is_dropped_but_a_later_one_is_not() -> None:
    parser = SSEParser()
    assert parser.feed(b"\xef\xbb") == []
    assert parser.feed(b"\xbfdata: x\n\n") == [SSEEvent(None, "message", "x")]
    # A BOM after the start makes the field name unknown, so the line is ignored.
    assert parser.feed(b"\xef\xbb\xbfdata: y\n\n") == []


def test_the_last_event_id_moves_on_a_block_without_data() -> None:
    parser = SSEParser()
    assert parser.feed(b"id: 9\n\n") == []
    assert parser.last_event_id == "9"
    assert parser.feed(b"data: x\n\n") == [SSEEvent("9", "message", "x")]


def test_retry_is_remembered_only_when_it_is_all_ascii_digits() -> None:
    parser = SSEParser()
    parser.feed(b"retry: 1500\n\nretry: 2x\n\nretry: \xd9\xa3\n\n")  # U+0663 is a digit, not ASCII
    assert parser.retry == 1500
