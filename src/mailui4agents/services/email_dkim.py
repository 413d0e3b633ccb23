"""DKIM for inbound e-mail (docs/email.md, "Replies"), with dkimpy: with
`require_dkim`, a reply counts only when a DKIM-Signature whose `d=` is the
From address's domain verifies against the key its domain publishes in DNS.

A signature counts only when it signs the From header and has no `l=` tag (a
body length: whatever was appended after it, a forged "approve" on top of a
signed body for instance, would not be covered). The DNS lookup is dkimpy's
(dnspython) unless the gateway is given another (`Gateway.dkim_dns`: the tests'
resolver stub); it runs in a worker thread, at most TIMEOUT_S per lookup.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import dkim

DnsFunc = Callable[..., bytes | None]  # dkimpy's: (name: bytes, timeout=…) -> TXT bytes
TIMEOUT_S = 5
MAX_SIGNATURES = 5  # looked at per e-mail
_TAG = re.compile(rb"(?:^|;)\s*([a-z]+)\s*=\s*([^;]*)", re.IGNORECASE)


@dataclass(frozen=True)
class Checked:
    ok: bool
    detail: str  # which signature verified, or why none did


def _tags(value: bytes) -> dict[bytes, bytes]:
    unfolded = re.sub(rb"\s+", b" ", value)
    return {k.lower(): v.strip() for k, v in _TAG.findall(unfolded)}


def _signatures(raw: bytes) -> list[bytes]:
    d = dkim.DKIM(raw)
    return [v for k, v in d.headers if k.lower() == b"dkim-signature"]


def check(raw: bytes, domain: str, dnsfunc: DnsFunc | None = None) -> Checked:
    """Whether a DKIM signature of `domain` (the From's, lower-case ASCII)
    verifies on `raw`. Blocking (DNS): call `verify` from async code."""
    try:
        sigs = _signatures(raw)
    except Exception as exc:  # dkimpy could not split the message
        return Checked(ok=False, detail=f"unreadable for DKIM: {exc!r}")
    if not sigs:
        return Checked(ok=False, detail="no DKIM signature")
    reasons: list[str] = []
    for idx, sig in enumerate(sigs[:MAX_SIGNATURES]):
        tags = _tags(sig)
        signer = tags.get(b"d", b"").decode("ascii", "replace").lower().rstrip(".")
        if signer != domain:
            reasons.append(f"d={signer or '?'} is not {domain}")
            continue
        signed = [h.strip().lower() for h in tags.get(b"h", b"").split(b":")]
        if b"from" not in signed:
            reasons.append(f"d={signer}: From is not signed")
            continue
        if b"l" in tags:
            reasons.append(f"d={signer}: a body length (l=) leaves the rest unsigned")
            continue
        verifier = dkim.DKIM(raw, timeout=TIMEOUT_S)
        try:
            if dnsfunc is None:
                ok = verifier.verify(idx=idx)
            else:
                ok = verifier.verify(idx=idx, dnsfunc=dnsfunc)
        except Exception as exc:  # DKIMException, or dkimpy tripping on a hostile message
            reasons.append(f"d={signer}: {exc}")
            continue
        if ok:
            selector = tags.get(b"s", b"").decode("ascii", "replace")
            return Checked(ok=True, detail=f"DKIM d={signer} s={selector}")
        reasons.append(f"d={signer}: the signature does not verify")
    return Checked(ok=False, detail="; ".join(reasons)[:500])


async def verify(raw: bytes, domain: str, dnsfunc: DnsFunc | None = None) -> Checked:
    """`check` in a worker thread (its DNS lookups block)."""
    return await anyio.to_thread.run_sync(check, raw, domain, dnsfunc)
