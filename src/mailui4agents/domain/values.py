"""Immutable value classes without ``dataclasses``.

The hook imports these on every tool call (hooks/types.py, client/asking.py),
where importing ``dataclasses`` (and ``inspect`` with it) costs more than the
decision itself (bench/README.md).
"""

from __future__ import annotations

from typing import Any


class Value:
    """Equality, hash and repr over ``__slots__``, and no attribute assignment
    after ``__init__`` (what ``@dataclass(frozen=True)`` gives)."""

    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _init(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({inner})"
