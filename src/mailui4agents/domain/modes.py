"""Permission modes and enforcement levels: exact names, safe defaults."""

from __future__ import annotations

from typing import Literal

Mode = Literal["plan", "workspace", "full"]
Enforcement = Literal["native", "partial", "advisory"]
MODES: tuple[Mode, ...] = ("plan", "workspace", "full")
ENFORCEMENTS: tuple[Enforcement, ...] = ("native", "partial", "advisory")
DEFAULT_MODE: Mode = "workspace"


def mode_for_deciding(value: object) -> Mode:
    """Exact match only (`FULL` is not `full`); anything else is `workspace`, never
    `full`. Use only when deciding — never write this default into state."""
    for mode in MODES:
        if value == mode:
            return mode
    return DEFAULT_MODE


def normalise_enforcement(value: object) -> Enforcement:
    """Unknown → advisory; an explicit known value is kept as is (never rounded)."""
    for level in ENFORCEMENTS:
        if value == level:
            return level
    return "advisory"
