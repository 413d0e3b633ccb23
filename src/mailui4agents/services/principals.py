"""Who is calling: a human user or an agent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Kind = Literal["user", "agent"]


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. Names are unique across users and agents."""

    kind: Kind
    id: str
    name: str
    is_admin: bool = False

    @property
    def key(self) -> str:
        """The event-log owner key: "user:ana" or "agent:claude"."""
        return f"{self.kind}:{self.name}"

    @property
    def is_human(self) -> bool:
        return self.kind == "user"


def principal_key(name: str, is_human: bool) -> str:
    return f"{'user' if is_human else 'agent'}:{name}"
