"""Mail session ↔ platform session, persisted (docs/bridge.md, "One turn", step 4).

Without it every mail would start the model from zero. The map is one small
JSON file, replaced atomically (write a temporary file, fsync, rename), so a
crash leaves either the old map or the new one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class SessionMap:
    """``{mail session id: platform session id}`` of one bridge."""

    path: Path
    ids: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path) -> SessionMap:
        path.parent.mkdir(parents=True, exist_ok=True)
        ids: dict[str, str] = {}
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as exc:
                raise ValueError(f"{path}: the session map is not valid JSON ({exc})") from exc
            if isinstance(data, dict):
                ids = {str(k): str(v) for k, v in data.items() if isinstance(v, str) and v}
        return cls(path, ids)

    def get(self, mail_session_id: str) -> str | None:
        return self.ids.get(mail_session_id)

    def set(self, mail_session_id: str, platform_session_id: str) -> None:
        """Store what the CLI reported; no write when nothing changed."""
        if self.ids.get(mail_session_id) == platform_session_id:
            return
        self.ids[mail_session_id] = platform_session_id
        self._save()

    def forget(self, mail_session_id: str) -> None:
        if self.ids.pop(mail_session_id, None) is not None:
            self._save()

    def _save(self) -> None:
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        data = json.dumps(self.ids, indent=1, sort_keys=True).encode()
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)
