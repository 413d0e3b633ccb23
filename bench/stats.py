"""Percentiles and one-line summaries shared by the benchmarks."""

from __future__ import annotations

import statistics


def pct(values: list[float], p: float) -> float:
    """The p-th percentile by nearest rank (no interpolation)."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def summary(name: str, ms: list[float]) -> str:
    """`name: n=… p50=… p95=… p99=… mean=… min=… max=… ms`."""
    return (
        f"{name}: n={len(ms)} p50={pct(ms, 50):.1f} p95={pct(ms, 95):.1f} "
        f"p99={pct(ms, 99):.1f} mean={statistics.fmean(ms):.1f} "
        f"min={min(ms):.1f} max={max(ms):.1f} ms"
    )
