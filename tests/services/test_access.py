"""The one access rule: the check and its SQL mirror agree on random worlds, and
both agree with the rule written out independently here (docs/access.md)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from sqlalchemy import String, literal, select

from mailui4agents.db.tables import AgentRow, MailRow, RecipientRow, SessionRow, UserRow
from mailui4agents.services import access
from mailui4agents.services.principals import Principal
from mailui4agents.state import Gateway
from tests.conftest import Api

pytestmark = pytest.mark.anyio

AGENTS = ["a1", "a2", "a3"]
HUMANS = ["h1", "h2", "h3"]
WORKSPACES = ["/w/alpha", "/w/beta", ""]


def gateway(api: Api) -> Gateway:
    gw: Gateway = api.http._transport.app.state.gateway  # type: ignore[attr-defined]
    return gw


@dataclass
class World:
    workspace: dict[str, str] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
    owners: dict[str, set[str]] = field(default_factory=dict)


async def build(api: Api, rng: random.Random, count: int) -> World:
    for name in HUMANS:
        await api.user(name)
    for name in AGENTS:
        await api.agent(name)
    world = World()
    for i in range(count):
        ws = rng.choice(WORKSPACES)
        sender = rng.choice(HUMANS + AGENTS)
        # An agent starts work with another agent only from a session one of its
        # taskers started (docs/access.md): its new sessions here are with people.
        pool = HUMANS if sender in AGENTS else HUMANS + AGENTS
        others = [n for n in pool if n != sender]
        to = rng.sample(others, rng.randint(1, 2))
        cc = rng.sample([n for n in others if n not in to], rng.randint(0, 1))
        r = await api.send(
            sender, [f"{n}@{ws}.new" for n in to], cc=[f"{n}@{ws}.new" for n in cc], subject=f"t{i}"
        )
        assert r.status_code == 201, r.text
        sid = r.json()["session_id"]
        world.workspace[sid] = ws
        world.members[sid] = {sender, *to, *cc}
        world.owners[sid] = {n for n in [sender, *to] if n in HUMANS}
        # Sometimes a later mail adds someone, sometimes an owner names a decider.
        if rng.random() < 0.4:
            extra = rng.choice(
                [n for n in HUMANS + AGENTS if n not in world.members[sid]] or [sender]
            )
            alias = r.json()["session_alias"]
            poster = rng.choice(sorted(world.members[sid]))
            if poster in AGENTS and sender in AGENTS and extra in AGENTS:
                # Work an agent started is nobody's to hand on (docs/access.md).
                outside = [n for n in HUMANS if n not in world.members[sid]]
                if outside:
                    extra = rng.choice(outside)
                else:  # then a person of the session adds the agent
                    poster = sorted(n for n in world.members[sid] if n in HUMANS)[0]
            again = (
                await api.send(
                    poster, [f"{extra}@{ws}.{alias}"], subject="more", from_session_id=sid
                )
                if poster in AGENTS
                else await api.send(poster, [f"{extra}@{ws}.{alias}"], subject="more")
            )
            assert again.status_code == 201, again.text
            world.members[sid].add(extra)
        if world.owners[sid] and rng.random() < 0.4:
            owner = sorted(world.owners[sid])[0]
            decider = rng.choice(HUMANS)
            d = await api.http.post(
                f"/api/v1/sessions/{sid}/deciders", json={"name": decider}, headers=api.auth(owner)
            )
            assert d.status_code == 201, d.text
            world.members[sid].add(decider)  # a decider reads the session it decides in
            world.owners[sid].add(decider)
    return world


def may_read(world: World, who: str, admin: bool, scope: str | None, target: str) -> bool:
    """The read rule, written independently of the gateway's code."""
    if who in AGENTS:
        if scope is None:
            return False
        return who in world.members[target] and world.workspace[scope] == world.workspace[target]
    return admin or who in world.members[target]


@pytest.mark.parametrize("seed", [3, 17, 2026])
async def test_can_read_equals_readable_ids_and_the_rule(api: Api, seed: int) -> None:
    """And `may_read`, the same rule as a test of one row, with values or bound
    (`may_read_sql` + `sql_params`, services/reading.thread's statement)."""
    world = await build(api, random.Random(seed), count=10)
    sids = sorted(world.workspace)
    checked = 0
    async with gateway(api).db.read() as s:
        rows = {r.id: r for r in (await s.scalars(select(SessionRow))).all()}
        ids = {n: i for n, i in (await s.execute(select(AgentRow.name, AgentRow.id))).all()}
        ids.update((await s.execute(select(UserRow.username, UserRow.id))).all())
        readers: list[tuple[str, bool, Principal]] = [
            *((a, False, Principal("agent", ids[a], a)) for a in AGENTS),
            *((h, False, Principal("user", ids[h], h)) for h in HUMANS),
            ("admin", True, Principal("user", ids["admin"], "admin", is_admin=True)),
        ]
        for name, admin, principal in readers:
            scopes: list[str | None] = [None]
            if principal.kind == "agent":
                scopes += [sid for sid in sids if name in world.members[sid]]
            for scope in scopes:
                reader = await access.reader(s, principal, scope)
                mirror = set((await s.scalars(reader.readable_ids())).all())
                for sid in sids:
                    can = await reader.can_read(s, rows[sid])
                    assert can == (sid in mirror), (name, scope, sid)
                    one = select(literal(1)).where(reader.may_read(literal(sid, String)))
                    assert can == (await s.scalar(one) is not None), (name, scope, sid)
                    bound = access.may_read_sql(reader.shape, literal(sid, String))
                    found = await s.scalar(select(literal(1)).where(bound), reader.sql_params())
                    assert can == (found is not None), (name, scope, sid)
                    assert can == may_read(world, name, admin, scope, sid), (name, scope, sid)
                    decide = await reader.can_decide(s, rows[sid])
                    assert decide == (name in world.owners[sid]), (name, sid)
                    checked += 1
    assert checked > 100


@pytest.mark.parametrize("seed", [5, 2027])
async def test_can_read_mail_equals_its_sql_form_on_every_mail(api: Api, seed: int) -> None:
    """`may_read_mail` and its bound form (services/reading.read_mail's statement)
    against `can_read_mail`
    for every reader, scope and mail, and against the rule: an unscoped agent
    reads exactly the mails addressed to it."""
    world = await build(api, random.Random(seed), count=8)
    sids = sorted(world.workspace)
    checked = 0
    async with gateway(api).db.read() as s:
        rows = {r.id: r for r in (await s.scalars(select(SessionRow))).all()}
        mails = (await s.execute(select(MailRow.seq, MailRow.session_id))).all()
        to: dict[int, list[str]] = {seq: [] for seq, _ in mails}
        for seq, name in await s.execute(select(RecipientRow.mail_seq, RecipientRow.name)):
            to[seq].append(name)
        ids = {n: i for n, i in (await s.execute(select(AgentRow.name, AgentRow.id))).all()}
        ids.update((await s.execute(select(UserRow.username, UserRow.id))).all())
        readers = [
            *(Principal("agent", ids[a], a) for a in AGENTS),
            *(Principal("user", ids[h], h) for h in HUMANS),
            Principal("user", ids["admin"], "admin", is_admin=True),
        ]
        for principal in readers:
            scopes: list[str | None] = [None]
            if principal.kind == "agent":
                scopes += [sid for sid in sids if principal.name in world.members[sid]]
            for scope in scopes:
                reader = await access.reader(s, principal, scope)
                for seq, sid in mails:
                    can = await reader.can_read_mail(s, rows[sid], to[seq])
                    one = select(MailRow.seq).where(
                        MailRow.seq == seq, reader.may_read_mail(MailRow.seq, MailRow.session_id)
                    )
                    assert can == (await s.scalar(one) is not None), (principal.name, scope, seq)
                    bound = select(MailRow.seq).where(
                        MailRow.seq == seq,
                        access.may_read_mail_sql(reader.shape, MailRow.seq, MailRow.session_id),
                    )
                    found = await s.scalar(bound, reader.sql_params())
                    assert can == (found is not None), (principal.name, scope, seq)
                    if reader.unscoped_agent:
                        assert can == (principal.name in to[seq]), (principal.name, seq)
                    else:
                        rule = may_read(world, principal.name, principal.is_admin, scope, sid)
                        assert can == rule, (principal.name, scope, seq)
                    checked += 1
    assert checked > 100
