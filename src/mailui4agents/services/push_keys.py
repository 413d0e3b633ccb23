"""The gateway's VAPID key pair (RFC 8292), made once on first start (docs/remote.md, "Push").

Browsers bind a push subscription to the public key they were given
(`applicationServerKey`): a push service refuses pushes signed by any other key,
so the key must never change, and every replica must sign with the same one.

- SQLite (one gateway per data dir): a PEM file, 0600, in the data dir. It is
  written under a temporary name and linked into place, so two processes
  starting together end up with the same key (the second link fails and it
  reads the first's).
- PostgreSQL (replicas): the `gateway_keys` row named "vapid", inserted if absent
  (ON CONFLICT DO NOTHING) and then read back: whichever replica inserted
  first, all of them read the same row.
"""

from __future__ import annotations

import base64
import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from mailui4agents.db.engine import Database
from mailui4agents.db.reach_tables import GatewayKeyRow
from mailui4agents.db.types import utcnow
from mailui4agents.private_files import create_private, private_dir

KEY_NAME = "vapid"
KEY_FILE = "vapid_private.pem"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str) -> bytes:
    """Unpadded (or padded) base64url; ValueError for anything else."""
    if not text or any(c not in _B64URL for c in text.rstrip("=")):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


_B64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@dataclass(frozen=True)
class VapidKey:
    private: ec.EllipticCurvePrivateKey

    @property
    def public_raw(self) -> bytes:
        """The uncompressed P-256 point (65 bytes): what browsers are given."""
        return self.private.public_key().public_bytes(
            serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
        )

    @property
    def public_b64(self) -> str:
        return b64url(self.public_raw)

    def private_pem(self) -> str:
        return self.private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode("ascii")

    @classmethod
    def generate(cls) -> VapidKey:
        return cls(ec.generate_private_key(ec.SECP256R1()))

    @classmethod
    def from_pem(cls, pem: str) -> VapidKey:
        key = serialization.load_pem_private_key(pem.encode("ascii"), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
            raise ValueError("the VAPID key is not a P-256 private key")
        return cls(key)


def _from_file(data_dir: Path) -> VapidKey:
    path = private_dir(data_dir) / KEY_FILE
    if not path.exists():
        fresh = VapidKey.generate()
        tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}.{os.urandom(4).hex()}")
        fd = create_private(tmp)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(fresh.private_pem())
                f.flush()
                os.fsync(f.fileno())
            with contextlib.suppress(FileExistsError):  # another process linked first
                os.link(tmp, path)  # atomic: the file appears whole or not at all
        finally:
            tmp.unlink(missing_ok=True)
    return VapidKey.from_pem(path.read_text("ascii"))


async def _from_row(db: Database) -> VapidKey:
    fresh = VapidKey.generate()
    async with db.write() as s:
        await s.execute(
            pg_insert(GatewayKeyRow)
            .values(name=KEY_NAME, private_pem=fresh.private_pem(), created_at=utcnow())
            .on_conflict_do_nothing(index_elements=["name"])
        )
    async with db.read() as s:
        pem = await s.scalar(
            select(GatewayKeyRow.private_pem).where(GatewayKeyRow.name == KEY_NAME)
        )
    assert pem is not None  # inserted above or by another replica
    return VapidKey.from_pem(pem)


async def load_or_create(db: Database, data_dir: Path) -> VapidKey:
    """The gateway's VAPID key, made now if this is the first start."""
    if db.is_sqlite:
        return _from_file(data_dir)
    return await _from_row(db)
