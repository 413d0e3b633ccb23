"""Mail session ↔ platform session, persisted (docs/bridge.md, "One turn", step 4).

Without it every mail would start the model from zero. The map is one small
JSON file, replaced atomically (write a temporary file, fsync, rename), so a
crash leaves either the old map or the new one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mailui4agents.private_files import read_json_object, replace_json


@dataclass
class SessionMap:
    """``{mail session id: platform session id}`` of one bridge."""

    path: Path
    ids: dict[str, str] = field(default_factory=dict)

    @classmethod
    def open(cls, path: Path) -> SessionMap:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = read_json_object(path, "session map")
        return cls(path, {k: v for k, v in data.items() if isinstance(v, str) and v})

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
        replace_json(self.path, self.ids)
