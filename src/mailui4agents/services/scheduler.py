"""Periodic work of the one gateway process: expiring unanswered requests."""

from __future__ import annotations

import logging

import anyio

from mailui4agents.services import permissions
from mailui4agents.state import Gateway

log = logging.getLogger("mailui4agents.scheduler")


async def tick(gw: Gateway) -> int:
    """One pass; returns how many requests expired. Reads first, so an idle
    gateway never takes the write lock."""
    async with gw.read() as s:
        if not await permissions.any_due(s):
            return 0
    async with gw.write() as s:
        return await permissions.expire_due(s)


async def run(gw: Gateway) -> None:
    """Run forever; a failed pass is logged and retried on the next tick."""
    while True:
        try:
            await tick(gw)
        except Exception:  # keep the scheduler alive; the next pass retries
            log.exception("scheduler pass failed")
        await anyio.sleep(gw.settings.scheduler_interval_s)
