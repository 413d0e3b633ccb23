"""A session as real mail (docs/email.md, "Export"): the mbox the gateway
writes (`GET /api/v1/sessions/{id}/export`), and the same messages as one .eml
file each (`split_mbox`). People only: an agent key gets 403."""

from __future__ import annotations

import mailbox
import re
from pathlib import Path
from typing import BinaryIO

from mailui4agents.client.client import AsyncClient
from mailui4agents.client.transport import seg

_MAIL_ID = re.compile(r"<mail\.([A-Za-z0-9-]{1,36})@")


class Export:
    """`await Export(client).mbox(session_id, out)`; `split_mbox` makes the .eml files."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    async def mbox(self, session_id: str, out: BinaryIO) -> int:
        """Write the session's mbox to `out` as it arrives; the bytes written."""
        return await self.client._download(
            f"/sessions/{seg(session_id)}/export", {"format": "mbox"}, out
        )


def split_mbox(box: Path, directory: Path) -> list[Path]:
    """The messages of the mbox `box` as .eml files in `directory`. The gateway's
    messages have no line starting with `From ` (nothing was quoted), so each
    file is the message as mailed, its LF line ends back to CRLF."""
    written = []
    source = mailbox.mbox(box, create=False)
    try:
        for i, key in enumerate(source.keys(), 1):
            data = source.get_bytes(key)
            found = _MAIL_ID.search(data.split(b"\n\n", 1)[0].decode("ascii", "replace"))
            name = f"{i:04d}-{found.group(1)}.eml" if found else f"{i:04d}.eml"
            target = directory / name
            target.write_bytes(data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
            written.append(target)
    finally:
        source.close()
    return written
