"""The parts of an inbound e-mail that the gateway keeps: pure, no I/O."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InboundFile:
    """An attachment of an inbound e-mail, as it becomes a mail's attachment."""

    name: str
    content_type: str
    data: bytes
